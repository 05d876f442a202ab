"""How a consumer group's members split a topic's queues: pure functions, no IO.

Every member computes its own share from what every member sees alike: the
group's client ids (GET_CONSUMER_LIST_BY_GROUP) and the topic's queues
(the route). Both are sorted first (client ids as strings, queues by topic,
broker name, queue id, as RocketMQ's ``MessageQueue.compareTo``), so members
that see the same inputs compute a partition: every queue owned once.

- ``averagely``: RocketMQ's ``AllocateMessageQueueAveragely``, byte for byte
  in its result, so a group mixed with RocketMQ's own clients (Java, C++)
  splits its queues without overlap: member i takes a contiguous run.
- ``circle``: ``AllocateMessageQueueAveragelyByCircle``: queue j to member j mod n.
- ``consistent_hash``: ``AllocateMessageQueueConsistentHash``'s idea (a ring of
  ``virtual_nodes`` points per member, each queue to the first point clockwise
  of its hash); MD5 as RocketMQ's default hash, points named ``cid-i``. Moves
  few queues on a change but is not balanced.
- ``sticky``: pymq's own. Rendezvous (highest random weight) hashing with
  exact balance: each queue ranks the members by ``md5(cid|queue)``; queues,
  in sorted order, go to their best-ranked member that still has room, where
  every member may hold ``floor(q/n)`` and only ``q mod n`` of them one more.
  Loads are thus as even as ``averagely``'s, and since a queue's ranking does
  not depend on the other members, a join or leave moves mostly the queues
  that must move (to or from the member that came or went) instead of
  shifting every run as ``averagely`` does. Deterministic from the inputs
  alone: no member needs to know who owned what before. Measured in
  ``tests/connector/push/test_allocate.py``.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence

from connector.errors import ConfigError
from connector.protocol.message import MessageQueue

__all__ = [
    "ALLOCATE_STRATEGIES",
    "AllocateStrategy",
    "allocate",
    "allocate_averagely",
    "allocate_circle",
    "allocate_consistent_hash",
    "allocate_sticky",
]

AllocateStrategy = Callable[[str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]
VIRTUAL_NODES = 10


def _inputs(
    cid: str, queues: Sequence[MessageQueue], cids: Sequence[str]
) -> tuple[list[MessageQueue], list[str]] | None:
    """Sorted, de-duplicated inputs; None when ``cid`` is not (yet) a member."""
    all_cids = sorted(set(cids))
    if cid not in all_cids or not queues:
        return None
    return sorted(set(queues)), all_cids


def allocate_averagely(
    cid: str, queues: Sequence[MessageQueue], cids: Sequence[str]
) -> list[MessageQueue]:
    inputs = _inputs(cid, queues, cids)
    if inputs is None:
        return []
    mqs, all_cids = inputs
    index, n, q = all_cids.index(cid), len(all_cids), len(mqs)
    mod = q % n
    if q <= n:
        average = 1
    elif mod > 0 and index < mod:
        average = q // n + 1
    else:
        average = q // n
    start = index * average if mod > 0 and index < mod else index * average + mod
    return [mqs[(start + i) % q] for i in range(min(average, q - start))]


def allocate_circle(
    cid: str, queues: Sequence[MessageQueue], cids: Sequence[str]
) -> list[MessageQueue]:
    inputs = _inputs(cid, queues, cids)
    if inputs is None:
        return []
    mqs, all_cids = inputs
    index, n = all_cids.index(cid), len(all_cids)
    return [mq for j, mq in enumerate(mqs) if j % n == index]


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.md5(text.encode(), usedforsecurity=False).digest()[:8], "big")


def _queue_key(mq: MessageQueue) -> str:
    # MessageQueue.toString() in RocketMQ
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def allocate_consistent_hash(
    cid: str,
    queues: Sequence[MessageQueue],
    cids: Sequence[str],
    *,
    virtual_nodes: int = VIRTUAL_NODES,
) -> list[MessageQueue]:
    inputs = _inputs(cid, queues, cids)
    if inputs is None:
        return []
    mqs, all_cids = inputs
    ring = sorted((_hash(f"{c}-{i}"), c) for c in all_cids for i in range(virtual_nodes))
    points = [p for p, _ in ring]
    out = []
    for mq in mqs:
        k = bisect.bisect_left(points, _hash(_queue_key(mq))) % len(ring)
        if ring[k][1] == cid:
            out.append(mq)
    return out


def sticky_assignment(
    queues: Sequence[MessageQueue], cids: Sequence[str]
) -> dict[MessageQueue, str]:
    """Every queue's owner under ``sticky`` (see the module's text)."""
    all_cids = sorted(set(cids))
    mqs = sorted(set(queues))
    if not all_cids or not mqs:
        return {}
    floor, extra = divmod(len(mqs), len(all_cids))
    load = dict.fromkeys(all_cids, 0)
    at_ceiling = 0  # members holding floor + 1 (at most ``extra`` of them)
    owners: dict[MessageQueue, str] = {}
    for mq in mqs:
        key = _queue_key(mq)
        ranked = sorted(all_cids, key=lambda c: (-_hash(f"{c}|{key}"), c))
        for c in ranked:
            if load[c] < floor or (load[c] == floor and at_ceiling < extra):
                if load[c] == floor:
                    at_ceiling += 1
                load[c] += 1
                owners[mq] = c
                break
    return owners


def allocate_sticky(
    cid: str, queues: Sequence[MessageQueue], cids: Sequence[str]
) -> list[MessageQueue]:
    if _inputs(cid, queues, cids) is None:
        return []
    return [mq for mq, owner in sorted(sticky_assignment(queues, cids).items()) if owner == cid]


ALLOCATE_STRATEGIES: dict[str, AllocateStrategy] = {
    "averagely": allocate_averagely,
    "circle": allocate_circle,
    "consistent_hash": allocate_consistent_hash,
    "sticky": allocate_sticky,
}


def allocate(
    strategy: str, cid: str, queues: Sequence[MessageQueue], cids: Sequence[str]
) -> list[MessageQueue]:
    """``cid``'s share of ``queues`` among ``cids`` under the named strategy."""
    try:
        fn = ALLOCATE_STRATEGIES[strategy]
    except KeyError:
        raise ConfigError(
            f"allocate must be one of {', '.join(ALLOCATE_STRATEGIES)}, not {strategy!r}"
        ) from None
    return fn(cid, queues, cids)
