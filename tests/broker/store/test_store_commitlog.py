"""CommitLog segments: rollover at the 8-spare-bytes boundary, BLANK records, batches
split across segments and records too large for any segment, checked against the
raw bytes of the segment files.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest

from broker.store.inner import BatchInner
from broker.store.results import GetMessageStatus, PutMessageStatus
from broker.store.store import MessageStore
from connector.errors import CorruptRecordError
from connector.protocol.message import Message
from tests.support.store import (
    BLANK_MAGIC,
    TOPIC,
    StoreFactory,
    inner,
    messages_only,
    put,
    put_batch,
    record_len,
    segment_files,
    walk_commit_log,
)

SEG = 4096
FIRST = 200  # the first record of every boundary test takes 200 bytes


def _start_with_first_record(make_store: StoreFactory) -> MessageStore:
    store = make_store(mapped_file_size_commit_log=SEG)
    res = put(store, b"a" * (FIRST - record_len(0)))
    assert res.append is not None
    assert (res.append.wrote_offset, res.append.wrote_bytes) == (0, FIRST)
    return store


@pytest.mark.parametrize(
    ("spare", "same_segment"),
    [
        (9, True),
        (8, True),  # exactly 8 bytes left over: still fits
        (7, False),  # one byte more than that: goes to the next segment
        (0, False),  # a record exactly as large as what is left also moves on
    ],
)
def test_record_boundary_needs_eight_spare_bytes(
    make_store: StoreFactory, spare: int, same_segment: bool
) -> None:
    store = _start_with_first_record(make_store)
    remaining = SEG - FIRST
    size = remaining - spare
    res = put(store, b"b" * (size - record_len(0)))
    assert res.append is not None
    assert res.append.wrote_bytes == size
    if same_segment:
        assert res.append.wrote_offset == FIRST
    else:
        assert res.append.wrote_offset == SEG
    # one more small record: it always lands in the second segment
    tail = put(store, b"c" * 10)
    assert tail.append is not None
    assert tail.append.wrote_offset == (SEG if same_segment else SEG + size)
    records = walk_commit_log(store.config.commit_log_dir)
    blanks = [r for r in records if r.blank]
    assert len(blanks) == 1
    blank = blanks[0]
    if same_segment:
        # the BLANK is written only when the next record does not fit
        assert blank.position == FIRST + size
        assert blank.total_size == spare
    else:
        assert blank.position == FIRST
        assert blank.total_size == remaining
    raw = (store.config.commit_log_dir / "00000000000000000000").read_bytes()
    assert struct.unpack_from(">iI", raw, blank.position) == (blank.total_size, BLANK_MAGIC)
    assert [r.body[:1] for r in messages_only(records)] == [b"a", b"b", b"c"]


def test_tail_record_after_exact_fit_goes_to_next_segment(make_store: StoreFactory) -> None:
    store = _start_with_first_record(make_store)
    exact = put(store, b"b" * (SEG - FIRST - 8 - record_len(0)))
    assert exact.append is not None
    assert exact.append.end_offset == SEG - 8
    nxt = put(store, b"c")
    assert nxt.append is not None
    assert nxt.append.wrote_offset == SEG
    assert [p.name for p in segment_files(store.config.commit_log_dir)] == [
        "00000000000000000000",
        "00000000000000004096",
    ]


def test_record_bigger_than_rest_leaves_blank_and_moves_on(make_store: StoreFactory) -> None:
    store = _start_with_first_record(make_store)
    res = put(store, b"x" * 3900)  # 4000 bytes: does not fit the 3896 left
    assert res.append is not None
    assert res.append.wrote_offset == SEG
    seg0, seg1 = segment_files(store.config.commit_log_dir)
    assert (seg0.name, seg1.name) == ("00000000000000000000", "00000000000000004096")
    raw0 = seg0.read_bytes()
    assert len(raw0) == SEG
    total, magic = struct.unpack_from(">iI", raw0, FIRST)
    assert magic == 0xCBD43194
    assert total == SEG - FIRST
    raw1 = seg1.read_bytes()
    total1, magic1 = struct.unpack_from(">iI", raw1, 0)
    assert (total1, magic1) == (record_len(3900), 0xDAA320A7)
    assert struct.unpack_from(">q", raw1, 28)[0] == SEG  # PHYSICALOFFSET
    # the message is readable at its new position, the BLANK is not a message
    found = store.get_message(TOPIC, 0, 1)
    assert found.status is GetMessageStatus.FOUND
    [msg] = found.messages()
    assert msg.commit_log_offset == SEG
    assert msg.body == b"x" * 3900
    assert store.look_message_by_offset(FIRST) is None


def test_many_segments_layout(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=SEG)
    bodies = [bytes([65 + i % 26]) * (50 + (i * 37) % 700) for i in range(120)]
    positions = []
    for b in bodies:
        res = put(store, b)
        assert res.append is not None
        positions.append(res.append.wrote_offset)
    files = segment_files(store.config.commit_log_dir)
    assert len(files) > 5
    for i, f in enumerate(files):
        assert f.name == f"{i * SEG:020d}"
        assert f.stat().st_size == SEG
    records = walk_commit_log(store.config.commit_log_dir)
    msgs = messages_only(records)
    assert [r.body for r in msgs] == bodies
    assert [r.position for r in msgs] == positions
    assert [r.queue_offset for r in msgs] == list(range(len(bodies)))
    for r in msgs:  # no record spans two segments
        assert r.position // SEG == (r.position + r.total_size - 1) // SEG
    # every segment but the active one ends in a BLANK (or is filled to the byte)
    blanks = {r.position // SEG for r in records if r.blank}
    assert blanks == set(range(len(files) - 1))


def test_batch_split_across_segments(make_store: StoreFactory) -> None:
    store = _start_with_first_record(make_store)
    bodies = [bytes([97 + i % 26]) * (100 + 53 * i) for i in range(30)]
    res = put_batch(store, bodies)
    assert res.append is not None
    assert res.append.msg_num == 30
    assert res.append.queue_offset == 1
    offsets = list(res.append.physical_offsets)
    assert len(offsets) == 30
    msgs = [r for r in messages_only(walk_commit_log(store.config.commit_log_dir))][1:]
    assert [r.body for r in msgs] == bodies
    assert [r.position for r in msgs] == offsets
    assert [r.physical_offset for r in msgs] == offsets
    assert [r.queue_offset for r in msgs] == list(range(1, 31))
    assert len({p // SEG for p in offsets}) > 3  # really spread over segments
    for r in msgs:
        assert r.position // SEG == (r.position + r.total_size - 1) // SEG
    got = store.get_message(TOPIC, 0, 1, max_nums=100)
    assert got.status is GetMessageStatus.FOUND
    assert got.bodies() == bodies
    assert got.queue_offsets == list(range(1, 31))
    assert [m.commit_log_offset for m in got.messages()] == offsets
    assert got.next_begin_offset == 31


def test_batch_whose_first_record_does_not_fit(make_store: StoreFactory) -> None:
    store = _start_with_first_record(make_store)
    # 3890-byte first record: 3890 + 8 > 3896 left, so the batch starts a new segment
    res = put_batch(store, [b"p" * (3890 - record_len(0)), b"q" * 10])
    assert res.append is not None
    assert res.append.physical_offsets == (SEG, SEG + 3890)
    assert res.append.wrote_offset == SEG
    records = walk_commit_log(store.config.commit_log_dir)
    assert records[1].blank
    assert records[1].position == FIRST


def test_largest_possible_record(make_store: StoreFactory) -> None:
    store = _start_with_first_record(make_store)
    res = put(store, b"m" * (SEG - 8 - record_len(0)))
    assert res.append is not None
    assert res.append.wrote_offset == SEG
    assert res.append.wrote_bytes == SEG - 8


@pytest.mark.parametrize("as_batch", [False, True])
def test_record_too_large_for_any_segment(make_store: StoreFactory, as_batch: bool) -> None:
    store = _start_with_first_record(make_store)
    before = store.commit_log.max_offset()
    files_before = [p.name for p in segment_files(store.config.commit_log_dir)]
    raw_before = (store.config.commit_log_dir / files_before[0]).read_bytes()
    too_big = b"z" * (SEG - 8 - record_len(0) + 1)
    if as_batch:
        msgs = [Message(topic=TOPIC, body=b"ok"), Message(topic=TOPIC, body=too_big)]
        result = store.put_messages(BatchInner.from_messages(msgs, queue_id=0, born_timestamp=1))
    else:
        result = store.put_message(inner(too_big))
    assert not result.ok
    assert result.status is not PutMessageStatus.PUT_OK
    assert result.append is None
    assert store.commit_log.max_offset() == before
    assert store.get_max_offset_in_queue(TOPIC, 0) == 1
    assert [p.name for p in segment_files(store.config.commit_log_dir)] == files_before
    assert (store.config.commit_log_dir / files_before[0]).read_bytes() == raw_before
    # and the store still works afterwards, right where it was
    after = put(store, b"next")
    assert after.append is not None
    assert after.append.wrote_offset == before
    assert after.append.queue_offset == 1


def test_large_records_are_written_whole_across_segments(make_store: StoreFactory) -> None:
    """Records from 8 KiB on are pwritten, not stored through the mapping: byte for
    byte what the small-record path lays out, a segment that cannot hold the next one
    ends in a BLANK, and a crash (no clean shutdown) keeps every record."""
    seg = 64 << 10
    store = make_store(mapped_file_size_commit_log=seg)
    bodies = [b"s" * 100, b"L" * (9 << 10), b"M" * (30 << 10), b"N" * (30 << 10), b"t" * 50]
    offsets = []
    for body in bodies:
        res = put(store, body)
        assert res.ok and res.append is not None
        offsets.append(res.append.wrote_offset)
    assert offsets[3] == seg  # the third large one did not fit the first segment
    records = walk_commit_log(store.config.commit_log_dir)  # checks magic, sizes, CRCs
    assert [r.blank for r in records] == [False, False, False, True, False, False]
    assert [r.body for r in messages_only(records)] == bodies
    assert [r.queue_offset for r in messages_only(records)] == [0, 1, 2, 3, 4]
    for at, body in zip(offsets, bodies, strict=True):
        msg = store.look_message_by_offset(at)
        assert msg is not None and msg.body == body
        assert bytes(store.read_body(msg)) == body
    store.close()  # killed: no clean shutdown

    again = make_store(mapped_file_size_commit_log=seg)
    got = again.get_message(TOPIC, 0, 0, 10)
    assert got.status is GetMessageStatus.FOUND
    assert [m.body for m in got.messages()] == bodies


def test_read_body_checks_the_record_it_reads(make_store: StoreFactory) -> None:
    """``read_body``: the stored body, CRC-checked; a damaged body or a record that is
    not the one the message was read from is CorruptRecordError, never bad bytes."""
    store = make_store()
    res = put(store, b"x" * 3000)
    assert res.append is not None
    msg = store.look_message_by_offset(res.append.wrote_offset, with_body=False)
    assert msg is not None and msg.body == b""
    assert bytes(store.read_body(msg)) == b"x" * 3000
    with pytest.raises(CorruptRecordError, match="not the one"):
        store.read_body(dataclasses.replace(msg, store_size=msg.store_size - 1))
    mf = store.commit_log.queue.last()
    assert mf is not None
    at = res.append.wrote_offset - mf.file_from_offset + 88 + 7  # a byte of the body
    mf.buffer()[at] ^= 0xFF  # the disk flipped it
    with pytest.raises(CorruptRecordError, match="CRC"):
        store.read_body(msg)
