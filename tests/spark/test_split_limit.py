"""Admission control: a micro-batch's limit shared across queues by backlog."""

from __future__ import annotations

from connector.spark.stream import split_limit


def test_everything_fits() -> None:
    assert split_limit({"a": 0, "b": 5}, {"a": 10, "b": 7}, 100) == {"a": 10, "b": 7}


def test_limit_shared_by_backlog_and_exact() -> None:
    start = {"a": 0, "b": 0, "c": 90}
    latest = {"a": 900, "b": 100, "c": 100}
    end = split_limit(start, latest, 100)
    taken = {k: end[k] - start[k] for k in end}
    assert sum(taken.values()) == 100
    assert taken["a"] > taken["b"] >= taken["c"] >= 0
    assert all(end[k] <= latest[k] for k in end)


def test_new_queue_starts_at_zero() -> None:
    assert split_limit({}, {"new": 3}, 10) == {"new": 3}
    assert split_limit({}, {"new": 30}, 10) == {"new": 10}
