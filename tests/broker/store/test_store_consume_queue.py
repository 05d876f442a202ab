"""ConsumeQueue files: 20-byte entries, rollover by entry count, min/max offsets,
reads across file boundaries and a restart that keeps every offset.
"""

from __future__ import annotations

import struct
from pathlib import Path

from broker.store.results import GetMessageStatus
from broker.store.store import MessageStore
from connector.protocol.hashing import tags_code
from tests.support.store import TOPIC, StoreFactory, messages_only, put, put_batch, walk_commit_log


def _cq_dir(store: MessageStore, topic: str = TOPIC, queue_id: int = 0) -> Path:
    return store.config.consume_queue_dir / topic / str(queue_id)


def test_rollover_file_names_and_entries(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=10)
    for i in range(35):
        put(store, f"m{i}".encode(), tags="TagA" if i % 2 else "TagB")
    names = sorted(p.name for p in _cq_dir(store).iterdir())
    assert names == [
        "00000000000000000000",
        "00000000000000000200",
        "00000000000000000400",
        "00000000000000000600",
    ]
    assert store.get_min_offset_in_queue(TOPIC, 0) == 0
    assert store.get_max_offset_in_queue(TOPIC, 0) == 35
    # the entries, read as raw bytes: (commitLogOffset i64, size i32, tagsCode i64)
    raw = b"".join((_cq_dir(store) / n).read_bytes() for n in names)
    assert len(raw) == 40 * 20
    entries = [struct.unpack_from(">qiq", raw, 20 * i) for i in range(35)]
    records = messages_only(walk_commit_log(store.config.commit_log_dir))
    assert [(e[0], e[1]) for e in entries] == [(r.position, r.total_size) for r in records]
    assert [e[2] for e in entries] == [tags_code("TagA" if i % 2 else "TagB") for i in range(35)]
    assert raw[35 * 20 :] == bytes(5 * 20)  # the unused tail of the last file


def test_get_message_across_file_boundary(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=10)
    for i in range(35):
        put(store, f"m{i}".encode())
    got = store.get_message(TOPIC, 0, 8, max_nums=5)
    assert got.status is GetMessageStatus.FOUND
    assert got.queue_offsets == [8, 9, 10, 11, 12]
    assert got.bodies() == [f"m{i}".encode() for i in range(8, 13)]
    assert got.next_begin_offset == 13
    everything = store.get_message(TOPIC, 0, 0, max_nums=1000)
    assert everything.queue_offsets == list(range(35))
    assert [m.queue_offset for m in everything.messages()] == list(range(35))
    assert everything.next_begin_offset == 35


def test_batch_entries_cross_file_boundary(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=10)
    put(store, b"first")
    put_batch(store, [f"b{i}".encode() for i in range(23)])  # entries 1..23 span 3 files
    assert store.get_max_offset_in_queue(TOPIC, 0) == 24
    assert len(list(_cq_dir(store).iterdir())) == 3
    got = store.get_message(TOPIC, 0, 0, max_nums=100)
    assert got.bodies() == [b"first"] + [f"b{i}".encode() for i in range(23)]


def test_queues_are_independent(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=10)
    for i in range(12):
        put(store, f"q{i % 3}-{i}".encode(), queue_id=i % 3)
    for q in range(3):
        assert store.get_max_offset_in_queue(TOPIC, q) == 4
        got = store.get_message(TOPIC, q, 0)
        assert got.bodies() == [f"q{q}-{i}".encode() for i in range(q, 12, 3)]
        assert got.queue_offsets == [0, 1, 2, 3]
    assert store.get_max_offset_in_queue(TOPIC, 7) == 0
    assert store.get_max_offset_in_queue("NoSuchTopic", 0) == 0


def test_reopen_keeps_offsets(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=10)
    for i in range(35):
        put(store, f"m{i}".encode(), queue_id=i % 2)
    store.shutdown()
    assert not store.config.abort_path.exists()

    again = make_store(consume_queue_entries_per_file=10)
    assert again.recovery is not None
    assert not again.recovery.abnormal
    assert again.recovery.truncated_at is None
    assert again.get_max_offset_in_queue(TOPIC, 0) == 18
    assert again.get_max_offset_in_queue(TOPIC, 1) == 17
    assert again.get_min_offset_in_queue(TOPIC, 0) == 0
    got = again.get_message(TOPIC, 0, 0, max_nums=100)
    assert got.bodies() == [f"m{i}".encode() for i in range(0, 35, 2)]
    # appends continue at the next offsets, in the CommitLog and in the queue
    res = put(again, b"after", queue_id=0)
    assert res.append is not None
    assert res.append.queue_offset == 18
    assert res.append.wrote_offset == store.commit_log.max_offset()
    assert again.get_message(TOPIC, 0, 18).bodies() == [b"after"]


def test_delete_topic_forgets_its_queues(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=10)
    put(store, b"keep", topic="Keep")
    for i in range(12):
        put(store, f"d{i}".encode(), topic="Gone")
    store.delete_topic("Gone")
    assert not (store.config.consume_queue_dir / "Gone").exists()
    assert "Gone" not in store.topics()
    assert store.get_message("Gone", 0, 0).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.get_message("Keep", 0, 0).bodies() == [b"keep"]
