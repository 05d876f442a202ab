"""Allocation strategies: partitions, RocketMQ's exact averagely split, and how many
queues a join or leave moves (sticky against averagely)."""

from __future__ import annotations

import itertools
import random

import pytest

from connector.client.push.allocate import ALLOCATE_STRATEGIES, allocate, sticky_assignment
from connector.errors import ConfigError
from connector.protocol.message import MessageQueue


def queues(n_brokers: int = 2, per_broker: int = 8, topic: str = "T") -> list[MessageQueue]:
    return [
        MessageQueue(topic, f"broker-{chr(97 + b)}", q)
        for b in range(n_brokers)
        for q in range(per_broker)
    ]


def owners(strategy: str, mqs: list[MessageQueue], cids: list[str]) -> dict[MessageQueue, str]:
    out: dict[MessageQueue, str] = {}
    for cid in cids:
        for mq in allocate(strategy, cid, mqs, cids):
            assert mq not in out, f"{strategy}: {mq} owned twice"
            out[mq] = cid
    return out


@pytest.mark.parametrize("strategy", sorted(ALLOCATE_STRATEGIES))
@pytest.mark.parametrize(("n_q", "n_c"), [(16, 3), (16, 16), (4, 7), (1, 2), (13, 5)])
def test_every_strategy_is_a_partition(strategy: str, n_q: int, n_c: int) -> None:
    mqs = queues(1, n_q)
    cids = [f"10.0.0.{i}@{i}" for i in range(n_c)]
    random.Random(n_q).shuffle(mqs)  # members sort: the order they see does not matter
    got = owners(strategy, mqs, cids)
    assert set(got) == set(mqs)
    if strategy != "consistent_hash":  # the others are balanced
        loads = [sum(1 for c in got.values() if c == cid) for cid in cids]
        assert max(loads) - min(loads) <= 1


def test_averagely_is_rocketmqs_split() -> None:
    # AllocateMessageQueueAveragely with 8 queues and 3 clients: 3, 3, 2 contiguous
    mqs = queues(1, 8)
    cids = ["c", "a", "b"]
    assert [mq.queue_id for mq in allocate("averagely", "a", mqs, cids)] == [0, 1, 2]
    assert [mq.queue_id for mq in allocate("averagely", "b", mqs, cids)] == [3, 4, 5]
    assert [mq.queue_id for mq in allocate("averagely", "c", mqs, cids)] == [6, 7]
    # more clients than queues: the last ones get nothing
    assert allocate("averagely", "c", mqs[:2], cids) == []
    assert [mq.queue_id for mq in allocate("circle", "b", mqs, cids)] == [1, 4, 7]


def test_a_client_not_in_the_list_gets_nothing() -> None:
    for strategy in ALLOCATE_STRATEGIES:
        assert allocate(strategy, "x", queues(), ["a", "b"]) == []


def test_an_unknown_strategy_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="allocate must be one of"):
        allocate("random", "a", queues(), ["a"])


def _moves(strategy: str, before: list[str], after: list[str], mqs: list[MessageQueue]) -> int:
    a, b = owners(strategy, mqs, before), owners(strategy, mqs, after)
    return sum(1 for mq in mqs if a[mq] != b[mq])


def test_sticky_moves_fewer_queues_than_averagely_on_joins_and_leaves() -> None:
    """Members joining one at a time (1 -> 8), then leaving one at a time, over 32 queues
    on 2 brokers, with random client ids: the queues each change moves, summed."""
    mqs = queues(2, 16)
    rng = random.Random(7)
    totals = {"averagely": 0, "sticky": 0}
    minimum = 0  # queues that must move: those of a member that left, or to one that came
    for trial in range(5):
        ids = [f"10.0.{trial}.{rng.randrange(256)}@{rng.randrange(1 << 20)}" for _ in range(8)]
        steps = [ids[:k] for k in range(1, 9)] + [ids[k:] for k in range(1, 8)]
        for before, after in itertools.pairwise(steps):
            for strategy in totals:
                totals[strategy] += _moves(strategy, before, after, mqs)
            b = sticky_assignment(mqs, after)
            a = sticky_assignment(mqs, before)
            minimum += sum(1 for mq in mqs if (a[mq] not in after) or (b[mq] not in before))
    # measured (this seed): averagely 908, sticky 669, minimum 551 (1.65x vs 1.21x)
    assert totals["sticky"] < 0.8 * totals["averagely"], totals
    assert totals["sticky"] >= minimum
    print(f"queues moved over 70 changes: {totals}, minimum {minimum}")


def test_sticky_is_deterministic_whatever_order_members_see() -> None:
    mqs = queues(2, 8)
    cids = ["b@1", "a@2", "c@3"]
    first = sticky_assignment(mqs, cids)
    assert sticky_assignment(list(reversed(mqs)), list(reversed(cids))) == first
