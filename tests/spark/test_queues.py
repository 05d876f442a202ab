"""The pure rules of connector/spark/queues.py, without a cluster (the cluster cases are in
test_read_subscribe.py and test_read_time.py)."""

from __future__ import annotations

import pytest

from connector.errors import ConfigError
from connector.spark.queues import _per_queue, is_user_topic, pick_offset


@pytest.mark.parametrize(
    ("topic", "user"),
    [
        ("Orders", True),
        ("RETRY_ME", True),
        ("TBW102", False),
        ("SCHEDULE_TOPIC_XXXX", False),
        ("RMQ_SYS_TRACE_TOPIC", False),
        ("%RETRY%group", False),
        ("%DLQ%group", False),
        ("OFFSET_MOVED_EVENT", False),
    ],
)
def test_user_topics(topic: str, user: bool) -> None:
    assert is_user_topic(topic) is user


def test_per_queue_json_names_exactly_the_queues_read() -> None:
    keys = [("T", "broker-a", 0), ("T", "broker-a", 1)]
    spec = {"T": {"broker-a": {"0": 5, "1": 7}}}
    assert _per_queue(spec, keys, "opt") == {("T", "broker-a", 0): 5, ("T", "broker-a", 1): 7}
    with pytest.raises(ConfigError, match=r"option opt: it does not name T:broker-a:1$"):
        _per_queue({"T": {"broker-a": {"0": 5}}}, keys, "opt")
    extra = {"T": {"broker-a": {"0": 5, "1": 7}, "broker-b": {"0": 1}}}
    with pytest.raises(ConfigError, match="no such queue is read: T:broker-b:0"):
        _per_queue(extra, keys, "opt")


def test_pick_offset() -> None:
    spec = {"T": {"broker-a": {"0": 42, "1": -2, "2": -1}}}
    assert pick_offset("earliest", "T", "broker-a", 0, 3, 9) == 3
    assert pick_offset("latest", "T", "broker-a", 0, 3, 9) == 9
    got = [pick_offset(spec, "T", "broker-a", q, 3, 9) for q in range(4)]
    assert got == [42, 3, 9, 3]  # a queue not named: its earliest
