"""Delayed delivery through a real broker: on time, exactly once, across restarts and crashes."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from connector.protocol.properties import PropertyKeys
from tests.support.processes import Servers
from tests.support.rest import body_of, create_topic, health, pull_all, send
from tests.support.waits import holds_for, wait_until

P = PropertyKeys
DELAY_ENV = {"PYMQ_MESSAGE_DELAY_LEVEL": "1s 3s 10s"}


@pytest.fixture(scope="module")
def broker(module_servers: Servers) -> str:
    return module_servers.broker(env=DELAY_ENV).http_addr


def msg_ids(addr: str, topic: str, queue_id: int) -> Counter[str]:
    """How often each msg_id occurs in the whole queue."""
    return Counter(m["msg_id"] for m in pull_all(addr, topic, queue_id))


def until(wall_time: float) -> None:
    """Sleep until a wall-clock time (the broker's delays are wall-clock times too)."""
    time.sleep(max(0.0, wall_time - time.time()))


def assert_not_delivered_before(addr: str, topic: str, queue_id: int, due: float) -> None:
    """The queue holds nothing, if the check was answered before ``due`` (wall clock)."""
    ids = msg_ids(addr, topic, queue_id)
    answered = time.time()
    if answered < due:  # a check answered after the due time proves nothing
        assert not ids, f"delivered {due - answered:.2f} s early: {ids}"


def test_delay_levels_deliver_on_time_and_once(broker: str) -> None:
    create_topic(broker, "Delayed")
    t_send = time.time()
    one = send(
        broker,
        "Delayed",
        "after 1s",
        queue_id=0,
        delay_level=1,
        tags="D",
        keys=["d-one"],
        properties={"p": "1"},
    )
    two = send(broker, "Delayed", "after 3s", queue_id=1, delay_level=2, keys=["d-two"])
    due1, due2 = t_send + 1.0, t_send + 3.0
    # parked in the schedule topic, not in the target queues
    assert one["topic"] == two["topic"] == "SCHEDULE_TOPIC_XXXX"
    assert (one["queue_id"], two["queue_id"]) == (0, 1)  # schedule queue = level - 1
    assert_not_delivered_before(broker, "Delayed", 0, due1)
    assert_not_delivered_before(broker, "Delayed", 1, due2)

    until(due1 - 0.3)
    assert_not_delivered_before(broker, "Delayed", 0, due1)
    wait_until(
        lambda: msg_ids(broker, "Delayed", 0)[one["msg_id"]] == 1,
        3.0,
        what="level-1 message delivered",
    )
    until(due2 - 0.3)
    assert_not_delivered_before(broker, "Delayed", 1, due2)
    wait_until(
        lambda: msg_ids(broker, "Delayed", 1)[two["msg_id"]] == 1,
        3.0,
        what="level-2 message delivered",
    )

    # exactly once, and still once a second later
    holds_for(
        lambda: (
            msg_ids(broker, "Delayed", 0) == Counter({one["msg_id"]: 1})
            and msg_ids(broker, "Delayed", 1) == Counter({two["msg_id"]: 1})
        ),
        1.0,
        interval_s=0.2,
        what="one delivery each",
    )
    (m1,) = pull_all(broker, "Delayed", 0)
    (m2,) = pull_all(broker, "Delayed", 1)
    assert (m1["topic"], m1["queue_id"], m1["queue_offset"]) == ("Delayed", 0, 0)
    assert body_of(m1) == b"after 1s" and body_of(m2) == b"after 3s"
    assert (m1["tags"], m1["keys"], m1["properties"]["p"]) == ("D", ["d-one"], "1")
    assert m2["keys"] == ["d-two"]
    for m, delay_ms in ((m1, 1000), (m2, 3000)):
        assert m["store_timestamp"] >= int(t_send * 1000) + delay_ms - 1
        # delivery strips the schedule bookkeeping
        assert not {P.DELAY_TIME_LEVEL, P.REAL_TOPIC, P.REAL_QUEUE_ID} & set(m["properties"])
    # nothing landed in the queues no message asked for
    assert pull_all(broker, "Delayed", 2) + pull_all(broker, "Delayed", 3) == []


@pytest.mark.parametrize("crash", [False, True], ids=["sigterm", "kill-9"])
def test_delayed_message_survives_restart(servers: Servers, crash: bool) -> None:
    env = dict(DELAY_ENV)
    if crash:  # the acknowledged delayed message must be on disk when the broker dies
        env["PYMQ_FLUSH_DISK_TYPE"] = "SYNC_FLUSH"
    proc = servers.broker(env=env)
    create_topic(proc.http_addr, "DelayedRestart")
    t_send = time.time()
    sent = send(proc.http_addr, "DelayedRestart", "survivor", queue_id=2, delay_level=2)
    due = t_send + 3.0

    proc = servers.restart(proc, crash=crash)
    addr = proc.http_addr
    assert health(addr)["recovery"] == {"abnormal": crash}
    if time.time() < due - 0.3:
        until(due - 0.3)
        assert_not_delivered_before(addr, "DelayedRestart", 2, due)
    wait_until(
        lambda: msg_ids(addr, "DelayedRestart", 2)[sent["msg_id"]] >= 1,
        5.0,
        what="delayed message delivered after the restart",
    )
    holds_for(
        lambda: msg_ids(addr, "DelayedRestart", 2) == Counter({sent["msg_id"]: 1}),
        1.0,
        interval_s=0.2,
        what="exactly one delivery",
    )
    (msg,) = pull_all(addr, "DelayedRestart", 2)
    assert body_of(msg) == b"survivor"
    assert msg["store_timestamp"] >= int(t_send * 1000) + 3000 - 1

    # stopped the same way again after the delivery: the schedule progress (or the
    # first pass's duplicate check) keeps the delivered message from coming back
    proc = servers.restart(proc, crash=crash)
    addr = proc.http_addr
    holds_for(
        lambda: msg_ids(addr, "DelayedRestart", 2) == Counter({sent["msg_id"]: 1}),
        1.5,
        interval_s=0.2,
        what="still exactly one delivery after a second restart",
    )
