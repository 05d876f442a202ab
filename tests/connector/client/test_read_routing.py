"""Which node of a broker name reads go to: suggestions, failed nodes, route refreshes.

Every test drives time with a fake millisecond clock; nothing sleeps, nothing connects.
"""

from __future__ import annotations

import threading

import pytest

from connector.client import (
    FAILED_ADDR_AVOID_MS,
    ROUTE_REFRESH_INTERVAL_MS,
    ReadChoice,
    ReadRouting,
)
from connector.errors import ConfigError
from tests.support.clocks import FakeMsClock

MASTER = "10.0.0.1:10911"
SLAVE = "10.0.0.2:10911"
SLAVE2 = "10.0.0.3:10911"
BOTH = {"0": MASTER, "1": SLAVE}


@pytest.fixture
def clock() -> FakeMsClock:
    return FakeMsClock(1_000_000.0)


@pytest.fixture
def routing(clock: FakeMsClock) -> ReadRouting:
    return ReadRouting(clock=clock)


def test_the_master_until_an_answer_says_otherwise(routing: ReadRouting) -> None:
    assert routing.suggested("broker-a") == 0
    assert routing.choose("broker-a", BOTH) == ReadChoice(MASTER, 0, preferred=True)


def test_a_slave_that_lost_its_master_keeps_its_readers_until_it_says_0(
    routing: ReadRouting,
) -> None:
    routing.record_suggestion("broker-a", "1")
    assert routing.choose("broker-a", BOTH) == ReadChoice(SLAVE, 1, preferred=True)
    routing.record_suggestion("broker-a", "0")  # its master is back
    assert routing.choose("broker-a", BOTH) == ReadChoice(MASTER, 0, preferred=True)


def test_suggestions_are_per_broker_name(routing: ReadRouting) -> None:
    routing.record_suggestion("broker-a", 1)
    other = {"0": "10.0.1.1:10911", "1": "10.0.1.2:10911"}
    assert routing.choose("broker-a", BOTH).addr == SLAVE  # type: ignore[union-attr]
    assert routing.choose("broker-b", other).addr == "10.0.1.1:10911"  # type: ignore[union-attr]


@pytest.mark.parametrize("junk", [None, "", "x", "-1", -1, " 1"])
def test_an_answer_without_a_usable_suggestion_changes_nothing(
    routing: ReadRouting, junk: int | str | None
) -> None:
    routing.record_suggestion("broker-a", "1")
    routing.record_suggestion("broker-a", junk)
    assert routing.suggested("broker-a") == 1


def test_a_failed_master_is_avoided_for_a_while_then_read_again(
    routing: ReadRouting, clock: FakeMsClock
) -> None:
    routing.mark_failed(MASTER)
    assert routing.is_failed(MASTER)
    assert routing.choose("broker-a", BOTH) == ReadChoice(SLAVE, 1, preferred=False)
    clock.advance(FAILED_ADDR_AVOID_MS - 1)
    assert routing.choose("broker-a", BOTH).addr == SLAVE  # type: ignore[union-attr]
    clock.advance(1)
    assert not routing.is_failed(MASTER)
    assert routing.choose("broker-a", BOTH) == ReadChoice(MASTER, 0, preferred=True)


def test_a_node_that_answers_is_no_longer_avoided(routing: ReadRouting) -> None:
    routing.mark_failed(MASTER)
    routing.succeeded(MASTER)
    routing.succeeded(SLAVE)  # never failed: nothing to forget
    assert routing.choose("broker-a", BOTH) == ReadChoice(MASTER, 0, preferred=True)


def test_a_master_gone_from_the_route_leaves_its_slave(routing: ReadRouting) -> None:
    assert routing.choose("broker-a", {"1": SLAVE}) == ReadChoice(SLAVE, 1, preferred=False)
    routing.record_suggestion("broker-a", "1")
    assert routing.choose("broker-a", {"1": SLAVE}) == ReadChoice(SLAVE, 1, preferred=True)


def test_a_suggested_slave_missing_or_failed_falls_back_to_the_master_first(
    routing: ReadRouting,
) -> None:
    routing.record_suggestion("broker-a", "2")
    three = {"0": MASTER, "1": SLAVE, "2": SLAVE2}
    assert routing.choose("broker-a", three) == ReadChoice(SLAVE2, 2, preferred=True)
    routing.mark_failed(SLAVE2)
    assert routing.choose("broker-a", three) == ReadChoice(MASTER, 0, preferred=False)
    routing.mark_failed(MASTER)
    assert routing.choose("broker-a", three) == ReadChoice(SLAVE, 1, preferred=False)
    assert routing.choose("broker-a", BOTH) == ReadChoice(SLAVE, 1, preferred=False)


def test_slaves_are_taken_by_id(routing: ReadRouting) -> None:
    routing.mark_failed(MASTER)
    nodes = {"2": SLAVE2, "0": MASTER, "1": SLAVE}
    assert routing.choose("broker-a", nodes) == ReadChoice(SLAVE, 1, preferred=False)


def test_when_every_node_failed_the_suggested_one_is_tried_anyway(routing: ReadRouting) -> None:
    routing.mark_failed(MASTER)
    assert routing.choose("broker-a", {"0": MASTER}) == ReadChoice(MASTER, 0, preferred=False)
    routing.mark_failed(SLAVE)
    assert routing.choose("broker-a", BOTH) == ReadChoice(MASTER, 0, preferred=False)
    routing.record_suggestion("broker-a", "1")
    assert routing.choose("broker-a", BOTH) == ReadChoice(SLAVE, 1, preferred=False)


def test_a_master_restarted_on_another_port_is_not_held_against_it(
    routing: ReadRouting,
) -> None:
    routing.mark_failed(MASTER)
    routing.record_suggestion("broker-a", "1")
    # the slave lost the master: stay on the slave, even with the master's old address listed
    assert routing.choose("broker-a", BOTH) == ReadChoice(SLAVE, 1, preferred=True)
    # the slave has the master again: its old address is still avoided, so not preferred
    # (the consumer asks for the route), and the new address is read at once
    routing.record_suggestion("broker-a", "0")
    assert routing.choose("broker-a", BOTH) == ReadChoice(SLAVE, 1, preferred=False)
    moved = {"0": "10.0.0.1:20911", "1": SLAVE}
    assert routing.choose("broker-a", moved) == ReadChoice("10.0.0.1:20911", 0, preferred=True)


def test_no_node_no_choice(routing: ReadRouting) -> None:
    assert routing.choose("broker-a", {}) is None
    assert routing.choose("broker-a", {"x": MASTER, "1": ""}) is None


def test_ids_that_are_not_numbers_are_ignored(routing: ReadRouting) -> None:
    routing.mark_failed(MASTER)
    nodes = {"0": MASTER, "slave": "10.9.9.9:1", "1": SLAVE}
    assert routing.choose("broker-a", nodes) == ReadChoice(SLAVE, 1, preferred=False)


def test_route_refreshes_are_spaced_per_key(routing: ReadRouting, clock: FakeMsClock) -> None:
    assert routing.refresh_due(("T", "broker-a"))
    assert not routing.refresh_due(("T", "broker-a"))
    assert routing.refresh_due(("U", "broker-a"))  # another key has its own spacing
    clock.advance(ROUTE_REFRESH_INTERVAL_MS - 1)
    assert not routing.refresh_due(("T", "broker-a"))
    clock.advance(1)
    assert routing.refresh_due(("T", "broker-a"))


def test_expired_failures_are_forgotten(routing: ReadRouting, clock: FakeMsClock) -> None:
    for i in range(100):
        routing.mark_failed(f"10.0.0.{i}:1")
    clock.advance(FAILED_ADDR_AVOID_MS)
    routing.mark_failed(MASTER)
    assert not any(routing.is_failed(f"10.0.0.{i}:1") for i in range(100))
    assert routing.is_failed(MASTER)


def test_settings_are_checked_and_choices_frozen() -> None:
    with pytest.raises(ConfigError):
        ReadRouting(failed_addr_avoid_ms=-1)
    with pytest.raises(ConfigError):
        ReadRouting(route_refresh_interval_ms=-1)
    choice = ReadRouting().choose("broker-a", BOTH)
    assert choice is not None
    with pytest.raises(AttributeError):
        choice.addr = SLAVE  # type: ignore[misc]


def test_the_default_clock_is_monotonic_milliseconds() -> None:
    routing = ReadRouting(failed_addr_avoid_ms=60_000)
    routing.mark_failed(MASTER)
    assert routing.is_failed(MASTER)


def test_threads_marking_and_choosing_at_once(routing: ReadRouting, clock: FakeMsClock) -> None:
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(2000):
                routing.mark_failed(f"10.1.{i}.{j % 50}:1")
                routing.succeeded(f"10.1.{i}.{(j + 7) % 50}:1")
                assert routing.choose("broker-a", BOTH) is not None
                routing.record_suggestion("broker-a", str(j % 2))
                clock.advance(1)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
