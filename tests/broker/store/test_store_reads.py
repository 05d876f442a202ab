"""The read path: get_message statuses and limits, tag filtering, lookups by
physical offset and the timestamp search.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import broker.store.store as store_module
from broker.store.read_result import GetMessageResult
from broker.store.results import GetMessageStatus
from broker.store.store import MessageStore
from connector.errors import CorruptRecordError
from connector.protocol.hashing import tags_code
from connector.protocol.msgid import decode_offset_msg_id
from tests.support.clocks import FakeClock
from tests.support.store import (
    TOPIC,
    StoreFactory,
    messages_only,
    put,
    put_batch,
    record_len,
    walk_commit_log,
)


def _fill(store: MessageStore, n: int, *, queue_id: int = 0) -> None:
    for i in range(n):
        put(store, f"m{i}".encode(), queue_id=queue_id)


def test_unknown_queue(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store, 3)
    for topic, qid in (("Nope", 0), (TOPIC, 5)):
        got = store.get_message(topic, qid, 0)
        assert got.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        assert got.message_count == 0
        assert got.bodies() == []


def test_offset_overflow_one_and_badly(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store, 5)
    one = store.get_message(TOPIC, 0, 5)
    assert one.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert (one.next_begin_offset, one.min_offset, one.max_offset) == (5, 0, 5)
    assert one.bodies() == []
    badly = store.get_message(TOPIC, 0, 6)
    assert badly.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
    assert badly.next_begin_offset == 5
    assert badly.max_offset == 5
    far = store.get_message(TOPIC, 0, 10**12)
    assert far.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY


def test_found_and_next_begin_offset(make_store: StoreFactory) -> None:
    store = make_store()
    _fill(store, 10)
    got = store.get_message(TOPIC, 0, 3, max_nums=4)
    assert got.status is GetMessageStatus.FOUND
    assert got.found
    assert got.next_begin_offset == 7
    assert (got.min_offset, got.max_offset) == (0, 10)
    assert got.queue_offsets == [3, 4, 5, 6]
    assert got.bodies() == [b"m3", b"m4", b"m5", b"m6"]
    msgs = got.messages()
    assert [m.queue_offset for m in msgs] == [3, 4, 5, 6]
    assert all(m.topic == TOPIC and m.queue_id == 0 for m in msgs)
    # records() are the stored bytes: each starts with its own TOTALSIZE
    for rec, m in zip(got.records(), msgs, strict=True):
        assert int.from_bytes(rec[:4], "big") == len(rec) == m.store_size
    # reading to the end stops at max
    tail = store.get_message(TOPIC, 0, 8, max_nums=32)
    assert tail.queue_offsets == [8, 9]
    assert tail.next_begin_offset == 10


def test_max_nums_respected(make_store: StoreFactory) -> None:
    store = make_store()
    put_batch(store, [f"b{i}".encode() for i in range(50)])
    for n in (1, 7, 32, 50, 80):
        got = store.get_message(TOPIC, 0, 0, max_nums=n)
        assert got.message_count == min(n, 50)
        assert got.next_begin_offset == min(n, 50)


def test_max_bytes_respected_but_at_least_one(make_store: StoreFactory) -> None:
    store = make_store()
    for i in range(10):
        put(store, bytes([48 + i]) * 100)
    size = record_len(100)
    got = store.get_message(TOPIC, 0, 0, max_nums=32, max_bytes=3 * size)
    assert got.queue_offsets == [0, 1, 2]
    assert got.next_begin_offset == 3
    assert sum(len(r) for r in got.records()) <= 3 * size
    just_under = store.get_message(TOPIC, 0, 0, max_nums=32, max_bytes=3 * size - 1)
    assert just_under.queue_offsets == [0, 1]
    tiny = store.get_message(TOPIC, 0, 4, max_nums=32, max_bytes=1)
    assert tiny.status is GetMessageStatus.FOUND
    assert tiny.queue_offsets == [4]
    assert tiny.next_begin_offset == 5


def test_tag_filter(make_store: StoreFactory) -> None:
    store = make_store()
    tags = ["TagA", "TagB", "TagB", "TagC", "TagA", "TagB", "TagA"]
    for i, t in enumerate(tags):
        put(store, f"{t}-{i}".encode(), tags=t)
    want_a = [tags_code("TagA")]
    got = store.get_message(TOPIC, 0, 0, tags_codes=want_a)
    assert got.status is GetMessageStatus.FOUND
    assert got.queue_offsets == [0, 4, 6]
    assert [m.tags for m in got.messages()] == ["TagA"] * 3
    assert got.next_begin_offset == 7
    # max_nums reached: the next read resumes at the first match not taken
    two = store.get_message(TOPIC, 0, 0, max_nums=2, tags_codes=want_a)
    assert two.queue_offsets == [0, 4]
    assert two.next_begin_offset == 6
    # non-matching messages are skipped, and next_begin_offset moves past the ones
    # scanned (up to the next match that was not taken)
    skip = store.get_message(TOPIC, 0, 1, max_nums=1, tags_codes=want_a)
    assert skip.queue_offsets == [4]
    assert skip.next_begin_offset == 6
    last = store.get_message(TOPIC, 0, 5, max_nums=1, tags_codes=want_a)
    assert last.queue_offsets == [6]
    assert last.next_begin_offset == 7
    either = store.get_message(TOPIC, 0, 0, tags_codes=[tags_code("TagB"), tags_code("TagC")])
    assert either.queue_offsets == [1, 2, 3, 5]


def test_tag_filter_no_match(make_store: StoreFactory) -> None:
    store = make_store()
    for i in range(20):
        put(store, f"m{i}".encode(), tags="TagA")
    got = store.get_message(TOPIC, 0, 5, tags_codes=[tags_code("Other")])
    assert got.status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert got.message_count == 0
    assert got.next_begin_offset == 20  # everything scanned was skipped
    empty = store.get_message(TOPIC, 0, 0, tags_codes=[])
    assert empty.status is GetMessageStatus.NO_MATCHED_MESSAGE


def test_tag_filter_across_consume_queue_files(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=10)
    for i in range(45):
        put(store, f"m{i}".encode(), tags="Hit" if i % 9 == 8 else "Miss")
    got = store.get_message(TOPIC, 0, 0, max_nums=100, tags_codes=[tags_code("Hit")])
    assert got.queue_offsets == [8, 17, 26, 35, 44]
    assert got.next_begin_offset == 45


def test_look_message_by_offset_and_msg_id(make_store: StoreFactory) -> None:
    store = make_store(store_host="10.0.0.7", store_port=10911)
    first = put(store, b"one", keys=["k1"])
    second = put(store, b"two", tags="T")
    assert first.append is not None
    assert second.append is not None
    msg = store.look_message_by_offset(second.append.wrote_offset)
    assert msg is not None
    assert (msg.body, msg.tags, msg.queue_offset) == (b"two", "T", 1)
    assert (
        store.look_message_by_offset(first.append.wrote_offset, first.append.wrote_bytes)
        is not None
    )
    [msg_id] = second.append.offset_msg_ids(store.store_host)
    assert msg.offset_msg_id == msg_id
    assert decode_offset_msg_id(msg_id) == ("10.0.0.7:10911", second.append.wrote_offset)
    # offsets that are not the start of a record, or past the end
    assert store.look_message_by_offset(first.append.wrote_offset + 4) is None
    assert store.look_message_by_offset(store.commit_log.max_offset()) is None
    assert store.look_message_by_offset(10**9) is None


# -- timestamp search ------------------------------------------------------------------


class CountingStore(MessageStore):
    """Counts how many store timestamps a search reads (not a mock: it calls through)."""

    reads = 0

    def get_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        self.reads += 1
        return super().get_store_timestamp(topic, queue_id, offset)


def test_offset_by_time_binary_search(make_store: StoreFactory) -> None:
    clock = FakeClock()
    store = make_store(cls=CountingStore, clock=clock, consume_queue_entries_per_file=300)
    assert isinstance(store, CountingStore)
    base = 1_700_000_000_000
    n = 2000
    # three messages per timestamp, 10 ms apart: ts(i) = base + (i // 3) * 10
    for i in range(n):
        clock.set_ms(base + (i // 3) * 10)
        put(store, b"x")
    got = store.get_message(TOPIC, 0, 0, max_nums=10)
    assert [m.store_timestamp for m in got.messages()][:6] == [base] * 3 + [base + 10] * 3

    limit = math.ceil(math.log2(n)) + 1
    for t, expected in [
        (base - 1, 0),
        (base, 0),
        (base + 1, 3),
        (base + 10, 3),
        (base + 15, 6),
        (base + 3000, 900),
        (base + 3001, 903),
        (base + (n - 1) // 3 * 10, (n - 1) // 3 * 3),
        (base + (n - 1) // 3 * 10 + 1, n),  # after every message: the max offset
        (base + 10**9, n),
    ]:
        store.reads = 0
        assert store.get_offset_in_queue_by_time(TOPIC, 0, t) == expected, t
        assert store.reads <= limit, (t, store.reads)
    assert store.get_offset_in_queue_by_time(TOPIC, 9, base) == 0
    assert store.get_offset_in_queue_by_time("Nope", 0, base) == 0


def test_store_timestamps_stay_monotonic_when_clock_goes_back(make_store: StoreFactory) -> None:
    clock = FakeClock()
    store = make_store(clock=clock)
    clock.set_ms(5_000)
    put(store, b"a")
    clock.set_ms(4_000)  # the wall clock stepped back
    put(store, b"b")
    clock.set_ms(6_000)
    put(store, b"c")
    stamps = [m.store_timestamp for m in store.get_message(TOPIC, 0, 0).messages()]
    assert stamps == [5_000, 5_000, 6_000]
    assert store.get_offset_in_queue_by_time(TOPIC, 0, 5_000) == 0
    assert store.get_offset_in_queue_by_time(TOPIC, 0, 5_001) == 2


def test_offset_by_time_on_ten_thousand_messages_is_fast(make_store: StoreFactory) -> None:
    clock = FakeClock()
    store = make_store(clock=clock, consume_queue_entries_per_file=1000)
    base = 1_700_000_000_000
    for i in range(100):  # 100 batches of 100: one store timestamp per batch
        clock.set_ms(base + i * 1000)
        put_batch(store, [b"y"] * 100)
    assert store.get_max_offset_in_queue(TOPIC, 0) == 10_000
    started = time.perf_counter()
    for i in range(0, 100, 7):
        assert store.get_offset_in_queue_by_time(TOPIC, 0, base + i * 1000) == i * 100
        assert store.get_offset_in_queue_by_time(TOPIC, 0, base + i * 1000 + 1) == i * 100 + 100
    # 30 searches over 10,000 messages: a scan would read 300,000 timestamps
    assert time.perf_counter() - started < 1.0


def test_tag_filter_scan_is_bounded(make_store: StoreFactory) -> None:
    store = make_store(consume_queue_entries_per_file=1000)
    for _ in range(20):
        put_batch(store, [b"n"] * 1000, tags="Noise")
    put(store, b"signal", tags="Signal")
    want = [tags_code("Signal")]
    first = store.get_message(TOPIC, 0, 0, tags_codes=want)
    # one pull scans a bounded number of entries, then says where to go on
    assert first.status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert 0 < first.next_begin_offset < 20_000
    offset, pulls = first.next_begin_offset, 1
    while True:
        got = store.get_message(TOPIC, 0, offset, tags_codes=want)
        pulls += 1
        if got.found:
            break
        assert got.next_begin_offset > offset
        offset = got.next_begin_offset
    assert got.bodies() == [b"signal"]
    assert got.queue_offsets == [20_000]
    assert got.next_begin_offset == 20_001
    assert pulls >= 2


def test_arrival_listeners_hear_every_append(make_store: StoreFactory) -> None:
    store = make_store()
    heard: list[tuple[str, int, int]] = []
    store.arrival_listeners.append(lambda topic, qid, end: heard.append((topic, qid, end)))
    put(store, b"a", queue_id=1)
    put_batch(store, [b"b", b"c", b"d"], queue_id=1)
    put(store, b"e", topic="Other", queue_id=0)
    assert heard == [(TOPIC, 1, 1), (TOPIC, 1, 4), ("Other", 0, 1)]


def test_reader_follows_concurrent_writer(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=4096, consume_queue_entries_per_file=10)
    n = 600

    def writer() -> None:
        for i in range(0, n, 10):
            put_batch(store, [f"m{i + j}".encode() * 20 for j in range(10)])

    seen: list[bytes] = []
    offset = 0
    with ThreadPoolExecutor(1) as pool:
        writing = pool.submit(writer)
        deadline = time.monotonic() + 30
        while offset < n and time.monotonic() < deadline:
            got = store.get_message(TOPIC, 0, offset, max_nums=64)
            if got.found:
                assert got.queue_offsets == list(range(offset, offset + got.message_count))
                seen += got.bodies()
                offset = got.next_begin_offset
            elif writing.done() and writing.exception() is not None:
                break
            else:
                time.sleep(0.001)  # poll: nothing new yet
        writing.result(timeout=30)  # re-raises whatever failed in the writer
    assert seen == [f"m{i}".encode() * 20 for i in range(n)]


def _general(store: MessageStore, *args: Any, **kwargs: Any) -> GetMessageResult:
    """``get_message`` with the lean read of a few messages turned off."""
    lean = store_module.SMALL_READ
    store_module.SMALL_READ = 0
    try:
        return store.get_message(*args, **kwargs)
    finally:
        store_module.SMALL_READ = lean


def _same(a: GetMessageResult, b: GetMessageResult) -> None:
    assert (a.status, a.next_begin_offset, a.min_offset, a.max_offset) == (
        b.status, b.next_begin_offset, b.min_offset, b.max_offset
    )  # fmt: skip
    assert a.queue_offsets == b.queue_offsets
    assert a.records() == b.records()
    assert a.bodies() == b.bodies()


def test_a_read_of_a_few_messages_answers_as_the_general_read(make_store: StoreFactory) -> None:
    """Reads of up to SMALL_READ messages with no tags filter skip numpy (a long poll woken
    by one send reads so); where their records are not back to back in one segment, the
    rest of a queue is in the next ConsumeQueue file, or ``max_bytes`` cuts them, the
    general read answers. Either way the answer is the same."""
    store = make_store(consume_queue_entries_per_file=10, mapped_file_size_commit_log=4096)
    for i in range(60):  # queues 0 and 1 interleaved; batches to queue 2
        put(store, f"m{i}".encode() * (1 + i % 7), queue_id=i % 2)
        if i % 10 == 0:
            put_batch(store, [f"b{i}-{j}".encode() for j in range(4)], queue_id=2)
    assert store.commit_log.queue.files[-1].file_from_offset > 0  # several segments
    for queue_id in (0, 1, 2):
        for offset in range(0, 30, 3):
            for max_nums in (1, 5, 32, 64):
                for max_bytes in (1, 400, 64 << 20):
                    got = store.get_message(TOPIC, queue_id, offset, max_nums, max_bytes=max_bytes)
                    _same(
                        got, _general(store, TOPIC, queue_id, offset, max_nums, max_bytes=max_bytes)
                    )
    assert store_module.SMALL_READ >= 32


def test_a_read_of_a_few_messages_refuses_a_damaged_record(make_store: StoreFactory) -> None:
    store = make_store()
    for i in range(5):
        put(store, f"m{i}".encode())
    # the record of queue offset 3: its magic overwritten on disk
    offsets = [r.position for r in messages_only(walk_commit_log(store.config.commit_log_dir))]
    segment = store.commit_log.queue.files[0]
    segment.pwrite(offsets[3] + 4, b"\0\0\0\0")
    for read in (store.get_message, lambda *a: _general(store, *a)):
        with pytest.raises(CorruptRecordError, match="damaged record at CommitLog offset"):
            read(TOPIC, 0, 2, 3)
        assert read(TOPIC, 0, 0, 3).bodies() == [b"m0", b"m1", b"m2"]
