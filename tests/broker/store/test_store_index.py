"""The key index: lookups by KEYS and UNIQ_KEY, hash collisions, index file
rollover, topic isolation, restarts, and the vectorised key hash.
"""

from __future__ import annotations

import struct
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.store.index import key_hash
from broker.store.inner import BatchInner
from broker.store.results import PutMessageStatus
from connector.protocol.message import Message, MessageExt
from tests.support.clocks import FakeClock
from tests.support.store import BORN_TS, TOPIC, StoreFactory, put


def _bodies(msgs: list[MessageExt]) -> list[bytes]:
    return sorted(m.body for m in msgs)


def test_query_by_key_and_uniq_key(make_store: StoreFactory) -> None:
    store = make_store()
    put(store, b"a", keys=["order-1", "customer-9"], uniq_key="UNIQ-A")
    put(store, b"b", keys=["order-2"], uniq_key="UNIQ-B")
    put(store, b"c", keys=["customer-9"])
    assert _bodies(store.query_message(TOPIC, "order-1")) == [b"a"]
    assert _bodies(store.query_message(TOPIC, "customer-9")) == [b"a", b"c"]
    [by_uniq] = store.query_message(TOPIC, "UNIQ-B")
    assert by_uniq.body == b"b"
    assert by_uniq.msg_id == "UNIQ-B"
    assert by_uniq.keys == ["order-2"]
    assert store.query_message(TOPIC, "nothing") == []
    assert store.query_message(TOPIC, "order") == []  # no prefix matches
    # newest first, and max_num respected
    assert [m.body for m in store.query_message(TOPIC, "customer-9")] == [b"c", b"a"]
    assert [m.body for m in store.query_message(TOPIC, "customer-9", max_num=1)] == [b"c"]


def test_query_by_time_range(make_store: StoreFactory) -> None:
    clock = FakeClock()
    store = make_store(clock=clock)
    for i, ms in enumerate((10_000_000, 20_000_000, 30_000_000)):
        clock.set_ms(ms)
        put(store, f"t{i}".encode(), keys=["same"])
    got = store.query_message(TOPIC, "same", begin_ms=15_000_000, end_ms=25_000_000)
    assert _bodies(got) == [b"t1"]
    assert _bodies(store.query_message(TOPIC, "same", begin_ms=0, end_ms=40_000_000)) == [
        b"t0",
        b"t1",
        b"t2",
    ]


def test_batch_keys_are_indexed(make_store: StoreFactory) -> None:
    store = make_store()
    msgs = [Message(topic=TOPIC, body=f"b{i}".encode(), keys=[f"bk{i}"]) for i in range(20)]
    batch = BatchInner.from_messages(
        msgs, queue_id=1, born_timestamp=BORN_TS, uniq_keys=[f"bu{i}" for i in range(20)]
    )
    res = store.put_messages(batch)
    assert res.status is PutMessageStatus.PUT_OK
    for i in (0, 7, 19):
        assert _bodies(store.query_message(TOPIC, f"bk{i}")) == [f"b{i}".encode()]
        [m] = store.query_message(TOPIC, f"bu{i}")
        assert (m.body, m.queue_id, m.queue_offset) == (f"b{i}".encode(), 1, i)


def test_hash_collisions_return_exactly_the_right_messages(make_store: StoreFactory) -> None:
    store = make_store(max_hash_slot_num=4, max_index_num=1000)
    n = 300
    for i in range(n):
        put(store, f"body-{i}".encode(), keys=[f"key-{i}", f"group-{i % 5}"])
    for i in range(n):
        got = store.query_message(TOPIC, f"key-{i}")
        assert [m.body for m in got] == [f"body-{i}".encode()], i
    got = store.query_message(TOPIC, "group-3", max_num=100)
    assert _bodies(got) == sorted(f"body-{i}".encode() for i in range(3, n, 5))
    # the store's four slots really were shared: the index file's header counts them
    index_files = sorted(store.config.index_dir.iterdir())
    assert len(index_files) == 1
    slot_count, index_count = struct.unpack_from(">ii", index_files[0].read_bytes(), 32)
    assert slot_count == 4
    assert index_count == 1 + 2 * n  # entry 0 is unused


def test_index_file_rollover(make_store: StoreFactory) -> None:
    store = make_store(max_hash_slot_num=16, max_index_num=100)
    n = 350  # 99 usable entries a file: 4 files
    for i in range(n):
        keys = [f"k{i}"] + (["every-50th"] if i % 50 == 0 else [])
        put(store, f"m{i}".encode(), keys=keys)
    names = sorted(p.name for p in store.config.index_dir.iterdir())
    assert len(names) >= 4
    assert all(len(name) == 20 and name.isdigit() for name in names)
    assert names[0] == "00000000000000000000"
    for i in (0, 98, 99, 100, 200, 349):
        assert _bodies(store.query_message(TOPIC, f"k{i}")) == [f"m{i}".encode()]
    spread = store.query_message(TOPIC, "every-50th", max_num=32)
    assert _bodies(spread) == sorted(f"m{i}".encode() for i in range(0, n, 50))
    assert [m.queue_offset for m in spread] == list(range(300, -1, -50))  # newest first


def test_one_message_with_more_keys_than_an_index_file_holds(make_store: StoreFactory) -> None:
    # 250 keys of one record fill several 99-entry files that would all be named by
    # that record's offset; this used to loop forever re-opening the same full file
    store = make_store(max_hash_slot_num=16, max_index_num=100)
    put(store, b"first", keys=["f"])
    keys = [f"many{i}" for i in range(250)]
    res = put(store, b"many", keys=keys)
    assert res.append is not None
    names = [p.name for p in sorted(store.config.index_dir.iterdir())]
    assert len(names) == len(set(names)) >= 3
    for k in (keys[0], keys[98], keys[99], keys[200], keys[249]):
        assert [m.body for m in store.query_message(TOPIC, k)] == [b"many"]
    put(store, b"after", keys=["a"])
    store.shutdown()
    again = make_store(max_hash_slot_num=16, max_index_num=100)
    assert [p.name for p in sorted(again.config.index_dir.iterdir())] == names
    for k in ("f", keys[0], keys[150], keys[249], "a"):
        assert len(again.query_message(TOPIC, k)) == 1, k


def test_keys_of_another_topic_are_not_returned(make_store: StoreFactory) -> None:
    store = make_store(max_hash_slot_num=4)
    put(store, b"mine", topic="TopicA", keys=["shared"])
    put(store, b"theirs", topic="TopicB", keys=["shared"])
    put(store, b"theirs-too", topic="TopicB", keys=["shared"], uniq_key="shared")
    assert _bodies(store.query_message("TopicA", "shared")) == [b"mine"]
    assert _bodies(store.query_message("TopicB", "shared")) == [b"theirs", b"theirs-too"]
    assert store.query_message("TopicC", "shared") == []


# CRC-32 collisions (found by search): the index stores equal hashes for these, in one
# bucket, and only reading the record tells them apart.
T1, T2 = "t928096", "t11200040"  # f"{T1}#k" and f"{T2}#k" collide
K1, K2 = "k3985819", "k4420602"  # f"{TOPIC}#{K1}" and f"{TOPIC}#{K2}" collide


def test_equal_hashes_are_told_apart(make_store: StoreFactory) -> None:
    assert key_hash(f"{T1}#k") == key_hash(f"{T2}#k")
    assert key_hash(f"{TOPIC}#{K1}") == key_hash(f"{TOPIC}#{K2}")
    store = make_store()
    put(store, b"topic-1", topic=T1, keys=["k"])
    put(store, b"topic-2", topic=T2, keys=["k"])
    put(store, b"key-1", keys=[K1])
    put(store, b"uniq-2", uniq_key=K2)  # a UNIQ_KEY colliding with a KEYS entry
    assert _bodies(store.query_message(T1, "k")) == [b"topic-1"]
    assert _bodies(store.query_message(T2, "k")) == [b"topic-2"]
    assert _bodies(store.query_message(TOPIC, K1)) == [b"key-1"]
    assert _bodies(store.query_message(TOPIC, K2)) == [b"uniq-2"]


def test_lookups_survive_restart(make_store: StoreFactory) -> None:
    store = make_store(max_hash_slot_num=16, max_index_num=100)
    for i in range(150):
        put(store, f"m{i}".encode(), keys=[f"k{i}"], uniq_key=f"u{i}")
    store.shutdown()
    again = make_store(max_hash_slot_num=16, max_index_num=100)
    assert again.recovery is not None
    assert again.recovery.index_entries_rebuilt == 0  # nothing to redo after a clean stop
    for i in (0, 49, 50, 149):
        assert _bodies(again.query_message(TOPIC, f"k{i}")) == [f"m{i}".encode()]
        assert _bodies(again.query_message(TOPIC, f"u{i}")) == [f"m{i}".encode()]
    put(again, b"new", keys=["k0"])
    assert _bodies(again.query_message(TOPIC, "k0")) == [b"m0", b"new"]


def test_index_disabled(make_store: StoreFactory) -> None:
    store = make_store(message_index_enable=False)
    put(store, b"x", keys=["k"])
    assert store.query_message(TOPIC, "k") == []


def test_key_hash_is_masked_crc32_of_utf8() -> None:
    assert key_hash("abc") == zlib.crc32(b"abc") & 0x7FFFFFFF == 0x352441C2
    assert key_hash("") == 0
    assert key_hash("TopicTest#ключ") == zlib.crc32("TopicTest#ключ".encode()) & 0x7FFFFFFF


@settings(max_examples=200, deadline=None)
@given(topic=st.text(min_size=1, max_size=20), key=st.text(max_size=40))
def test_key_hash_continues_from_the_topic_prefix(topic: str, key: str) -> None:
    # the single-message path hashes "topic#" once and continues over each key
    prefix = zlib.crc32(f"{topic}#".encode())
    assert zlib.crc32(key.encode(), prefix) & 0x7FFFFFFF == key_hash(f"{topic}#{key}")


def test_the_index_is_flushed_less_often_and_rebuilt_after_a_crash(
    make_store: StoreFactory,
) -> None:
    # with flush_interval_index_ms not yet passed, a checkpoint flushes the queues but not
    # the index: its index offset stays where the index was last flushed (recovery's own
    # checkpoint at start), and a crash then re-indexes the records since from the log
    store = make_store(flush_interval_index_ms=3_600_000)
    for i in range(100):
        put(store, f"m{i}".encode(), keys=[f"k{i}"])
    cp = store.flush_queues_and_checkpoint()
    assert cp.logic_offset > cp.index_offset == 0
    assert cp.recover_from == 0
    store.close()  # a crash
    again = make_store(flush_interval_index_ms=3_600_000)
    assert again.recovery is not None
    assert again.recovery.index_entries_rebuilt == 100
    for i in (0, 50, 99):
        assert _bodies(again.query_message(TOPIC, f"k{i}")) == [f"m{i}".encode()]
    # recovery ends with a checkpoint that flushed the index: nothing left to redo
    cp = again.flush_queues_and_checkpoint()
    assert cp.index_offset == cp.logic_offset
    again.shutdown()
    third = make_store(flush_interval_index_ms=3_600_000)
    assert third.recovery is not None
    assert third.recovery.index_entries_rebuilt == 0
    assert _bodies(third.query_message(TOPIC, "k99")) == [b"m99"]


def test_a_clean_stop_flushes_the_index_whatever_its_interval(make_store: StoreFactory) -> None:
    store = make_store(flush_interval_index_ms=3_600_000)
    for i in range(20):
        put(store, f"m{i}".encode(), keys=[f"k{i}"])
    store.shutdown()
    again = make_store(flush_interval_index_ms=3_600_000)
    assert again.recovery is not None
    assert again.recovery.index_entries_rebuilt == 0
    assert _bodies(again.query_message(TOPIC, "k19")) == [b"m19"]


def test_the_index_is_flushed_once_enough_log_was_written(make_store: StoreFactory) -> None:
    store = make_store(flush_interval_index_ms=3_600_000, flush_index_max_lag_bytes=20_000)
    put(store, b"small", keys=["s"])
    cp = store.flush_queues_and_checkpoint()
    assert cp.index_offset < cp.logic_offset  # under both bounds: not flushed
    for i in range(200):  # ~30 KB of records
        put(store, f"m{i}".encode() * 10, keys=[f"k{i}"])
    cp = store.flush_queues_and_checkpoint()
    assert cp.index_offset == cp.logic_offset
