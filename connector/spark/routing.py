"""Which queue each row goes to: the sink's ``queueId`` and ``shardingKey`` columns.

Pure functions over Arrow columns (or one row's values) and a topic's
publish list; no network. A sharding key picks ``queues[crc32(key) %
len(queues)]``, the queue ``Producer.send(msg, sharding_key=key)`` picks
(RocketMQ's ``SelectMessageQueueByHash``, CRC-32 in place of Java's
``hashCode``), so rows of one key land in one queue whichever path sends
them. A ``queueId`` pins the queue id; a broker that has it is taken in
turn, one per group of rows, so the rows still go out in batch requests.
``queueId`` wins over ``shardingKey``, as ``Producer.send(queue=...)`` does.
Rows with neither are ``ANY_QUEUE``: the producer picks (round-robin with
latency fault avoidance).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence
from itertools import count
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.errors import MessageIllegalError
from connector.protocol.message import MessageQueue

__all__ = ["ANY_QUEUE", "QueueRouter", "groups", "shard_index"]

ANY_QUEUE = -1


def shard_index(key: str | bytes, queues: int) -> int:
    """The index of ``key``'s queue among ``queues`` (as ``Producer.send(sharding_key=)``)."""
    raw = key.encode() if isinstance(key, str) else key
    return zlib.crc32(raw) % queues


class QueueRouter:
    """The queue of every row of one task, for one topic's publish list at a time."""

    def __init__(self) -> None:
        self._turn = count()  # spreads pinned queue ids over the brokers that have them
        self._known: dict[tuple[str | bytes, int], int] = {}  # (key, queues) -> index

    def slots(self, batch: pa.RecordBatch, queues: Sequence[MessageQueue]) -> np.ndarray:
        """An index into ``queues`` for every row of ``batch`` (one topic), or ``ANY_QUEUE``."""
        n = batch.num_rows
        names = batch.schema.names
        slots = np.full(n, ANY_QUEUE, dtype=np.int64)
        if "shardingKey" in names:
            slots = self._sharded(batch.column("shardingKey"), len(queues))
        if "queueId" in names:
            self._pinned(batch.column("queueId"), queues, slots)
        return slots

    def row_queue(
        self, queues: Sequence[MessageQueue], queue_id: Any, sharding_key: Any
    ) -> MessageQueue | None:
        """One row's queue (the row-by-row path), None when the producer picks."""
        if queue_id is not None:
            return self._pick(queues, int(queue_id))
        if sharding_key is not None:
            key = sharding_key if isinstance(sharding_key, (str, bytes)) else str(sharding_key)
            return queues[shard_index(key, len(queues))]
        return None

    def _sharded(self, keys: pa.Array, queues: int) -> np.ndarray:
        t = keys.type
        if not any(
            f(t)
            for f in (
                pa.types.is_string,
                pa.types.is_large_string,
                pa.types.is_binary,
                pa.types.is_large_binary,
            )
        ):
            keys = pc.cast(keys, pa.string())  # a number as a key: its text, as the row path
        encoded = pc.dictionary_encode(keys)
        # one CRC per distinct key of the task: batches have far fewer keys than rows
        known = self._known
        if len(known) > 100_000:  # a task of ever new keys: start over
            known.clear()

        def index(key: str | bytes) -> int:
            found = known.get((key, queues))
            if found is None:
                found = known[(key, queues)] = shard_index(key, queues)
            return found

        per_key = np.fromiter(
            map(index, encoded.dictionary.to_pylist()),
            dtype=np.int64,
            count=len(encoded.dictionary),
        )
        indices = encoded.indices
        slots: np.ndarray = np.full(len(keys), ANY_QUEUE, dtype=np.int64)
        valid = indices.is_valid().to_numpy(zero_copy_only=False)
        if len(per_key):  # rows with a null key stay ANY_QUEUE
            slots[valid] = per_key[indices.fill_null(0).to_numpy()[valid]]
        return slots

    def _pinned(self, ids: pa.Array, queues: Sequence[MessageQueue], slots: np.ndarray) -> None:
        if ids.null_count == len(ids):
            return
        valid = ids.is_valid().to_numpy(zero_copy_only=False)
        values = pc.cast(ids, pa.int64()).fill_null(0).to_numpy()
        if (values[valid] < 0).any():
            raise MessageIllegalError(f"a row has a negative queueId {int(values[valid].min())}")
        for qid in np.unique(values[valid]).tolist():
            slots[valid & (values == qid)] = queues.index(self._pick(queues, qid))

    def _pick(self, queues: Sequence[MessageQueue], queue_id: int) -> MessageQueue:
        candidates = [q for q in queues if q.queue_id == queue_id]
        if not candidates:
            topic = queues[0].topic if queues else "?"
            raise MessageIllegalError(f"topic {topic} has no writable queue {queue_id}")
        return candidates[next(self._turn) % len(candidates)]


def groups(slots: np.ndarray) -> tuple[np.ndarray, Iterator[tuple[int, int, int]]]:
    """Rows grouped by slot, each group in row order: the permutation that sorts them
    (stable) and ``(slot, start, stop)`` ranges into it."""
    order = np.argsort(slots, kind="stable")
    ordered = slots[order]
    cuts = np.flatnonzero(np.diff(ordered)) + 1
    starts = np.concatenate(([0], cuts))
    stops = np.concatenate((cuts, [len(slots)]))
    return order, (
        (int(ordered[a]), int(a), int(b)) for a, b in zip(starts, stops, strict=True) if b > a
    )
