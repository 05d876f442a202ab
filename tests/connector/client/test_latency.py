"""Latency fault avoidance: the tables, isolation, probes, selection, timeout split.

Every test drives time with a fake millisecond clock; nothing sleeps.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from connector.client import (
    DEFAULT_LATENCY_MAX_MS,
    DEFAULT_NOT_AVAILABLE_DURATION_MS,
    ISOLATION_LATENCY_MS,
    LatencyFaultTolerance,
    MQFaultStrategy,
    TopicPublishInfo,
    split_send_timeout,
)
from connector.client.latency import FaultItem, monotonic_ms
from connector.errors import ConfigError, TopicNotExistError
from connector.protocol.message import MessageQueue
from connector.protocol.route import BrokerData, QueueData, TopicRouteData
from tests.support.clocks import FakeMsClock


def make_route(queues: dict[str, int] | None = None) -> TopicRouteData:
    queues = queues or {"broker-a": 4, "broker-b": 4}
    return TopicRouteData(
        topic="T",
        queues=[
            QueueData(broker_name=n, read_queue_nums=q, write_queue_nums=q, perm=6)
            for n, q in queues.items()
        ],
        brokers=[
            BrokerData(cluster="c", broker_name=n, addrs={"0": f"10.0.0.{i}:10911"})
            for i, n in enumerate(queues, start=1)
        ],
    )


def make_info(queues: dict[str, int] | None = None, start: int = 0) -> TopicPublishInfo:
    return TopicPublishInfo.from_route(make_route(queues), start_index=start)


@pytest.fixture
def clock() -> FakeMsClock:
    return FakeMsClock(1_000_000.0)


@pytest.fixture
def strategy(clock: FakeMsClock) -> MQFaultStrategy:
    return MQFaultStrategy(clock=clock, send_latency_fault_enable=True)


# -- the tables -------------------------------------------------------------------------------


def test_defaults() -> None:
    assert DEFAULT_LATENCY_MAX_MS == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert DEFAULT_NOT_AVAILABLE_DURATION_MS == (0, 0, 30000, 60000, 120000, 180000, 600000)
    assert ISOLATION_LATENCY_MS == 30000
    s = MQFaultStrategy()
    assert s.latency_max_ms == DEFAULT_LATENCY_MAX_MS
    assert s.not_available_duration_ms == DEFAULT_NOT_AVAILABLE_DURATION_MS
    assert s.isolation_latency_ms == 30000
    assert s.send_latency_fault_enable is False


@pytest.mark.parametrize(
    ("latency_ms", "duration_ms"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (99, 0),
        (100, 0),
        (549, 0),
        (549.9, 0),
        (550, 30000),
        (999, 30000),
        (1000, 60000),
        (1999, 60000),
        (2000, 120000),
        (2999, 120000),
        (3000, 180000),
        (4000, 180000),
        (14999, 180000),
        (15000, 600000),
        (30000, 600000),
        (10**9, 600000),
    ],
)
def test_compute_not_available_duration(latency_ms: float, duration_ms: int) -> None:
    assert MQFaultStrategy().compute_not_available_duration(latency_ms) == duration_ms


def test_custom_tables() -> None:
    s = MQFaultStrategy(latency_max_ms=(10, 20), not_available_duration_ms=(5, 7))
    assert [s.compute_not_available_duration(x) for x in (9, 10, 19, 20)] == [0, 5, 5, 7]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"latency_max_ms": (50, 100), "not_available_duration_ms": (0,)}, "same length"),
        ({"latency_max_ms": (), "not_available_duration_ms": ()}, "non-empty"),
        ({"latency_max_ms": (50, 50), "not_available_duration_ms": (0, 1)}, "increasing"),
        ({"latency_max_ms": (100, 50), "not_available_duration_ms": (0, 1)}, "increasing"),
        ({"latency_max_ms": (-1, 50), "not_available_duration_ms": (0, 1)}, "negative"),
        ({"latency_max_ms": (1, 50), "not_available_duration_ms": (0, -1)}, "negative"),
        ({"isolation_latency_ms": -1}, "negative"),
        ({"probe_interval_ms": 0}, "probe_interval_ms"),
        ({"probe_timeout_ms": -5}, "probe_timeout_ms"),
    ],
)
def test_settings_validation(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        MQFaultStrategy(**kwargs)  # type: ignore[arg-type]


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        MQFaultStrategy(latency_max_ms=(1,), not_available_duration_ms=(1, 2))


# -- recording sends --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("latency_ms", "duration_ms"),
    [(49, 0), (550, 30000), (1000, 60000), (2000, 120000), (3000, 180000), (15000, 600000)],
)
def test_slow_send_benches_for_the_table_duration(
    clock: FakeMsClock, strategy: MQFaultStrategy, latency_ms: int, duration_ms: int
) -> None:
    strategy.update_fault_item("broker-a", latency_ms, isolation=False)
    if duration_ms:
        assert not strategy.is_available("broker-a")
        clock.advance(duration_ms - 1)
        assert not strategy.is_available("broker-a")
    clock.advance(1)
    assert strategy.is_available("broker-a")
    assert strategy.latency_fault_tolerance.is_reachable("broker-a")


def test_isolation_benches_for_ten_minutes(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    strategy.update_fault_item("broker-a", 3, isolation=True)  # a fast connection refused
    tolerance = strategy.latency_fault_tolerance
    assert not strategy.is_available("broker-a")
    assert not tolerance.is_reachable("broker-a")
    item = tolerance.get("broker-a")
    assert item is not None
    assert item.current_latency_ms == 3
    assert item.start_timestamp_ms == clock.now_ms + 600000
    clock.advance(599_999)
    assert not strategy.is_available("broker-a")
    clock.advance(1)
    assert strategy.is_available("broker-a")


def test_custom_isolation_latency(clock: FakeMsClock) -> None:
    s = MQFaultStrategy(clock=clock, send_latency_fault_enable=True, isolation_latency_ms=1000)
    s.update_fault_item("broker-a", 1, isolation=True)
    clock.advance(59_999)
    assert not s.is_available("broker-a")
    clock.advance(1)
    assert s.is_available("broker-a")


def test_a_fast_send_clears_a_penalty(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    strategy.update_fault_item("broker-a", 5000, isolation=False)
    assert not strategy.is_available("broker-a")
    strategy.update_fault_item("broker-a", 10, isolation=False)
    assert strategy.is_available("broker-a")


def test_disabled_records_nothing(clock: FakeMsClock) -> None:
    s = MQFaultStrategy(clock=clock)
    s.update_fault_item("broker-a", 30000, isolation=True)
    assert s.is_available("broker-a")
    assert s.latency_fault_tolerance.items() == {}
    assert s.brokers_to_probe() == []


def test_unknown_broker_is_available_and_reachable() -> None:
    tolerance = LatencyFaultTolerance(clock=FakeMsClock(1_000_000.0))
    assert tolerance.is_available("nobody")
    assert tolerance.is_reachable("nobody")
    assert tolerance.get("nobody") is None
    assert tolerance.pick_one_at_least() is None


def test_remove(clock: FakeMsClock) -> None:
    tolerance = LatencyFaultTolerance(clock=clock)
    tolerance.update_fault_item("broker-a", 5, 1000, reachable=False)
    tolerance.remove("broker-a")
    tolerance.remove("broker-a")
    assert tolerance.is_available("broker-a")
    assert tolerance.brokers_to_probe() == []


def test_negative_duration_refused() -> None:
    with pytest.raises(ValueError):
        LatencyFaultTolerance(clock=FakeMsClock(1_000_000.0)).update_fault_item("a", 1, -1)


def test_returned_items_are_snapshots(clock: FakeMsClock) -> None:
    tolerance = LatencyFaultTolerance(clock=clock)
    tolerance.update_fault_item("broker-a", 5, 1000, reachable=False)
    item = tolerance.get("broker-a")
    snapshot = tolerance.items()
    tolerance.update_fault_item("broker-a", 7, 0)
    tolerance.brokers_to_probe()
    assert item == FaultItem(
        "broker-a", 5, clock.now_ms + 1000, False, next_probe_ms=clock.now_ms + 1000
    )
    assert snapshot == {"broker-a": item}
    snapshot.clear()
    assert tolerance.get("broker-a") is not None


def test_default_clock_is_monotonic_ms() -> None:
    a = monotonic_ms()
    b = monotonic_ms()
    assert 0 <= b - a < 1000


# -- pick_one_at_least ------------------------------------------------------------------------


def test_pick_one_at_least_single_item(clock: FakeMsClock) -> None:
    tolerance = LatencyFaultTolerance(clock=clock)
    tolerance.update_fault_item("broker-a", 5, 1000)
    assert [tolerance.pick_one_at_least() for _ in range(3)] == ["broker-a"] * 3


def test_pick_one_at_least_ranks_reachable_then_latency_then_start(clock: FakeMsClock) -> None:
    tolerance = LatencyFaultTolerance(clock=clock)
    tolerance.update_fault_item("broker-a", 1, 600000, reachable=False)  # unreachable: worst
    tolerance.update_fault_item("broker-b", 3000, 180000)
    tolerance.update_fault_item("broker-c", 600, 30000)
    # two or three items: the better half is one item, always the best
    assert [tolerance.pick_one_at_least() for _ in range(4)] == ["broker-c"] * 4
    clock.advance(1)
    tolerance.update_fault_item("broker-d", 600, 30000)  # same latency, later start
    tolerance.update_fault_item("broker-e", 600, 30000)
    # five items, better half = 2: turns between c and (d vs e: equal, by name) d
    assert [tolerance.pick_one_at_least() for _ in range(4)] == [
        "broker-c",
        "broker-d",
        "broker-c",
        "broker-d",
    ]


def test_pick_one_at_least_prefers_available(clock: FakeMsClock) -> None:
    tolerance = LatencyFaultTolerance(clock=clock)
    tolerance.update_fault_item("broker-a", 10, 0)
    tolerance.update_fault_item("broker-b", 1, 1000)
    assert tolerance.pick_one_at_least() == "broker-a"


def test_pick_one_at_least_among(clock: FakeMsClock) -> None:
    tolerance = LatencyFaultTolerance(clock=clock)
    tolerance.update_fault_item("broker-a", 10, 1000)
    tolerance.update_fault_item("broker-b", 20, 1000)
    assert tolerance.pick_one_at_least(among={"broker-b", "broker-x"}) == "broker-b"
    assert tolerance.pick_one_at_least(among=()) is None


def test_pick_one_at_least_is_deterministic() -> None:
    def run() -> list[str | None]:
        tolerance = LatencyFaultTolerance(clock=FakeMsClock(1_000_000.0))
        for i, name in enumerate(["e", "b", "d", "a", "c", "f"]):
            tolerance.update_fault_item(name, 100 * (i % 3), 50000)
        return [tolerance.pick_one_at_least() for _ in range(9)]

    first = run()
    assert all(run() == first for _ in range(5))
    # ranked a, e (0 ms; same start, by name), b, c (100 ms), d, f: turns over the best 3
    assert first == ["a", "e", "b"] * 3


# -- probes -----------------------------------------------------------------------------------


@pytest.fixture
def isolated(clock: FakeMsClock, strategy: MQFaultStrategy) -> MQFaultStrategy:
    strategy.update_fault_item("broker-a", 2, isolation=True)
    return strategy


def test_first_probe_after_the_interval(clock: FakeMsClock, isolated: MQFaultStrategy) -> None:
    assert isolated.brokers_to_probe() == []
    clock.advance(999)
    assert isolated.brokers_to_probe() == []
    clock.advance(1)
    assert isolated.brokers_to_probe() == ["broker-a"]
    assert isolated.brokers_to_probe() == []  # in flight: not handed out twice


def test_probe_ok_readmits_before_the_penalty_ends(
    clock: FakeMsClock, isolated: MQFaultStrategy
) -> None:
    clock.advance(1000)
    assert isolated.brokers_to_probe() == ["broker-a"]
    clock.advance(40)
    assert isolated.probe_result("broker-a", True, 40.0)
    assert isolated.is_available("broker-a")
    tolerance = isolated.latency_fault_tolerance
    assert tolerance.is_reachable("broker-a")
    item = tolerance.get("broker-a")
    assert item is not None
    assert item.current_latency_ms == 40.0
    assert item.probe_deadline_ms is None
    clock.advance(10_000)
    assert isolated.brokers_to_probe() == []


def test_probe_failure_keeps_isolated_and_reschedules(
    clock: FakeMsClock, isolated: MQFaultStrategy
) -> None:
    clock.advance(1000)
    assert isolated.brokers_to_probe() == ["broker-a"]
    clock.advance(100)
    assert isolated.probe_result("broker-a", False, 0.0)
    assert not isolated.is_available("broker-a")
    assert not isolated.latency_fault_tolerance.is_reachable("broker-a")
    clock.advance(999)
    assert isolated.brokers_to_probe() == []
    clock.advance(1)
    assert isolated.brokers_to_probe() == ["broker-a"]


def test_probe_that_never_reports_is_due_again(
    clock: FakeMsClock, isolated: MQFaultStrategy
) -> None:
    clock.advance(1000)
    assert isolated.brokers_to_probe() == ["broker-a"]
    clock.advance(2999)
    assert isolated.brokers_to_probe() == []
    clock.advance(1)
    assert isolated.brokers_to_probe() == ["broker-a"]  # deadline passed: never stuck
    for _ in range(5):  # and again, every timeout
        clock.advance(3000)
        assert isolated.brokers_to_probe() == ["broker-a"]
    # a late answer still counts while a probe is in flight
    assert isolated.probe_result("broker-a", True, 5.0)
    assert isolated.is_available("broker-a")


def test_probe_result_without_probe_in_flight_is_ignored(
    clock: FakeMsClock, isolated: MQFaultStrategy
) -> None:
    assert not isolated.probe_result("broker-a", True, 1.0)
    assert not isolated.probe_result("broker-z", True, 1.0)
    assert not isolated.is_available("broker-a")


def test_a_send_cancels_the_probe_in_flight(clock: FakeMsClock, isolated: MQFaultStrategy) -> None:
    clock.advance(1000)
    assert isolated.brokers_to_probe() == ["broker-a"]
    isolated.update_fault_item("broker-a", 3, isolation=True)  # a newer failure
    assert not isolated.probe_result("broker-a", True, 1.0)  # the stale probe is dropped
    assert not isolated.is_available("broker-a")
    clock.advance(1000)
    assert isolated.brokers_to_probe() == ["broker-a"]


def test_slow_brokers_are_not_probed(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    strategy.update_fault_item("broker-a", 5000, isolation=False)
    clock.advance(10_000)
    assert strategy.brokers_to_probe() == []
    assert not strategy.is_available("broker-a")


def test_no_probe_once_the_penalty_is_over(clock: FakeMsClock, isolated: MQFaultStrategy) -> None:
    clock.advance(600_000)
    assert isolated.is_available("broker-a")
    assert isolated.brokers_to_probe() == []


def test_brokers_to_probe_sorted(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    for name in ("broker-c", "broker-a", "broker-b"):
        strategy.update_fault_item(name, 1, isolation=True)
    clock.advance(1000)
    assert strategy.brokers_to_probe() == ["broker-a", "broker-b", "broker-c"]


def test_custom_probe_timing(clock: FakeMsClock) -> None:
    s = MQFaultStrategy(
        clock=clock, send_latency_fault_enable=True, probe_interval_ms=50, probe_timeout_ms=20
    )
    s.update_fault_item("broker-a", 1, isolation=True)
    clock.advance(50)
    assert s.brokers_to_probe() == ["broker-a"]
    clock.advance(20)
    assert s.brokers_to_probe() == ["broker-a"]


# -- selection --------------------------------------------------------------------------------


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("start", range(8))
def test_retry_avoids_the_last_broker(clock: FakeMsClock, enabled: bool, start: int) -> None:
    s = MQFaultStrategy(clock=clock, send_latency_fault_enable=enabled)
    info = make_info(start=start)
    for _ in range(16):
        assert s.select_one_message_queue(info, "broker-a").broker_name == "broker-b"
        assert s.select_one_message_queue(info, "broker-b").broker_name == "broker-a"


def test_retry_avoids_the_last_broker_after_its_failure(
    clock: FakeMsClock, strategy: MQFaultStrategy
) -> None:
    # the real retry: broker-a failed fast; RocketMQ 4 (#2046) would prefer it again
    info = make_info()
    strategy.update_fault_item("broker-a", 20, isolation=False)  # recorded, still available
    for _ in range(16):
        assert strategy.select_one_message_queue(info, "broker-a").broker_name == "broker-b"


def test_last_broker_used_when_it_is_the_only_available(
    clock: FakeMsClock, strategy: MQFaultStrategy
) -> None:
    info = make_info({"broker-a": 2, "broker-b": 2, "broker-c": 2})
    strategy.update_fault_item("broker-b", 1, isolation=True)
    strategy.update_fault_item("broker-c", 1, isolation=True)
    picked = {strategy.select_one_message_queue(info, "broker-a") for _ in range(10)}
    assert {q.broker_name for q in picked} == {"broker-a"}
    assert picked == set(info.queues_of("broker-a"))


def test_isolated_broker_skipped_until_its_penalty_ends(
    clock: FakeMsClock, strategy: MQFaultStrategy
) -> None:
    info = make_info()
    strategy.update_fault_item("broker-a", 1, isolation=True)
    for _ in range(200):
        assert strategy.select_one_message_queue(info, None).broker_name == "broker-b"
        clock.advance(2999)  # 200 * 2999 < 600000
    clock.advance(600_000)
    brokers = Counter(strategy.select_one_message_queue(info, None).broker_name for _ in range(80))
    assert brokers == {"broker-a": 40, "broker-b": 40}


def test_slow_broker_skipped_for_its_duration(
    clock: FakeMsClock, strategy: MQFaultStrategy
) -> None:
    info = make_info()
    strategy.update_fault_item("broker-b", 1000, isolation=False)  # 60 s
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(50)} == {
        "broker-a"
    }
    clock.advance(60_000)
    assert {strategy.select_one_message_queue(info, None).broker_name for _ in range(50)} == {
        "broker-a",
        "broker-b",
    }


def test_all_isolated_picks_the_least_bad(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    info = make_info()
    strategy.update_fault_item("broker-a", 1, isolation=True)  # unreachable
    strategy.update_fault_item("broker-b", 3500, isolation=False)  # slow but reachable
    picked = [strategy.select_one_message_queue(info, None) for _ in range(8)]
    assert {q.broker_name for q in picked} == {"broker-b"}
    assert Counter(picked) == dict.fromkeys(info.queues_of("broker-b"), 2)
    assert all(q in info.message_queues for q in picked)  # the route's own objects


def test_all_isolated_retry_prefers_another_broker(
    clock: FakeMsClock, strategy: MQFaultStrategy
) -> None:
    info = make_info()
    strategy.update_fault_item("broker-a", 20000, isolation=False)  # slow but reachable
    strategy.update_fault_item("broker-b", 1, isolation=True)  # unreachable: ranked worse
    assert strategy.select_one_message_queue(info, "broker-a").broker_name == "broker-b"
    assert strategy.select_one_message_queue(info, None).broker_name == "broker-a"


def test_all_isolated_single_broker(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    info = make_info({"broker-a": 2})
    strategy.update_fault_item("broker-a", 1, isolation=True)
    assert strategy.select_one_message_queue(info, "broker-a").broker_name == "broker-a"


def test_other_topics_faults_do_not_leak(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    # broker-z (another topic's) is the least bad overall; this topic still gets its own broker
    info = make_info({"broker-a": 2})
    strategy.update_fault_item("broker-z", 600, isolation=False)
    strategy.update_fault_item("broker-a", 1, isolation=True)
    assert strategy.select_one_message_queue(info, None).broker_name == "broker-a"
    assert strategy.latency_fault_tolerance.get("broker-z") is not None  # not removed


@pytest.mark.parametrize("enabled", [True, False])
def test_round_robin_covers_all_queues_evenly(clock: FakeMsClock, enabled: bool) -> None:
    s = MQFaultStrategy(clock=clock, send_latency_fault_enable=enabled)
    info = make_info({"broker-a": 3, "broker-b": 5}, start=12345)
    counts = Counter(s.select_one_message_queue(info, None) for _ in range(8 * 25))
    assert counts == dict.fromkeys(info.message_queues, 25)


def test_empty_publish_info_raises(strategy: MQFaultStrategy) -> None:
    info = make_info({"broker-a": 0})
    with pytest.raises(TopicNotExistError):
        strategy.select_one_message_queue(info, None)


def test_no_shared_object_mutation(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    route = make_route({"broker-a": 4, "broker-b": 4, "broker-c": 2})
    route_before = route.model_dump()
    info = TopicPublishInfo.from_route(route, start_index=0)
    queues_before = info.message_queues
    copies = [MessageQueue(q.topic, q.broker_name, q.queue_id) for q in queues_before]
    last: str | None = None
    for i in range(300):
        mq = strategy.select_one_message_queue(info, last)
        assert mq in queues_before
        if i % 7 == 0:
            strategy.update_fault_item(mq.broker_name, 1, isolation=True)
        elif i % 5 == 0:
            strategy.update_fault_item(mq.broker_name, 4000, isolation=False)
        else:
            strategy.update_fault_item(mq.broker_name, 10, isolation=False)
        last = mq.broker_name if i % 3 == 0 else None
        clock.advance(10_000)
        for name in strategy.brokers_to_probe():
            strategy.probe_result(name, i % 2 == 0, 3.0)
    assert route.model_dump() == route_before
    assert info.route is route
    assert info.message_queues is queues_before
    assert list(info.message_queues) == copies


def test_thread_safety_smoke(clock: FakeMsClock, strategy: MQFaultStrategy) -> None:
    info = make_info({"broker-a": 4, "broker-b": 4})
    per_thread, threads_n = 800, 8
    results: list[Counter[MessageQueue]] = []
    lock = threading.Lock()
    start = threading.Barrier(threads_n)

    def work(n: int) -> None:
        mine: Counter[MessageQueue] = Counter()
        start.wait(10)
        for i in range(per_thread):
            mq = strategy.select_one_message_queue(info, None)
            mine[mq] += 1
            if n == 0 and i % 50 == 0:  # one thread keeps updating faults (all fast sends)
                strategy.update_fault_item(mq.broker_name, 5, isolation=False)
                strategy.brokers_to_probe()
        with lock:
            results.append(mine)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    total: Counter[MessageQueue] = sum(results, Counter())
    assert sum(total.values()) == per_thread * threads_n
    # one shared counter: every index handed out once, so the load is exactly even
    assert total == dict.fromkeys(info.message_queues, per_thread * threads_n // 8)


# -- split_send_timeout -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("remaining_ms", "attempts_left", "expected_ms"),
    [
        (3000, 3, 1000),  # an equal share of the budget
        (2000, 2, 1000),
        (2990, 2, 1495),  # a fast failure leaves more for the later attempts
        (1000, 1, 1000),  # the last attempt gets all that remains
        (3000, 1, 3000),
        (450, 3, 200),  # the share would be 150: raised to the 200 ms floor
        (150, 3, 150),  # never more than what remains
        (0, 3, 0),
        (-5, 2, 0),
        (-5, 1, 0),
    ],
)
def test_split_send_timeout(remaining_ms: float, attempts_left: int, expected_ms: float) -> None:
    assert split_send_timeout(remaining_ms, attempts_left) == expected_ms


def test_split_send_timeout_custom_floor() -> None:
    assert split_send_timeout(300, 3, min_attempt_ms=50) == 100
    assert split_send_timeout(90, 3, min_attempt_ms=50) == 50


def test_split_send_timeout_budget_is_kept() -> None:
    # attempts that each time out use at most the budget, and each gets a fair share
    remaining, used = 3000.0, []
    for attempts_left in (3, 2, 1):
        t = split_send_timeout(remaining, attempts_left)
        used.append(t)
        remaining -= t
    assert used == [1000, 1000, 1000]
    assert remaining == 0


def test_split_send_timeout_needs_an_attempt() -> None:
    with pytest.raises(ValueError):
        split_send_timeout(1000, 0)
