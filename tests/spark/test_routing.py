"""The sink's queue choice for shardingKey / queueId rows, without Spark or sockets."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pytest

from connector.errors import MessageIllegalError
from connector.protocol.message import MessageQueue
from connector.spark.routing import ANY_QUEUE, QueueRouter, groups, shard_index

QUEUES = tuple(MessageQueue("T", b, q) for b in ("broker-a", "broker-b") for q in range(4))


def test_a_key_maps_where_the_producer_sends_it() -> None:
    keys = ["user-7", "user-8", "ü", "user-7"]
    batch = pa.record_batch({"body": [b"x"] * 4, "shardingKey": keys})
    slots = QueueRouter().slots(batch, QUEUES)
    # Producer._pick_queue: queues[crc32(key) % len(queues)]
    assert slots.tolist() == [zlib.crc32(k.encode()) % 8 for k in keys]
    assert shard_index(b"user-7", 8) == shard_index("user-7", 8)


def test_null_keys_are_left_to_the_producer_and_numbers_hash_as_text() -> None:
    batch = pa.record_batch({"shardingKey": pa.array([None, 42, None], pa.int64())})
    slots = QueueRouter().slots(batch, QUEUES)
    assert slots.tolist() == [ANY_QUEUE, shard_index("42", 8), ANY_QUEUE]
    only_nulls = pa.record_batch({"shardingKey": pa.array([None, None], pa.string())})
    assert QueueRouter().slots(only_nulls, QUEUES).tolist() == [ANY_QUEUE] * 2
    router = QueueRouter()
    assert router.row_queue(QUEUES, None, 42) == QUEUES[shard_index("42", 8)]
    assert router.row_queue(QUEUES, None, None) is None


def test_queue_id_wins_and_takes_its_brokers_in_turn() -> None:
    batch = pa.record_batch(
        {"shardingKey": ["a", "b", "c"], "queueId": pa.array([2, None, 2], pa.int32())}
    )
    router = QueueRouter()
    first = router.slots(batch, QUEUES)
    second = router.slots(batch, QUEUES)
    for slots in (first, second):
        assert QUEUES[slots[0]].queue_id == 2 and slots[0] == slots[2]  # one group per batch
        assert slots[1] == shard_index("b", 8)
    assert {QUEUES[first[0]].broker_name, QUEUES[second[0]].broker_name} == {
        "broker-a",
        "broker-b",
    }
    with pytest.raises(MessageIllegalError, match="no writable queue 9"):
        router.slots(pa.record_batch({"queueId": [9]}), QUEUES)
    with pytest.raises(MessageIllegalError, match="negative queueId"):
        router.slots(pa.record_batch({"queueId": [-3]}), QUEUES)


def test_groups_keep_row_order_within_a_queue() -> None:
    slots = np.array([3, ANY_QUEUE, 3, 1, 3, 1], dtype=np.int64)
    order, ranges = groups(slots)
    got = {slot: order[a:b].tolist() for slot, a, b in ranges}
    assert got == {ANY_QUEUE: [1], 1: [3, 5], 3: [0, 2, 4]}
