"""Damaged store files: recovery drops exactly what is bad, says so, and serves the rest.

Each test writes messages with a real store (64 KiB segments, so several of
them), stops it cleanly (``shutdown``) or as a crash (``close``: the abort file
stays and the checkpoint lags behind the log), damages the files on disk,
starts the store again and checks the RecoveryReport, the log, and that every
valid message is served at its (queue, offset), by key, and nowhere else.
"""

from __future__ import annotations

import logging
import random
import shutil
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.store.checkpoint import Checkpoint
from broker.store.config import StoreConfig
from broker.store.files import file_name
from broker.store.inner import MessageInner
from broker.store.results import GetMessageStatus, PutMessageStatus, RecoveryReport
from broker.store.store import MessageStore
from connector.protocol.message import Message
from connector.protocol.record import HEADER_SIZE

TOPIC = "T"
QUEUES = 3
SEGMENT_BYTES = 64 * 1024
CQ_ENTRIES_PER_FILE = 40
HOUR_MS = 3_600_000

pytestmark = pytest.mark.timeout(120)


@dataclass(frozen=True, slots=True)
class Sent:
    key: str
    queue_id: int
    queue_offset: int
    phys: int
    size: int
    body: bytes

    @property
    def end(self) -> int:
        return self.phys + self.size


def make_store(store_dir: Path) -> MessageStore:
    """Tiny files; no background flush or checkpoint, so the tests decide what is durable."""
    return MessageStore(
        StoreConfig(
            store_dir=store_dir,
            mapped_file_size_commit_log=SEGMENT_BYTES,
            consume_queue_entries_per_file=CQ_ENTRIES_PER_FILE,
            max_hash_slot_num=256,
            max_index_num=4_000,
            flush_interval_commit_log_ms=HOUR_MS,
            flush_commit_log_thorough_interval_ms=HOUR_MS,
            flush_interval_consume_queue_ms=HOUR_MS,
            clean_resource_interval_ms=HOUR_MS,
            flush_interval_index_ms=1,  # a checkpoint the test takes flushes the index too
        )
    )


def write(store: MessageStore, rng: random.Random, count: int, first: int) -> list[Sent]:
    """Append ``count`` messages with keys ``k{first}``.. round-robin over the queues."""
    out = []
    for i in range(first, first + count):
        qid = i % QUEUES
        body = rng.randbytes(rng.randint(100, 1500))
        key = f"k{i:05d}"
        msg = Message(topic=TOPIC, body=body, keys=[key], tags=f"tag{i % 2}")
        res = store.put_message(MessageInner.from_message(msg, queue_id=qid, born_timestamp=1))
        assert res.status is PutMessageStatus.PUT_OK, res
        assert res.append is not None
        a = res.append
        out.append(Sent(key, qid, a.queue_offset, a.wrote_offset, a.wrote_bytes, body))
    return out


def assert_serves(store: MessageStore, expected: list[Sent], gone: Sequence[Sent] = ()) -> None:
    """The store serves exactly ``expected``: every queue whole, nothing past its end."""
    for qid in range(QUEUES):
        want = sorted((s for s in expected if s.queue_id == qid), key=lambda s: s.queue_offset)
        assert [s.queue_offset for s in want] == list(range(len(want))), "test bookkeeping"
        assert store.get_min_offset_in_queue(TOPIC, qid) == 0
        assert store.get_max_offset_in_queue(TOPIC, qid) == len(want), f"queue {qid}"
        got = []
        offset = 0
        while offset < len(want):
            res = store.get_message(TOPIC, qid, offset, 64)
            assert res.status is GetMessageStatus.FOUND, (qid, offset, res.status)
            got += [
                (m.queue_offset, m.commit_log_offset, m.keys, m.body)
                for m in res.messages(check_crc=True)
            ]
            offset = res.next_begin_offset
        assert got == [(s.queue_offset, s.phys, [s.key], s.body) for s in want], f"queue {qid}"
        past = store.get_message(TOPIC, qid, len(want), 32)
        assert past.message_count == 0
    for s in expected:
        found = store.query_message(TOPIC, s.key, max_num=4)
        assert [(m.commit_log_offset, m.body) for m in found] == [(s.phys, s.body)], s.key
    for s in gone:
        assert store.query_message(TOPIC, s.key, max_num=4) == [], f"{s.key} came back"
    assert store.commit_log.max_offset() == max((s.end for s in expected), default=0)


def segment_of(store_dir: Path, phys: int) -> tuple[Path, int]:
    start = phys - phys % SEGMENT_BYTES
    return store_dir / "commitlog" / file_name(start), phys - start


def patch(store_dir: Path, phys: int, data: bytes) -> None:
    """Overwrite bytes of the CommitLog at a global offset (the store must be closed)."""
    path, rel = segment_of(store_dir, phys)
    assert rel + len(data) <= SEGMENT_BYTES
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(rel)
        f.write(data)
    assert path.stat().st_size == size


def read_log(store_dir: Path, phys: int, size: int) -> bytes:
    path, rel = segment_of(store_dir, phys)
    with open(path, "rb") as f:
        f.seek(rel)
        return f.read(size)


def crash_after_checkpoint(
    store: MessageStore, rng: random.Random, before: int, after: int
) -> tuple[list[Sent], list[Sent], Checkpoint]:
    """Write, make it all durable with a checkpoint, write more, then crash (close())."""
    head = write(store, rng, before, 0)
    store.commit_log.flush(0)
    checkpoint = store.flush_queues_and_checkpoint()
    assert checkpoint.recover_from == head[-1].end
    tail = write(store, rng, after, before)
    store.close()
    assert store.config.abort_path.exists()
    return head, tail, checkpoint


def restart_and_check(
    store_dir: Path, expected: list[Sent], gone: Sequence[Sent] = ()
) -> RecoveryReport:
    """A clean restart after recovery: nothing dropped again, nothing back."""
    store = make_store(store_dir)
    report = store.start()
    try:
        assert not report.abnormal
        assert report.truncated_at is None
        assert report.dropped_bytes == 0
        assert report.consume_queue_entries_dropped == 0
        assert not report.queues_rebuilt
        assert_serves(store, expected, gone)
    finally:
        store.shutdown()
    return report


def messages_logged(caplog: pytest.LogCaptureFixture, level: int = logging.WARNING) -> str:
    return "\n".join(r.getMessage() for r in caplog.records if r.levelno >= level)


@pytest.fixture
def rng() -> random.Random:
    return random.Random(20240601)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


# -- 1. a torn last record --------------------------------------------------------------


@pytest.mark.parametrize("stop", ["shutdown", "crash"])
@pytest.mark.parametrize(
    "keep_bytes", [0, 4, 8, 12, 100, "half", "proplen", "in_props", "all_but_one"]
)
def test_torn_last_record_is_dropped(
    store_dir: Path,
    rng: random.Random,
    caplog: pytest.LogCaptureFixture,
    stop: str,
    keep_bytes: int | str,
) -> None:
    """The last record lost its end (zeros, the segment keeps its size): it is dropped.

    ``keep_bytes`` is how much of it survived: none, part of the header, half of it,
    everything up to PROPLEN, up to the middle of the properties, or all but the
    last byte. The v1 record's CRC covers the body only: a tear inside the
    properties shows as properties that are not ``name\\x01value\\x02`` pairs.
    """
    store = make_store(store_dir)
    store.start()
    if stop == "shutdown":
        sent = write(store, rng, 300, 0)
        store.shutdown()
    else:
        head, tail, _ = crash_after_checkpoint(store, rng, 200, 100)
        sent = head + tail
    assert len(list((store_dir / "commitlog").iterdir())) >= 4
    victim = sent[-1]
    if keep_bytes == "half":
        keep = victim.size // 2
    elif keep_bytes == "proplen":
        keep = HEADER_SIZE + len(victim.body) + 1 + len(TOPIC)
    elif keep_bytes == "in_props":  # inside the KEYS value: k00299 -> k00\0\0\0...
        props_at = HEADER_SIZE + len(victim.body) + 1 + len(TOPIC) + 2
        record = read_log(store_dir, victim.phys, victim.size)
        keep = record.index(victim.key.encode(), props_at) + 3
    elif keep_bytes == "all_but_one":
        keep = victim.size - 1
    else:
        keep = int(keep_bytes)
    patch(store_dir, victim.phys + keep, bytes(victim.size - keep))

    caplog.set_level(logging.INFO, logger="broker.store")
    store = make_store(store_dir)
    report = store.start()
    try:
        assert report.abnormal == (stop == "crash")
        if keep == 0 and stop == "crash":
            # all zeros after the checkpoint: a record that never reached the disk, so
            # not a truncation, but the queue entry that pointed at it goes
            assert report.truncated_at is None, report
            assert report.consume_queue_entries_dropped == 1
            assert "dropped 1 ConsumeQueue entries" in messages_logged(caplog)
        else:
            assert report.truncated_at == victim.phys, report
            assert report.dropped_bytes >= victim.size
            assert f"truncated at {victim.phys}" in messages_logged(caplog)
        kept = sent[:-1]
        assert_serves(store, kept, gone=[victim])
        assert store.get_max_offset_in_queue(TOPIC, victim.queue_id) == victim.queue_offset
        assert read_log(store_dir, victim.phys, victim.size) == bytes(victim.size)
        # appends continue where the valid log ends, with the right queue offsets
        more = write(store, rng, 30, 1000)
        assert more[0].phys == victim.phys
        first_in_queue = next(s for s in more if s.queue_id == victim.queue_id)
        assert first_in_queue.queue_offset == victim.queue_offset
        assert_serves(store, kept + more, gone=[victim])
    finally:
        store.shutdown()
    restart_and_check(store_dir, kept + more, gone=[victim])


# -- 2. a flipped body byte in the unflushed tail -----------------------------------------


@pytest.mark.parametrize("victim_index", [0, 37, -1])
def test_flipped_body_byte_after_checkpoint_truncates_there(
    store_dir: Path,
    rng: random.Random,
    caplog: pytest.LogCaptureFixture,
    victim_index: int,
) -> None:
    store = make_store(store_dir)
    store.start()
    head, tail, checkpoint = crash_after_checkpoint(store, rng, 150, 80)
    victim = tail[victim_index]
    pos = victim.phys + HEADER_SIZE + len(victim.body) // 2
    (byte,) = read_log(store_dir, pos, 1)
    patch(store_dir, pos, bytes([byte ^ 0x40]))
    later_segments = {segment_of(store_dir, s.phys)[0] for s in tail if s.phys > victim.phys}
    later_segments.discard(segment_of(store_dir, victim.phys)[0])

    caplog.set_level(logging.INFO, logger="broker.store")
    store = make_store(store_dir)
    report = store.start()
    try:
        assert report.abnormal
        assert report.checkpoint_found
        assert report.scanned_from == checkpoint.recover_from
        assert report.truncated_at == victim.phys, report
        assert "CRC" in report.reason
        assert f"truncated at {victim.phys}" in messages_logged(caplog)
        kept = [s for s in head + tail if s.phys < victim.phys]
        dropped = [s for s in tail if s.phys >= victim.phys]
        assert report.consume_queue_entries_dropped == len(dropped)
        assert_serves(store, kept, gone=dropped)
        assert not any(p.exists() for p in later_segments)
        more = write(store, rng, 20, 1000)
        assert more[0].phys == victim.phys
        assert_serves(store, kept + more, gone=dropped)
    finally:
        store.shutdown()
    restart_and_check(store_dir, kept + more, gone=dropped)


# -- 3. garbage after the last record -----------------------------------------------------


@pytest.mark.parametrize("stop", ["shutdown", "crash"])
def test_garbage_after_last_record_is_dropped(
    store_dir: Path, rng: random.Random, caplog: pytest.LogCaptureFixture, stop: str
) -> None:
    store = make_store(store_dir)
    store.start()
    if stop == "shutdown":
        sent = write(store, rng, 200, 0)
        store.shutdown()
    else:
        head, tail, _ = crash_after_checkpoint(store, rng, 150, 50)
        sent = head + tail
    end = sent[-1].end
    room = SEGMENT_BYTES - end % SEGMENT_BYTES
    garbage = bytes(b or 1 for b in rng.randbytes(min(300, room)))
    patch(store_dir, end, garbage)

    caplog.set_level(logging.INFO, logger="broker.store")
    store = make_store(store_dir)
    report = store.start()
    try:
        assert report.truncated_at == end, report
        assert report.dropped_bytes >= len(garbage)
        assert report.reason
        assert f"truncated at {end}" in messages_logged(caplog)
        assert read_log(store_dir, end, len(garbage)) == bytes(len(garbage))
        assert_serves(store, sent)
        more = write(store, rng, 40, 1000)
        assert more[0].phys == end
        for q in range(QUEUES):
            first = next(s for s in more if s.queue_id == q)
            assert first.queue_offset == sum(1 for s in sent if s.queue_id == q)
        assert_serves(store, sent + more)
    finally:
        store.shutdown()
    restart_and_check(store_dir, sent + more)


# -- 4. lost ConsumeQueue files -----------------------------------------------------------


def _cq_file(store_dir: Path, qid: int, index: int) -> Path:
    return (
        store_dir / "consumequeue" / TOPIC / str(qid) / file_name(index * CQ_ENTRIES_PER_FILE * 20)
    )


@pytest.mark.parametrize("stop", ["shutdown", "crash"])
@pytest.mark.parametrize(
    "damage", ["delete-first", "delete-middle", "delete-last", "delete-dir", "short-file"]
)
def test_lost_consume_queue_is_rebuilt(
    store_dir: Path,
    rng: random.Random,
    caplog: pytest.LogCaptureFixture,
    stop: str,
    damage: str,
) -> None:
    store = make_store(store_dir)
    store.start()
    if stop == "shutdown":
        sent = write(store, rng, 300, 0)
        store.shutdown()
    else:
        head, tail, _ = crash_after_checkpoint(store, rng, 240, 60)
        sent = head + tail
    qdir = store_dir / "consumequeue" / TOPIC / "0"
    assert len(list(qdir.iterdir())) == 3  # 100 entries, 40 a file
    if damage == "delete-first":
        _cq_file(store_dir, 0, 0).unlink()
    elif damage == "delete-middle":
        _cq_file(store_dir, 0, 1).unlink()
    elif damage == "delete-last":
        _cq_file(store_dir, 0, 2).unlink()
    elif damage == "delete-dir":
        shutil.rmtree(qdir)
    else:
        with open(_cq_file(store_dir, 0, 1), "r+b") as f:
            f.truncate(CQ_ENTRIES_PER_FILE * 20 - 7)

    caplog.set_level(logging.INFO, logger="broker.store")
    store = make_store(store_dir)
    report = store.start()
    try:
        assert report.truncated_at is None
        if damage == "delete-last" and stop == "crash":
            # the lost entries were all written after the checkpoint: the rescan of the
            # unflushed tail puts them back, no whole-queue rebuild is needed
            assert report.queues_rebuilt == [], report
            assert report.consume_queue_entries_rebuilt == 20
        else:
            assert report.queues_rebuilt == [f"{TOPIC}/0"], report
            assert "rebuilding" in messages_logged(caplog)
        assert_serves(store, sent)
        more = write(store, rng, 30, 1000)
        assert_serves(store, sent + more)
    finally:
        store.shutdown()
    restart_and_check(store_dir, sent + more)


# -- 5. no checkpoint -----------------------------------------------------------------------


@pytest.mark.parametrize("stop", ["shutdown", "crash"])
def test_missing_checkpoint(
    store_dir: Path, rng: random.Random, caplog: pytest.LogCaptureFixture, stop: str
) -> None:
    store = make_store(store_dir)
    store.start()
    if stop == "shutdown":
        sent = write(store, rng, 300, 0)
        store.shutdown()
    else:
        head, tail, _ = crash_after_checkpoint(store, rng, 200, 100)
        sent = head + tail
    for name in ("checkpoint", "checkpoint.bak"):
        (store_dir / name).unlink()

    caplog.set_level(logging.INFO, logger="broker.store")
    store = make_store(store_dir)
    report = store.start()
    try:
        assert not report.checkpoint_found
        assert report.abnormal == (stop == "crash")
        assert report.truncated_at is None
        assert "no usable checkpoint" in messages_logged(caplog)
        assert_serves(store, sent)
        more = write(store, rng, 30, 1000)
        assert_serves(store, sent + more)
    finally:
        store.shutdown()
    restart_and_check(store_dir, sent + more)


# -- 6. a stale abort file ------------------------------------------------------------------


def test_stale_abort_file_loses_and_duplicates_nothing(store_dir: Path, rng: random.Random) -> None:
    store = make_store(store_dir)
    store.start()
    sent = write(store, rng, 300, 0)
    offsets = store.queue_offsets()
    store.shutdown()
    (store_dir / "abort").write_bytes(b"")

    store = make_store(store_dir)
    report = store.start()
    try:
        assert report.abnormal
        assert report.truncated_at is None
        assert report.consume_queue_entries_dropped == 0
        assert report.consume_queue_entries_rebuilt == 0
        assert not report.queues_rebuilt
        assert store.queue_offsets() == offsets
        assert_serves(store, sent)  # each key found exactly once
        more = write(store, rng, 30, 1000)
        assert_serves(store, sent + more)
    finally:
        store.shutdown()
    restart_and_check(store_dir, sent + more)


# -- 7. a corrupt checkpoint ------------------------------------------------------------------


@pytest.mark.parametrize("stop", ["shutdown", "crash"])
@pytest.mark.parametrize("damaged", [("checkpoint",), ("checkpoint", "checkpoint.bak")])
def test_corrupt_checkpoint_falls_back(
    store_dir: Path,
    rng: random.Random,
    caplog: pytest.LogCaptureFixture,
    stop: str,
    damaged: tuple[str, ...],
) -> None:
    store = make_store(store_dir)
    store.start()
    if stop == "shutdown":
        sent = write(store, rng, 300, 0)
        store.shutdown()
    else:
        head, tail, _ = crash_after_checkpoint(store, rng, 200, 100)
        sent = head + tail
    assert (store_dir / "checkpoint.bak").exists()
    for name in damaged:
        (store_dir / name).write_bytes(bytes(b or 1 for b in rng.randbytes(64)))

    caplog.set_level(logging.INFO, logger="broker.store")
    store = make_store(store_dir)
    report = store.start()
    try:
        assert report.checkpoint_found == (len(damaged) == 1)
        assert report.truncated_at is None
        logged = messages_logged(caplog)
        assert "checkpoint" in logged
        assert "unreadable" in logged
        if len(damaged) == 2:
            assert "no usable checkpoint" in logged
        assert_serves(store, sent)
        more = write(store, rng, 30, 1000)
        assert_serves(store, sent + more)
    finally:
        store.shutdown()
    restart_and_check(store_dir, sent + more)


# -- 8. a segment whose creation was interrupted ------------------------------------------------


@pytest.mark.parametrize("stop", ["shutdown", "crash"])
def test_interrupted_segment_creation_is_cleaned_up(
    store_dir: Path, rng: random.Random, caplog: pytest.LogCaptureFixture, stop: str
) -> None:
    """A crash while a new segment is being sized leaves only a temp file, never a short segment."""
    store = make_store(store_dir)
    store.start()
    if stop == "shutdown":
        sent = write(store, rng, 200, 0)
        store.shutdown()
    else:
        head, tail, _ = crash_after_checkpoint(store, rng, 150, 50)
        sent = head + tail
    next_start = (sent[-1].end // SEGMENT_BYTES + 1) * SEGMENT_BYTES
    leftovers = [
        store_dir / "commitlog" / (file_name(next_start) + ".tmp"),
        store_dir
        / "consumequeue"
        / TOPIC
        / "0"
        / (file_name(CQ_ENTRIES_PER_FILE * 20 * 9) + ".tmp"),
    ]
    for path in leftovers:
        path.write_bytes(b"")

    caplog.set_level(logging.INFO, logger="broker.store")
    store = make_store(store_dir)
    report = store.start()
    try:
        assert report.truncated_at is None
        assert not any(p.exists() for p in leftovers)
        assert "creation was interrupted" in messages_logged(caplog)
        assert_serves(store, sent)
        more = write(store, rng, 200, 1000)  # rolls over into the segment that was interrupted
        assert more[-1].phys >= next_start
        assert_serves(store, sent + more)
    finally:
        store.shutdown()
    restart_and_check(store_dir, sent + more)


# -- 9. an index put cut short by a crash ---------------------------------------------------------


@pytest.mark.parametrize("uncommitted", [1, 8, 30])
def test_index_put_cut_by_a_crash_keeps_every_chain(
    store_dir: Path, rng: random.Random, caplog: pytest.LogCaptureFixture, uncommitted: int
) -> None:
    """A crash after an index put wrote entries and slots but before the header's count.

    Recovery re-indexes the unflushed tail over those uncommitted entries; slots
    still pointing at them must not cut off (or cross-link) their buckets' older
    entries: every key is found exactly once afterwards.
    """
    store = make_store(store_dir)
    store.start()
    head, tail, _ = crash_after_checkpoint(store, rng, 250, 30)
    (index_file,) = sorted((store_dir / "index").iterdir())
    with open(index_file, "r+b") as f:  # header: 4 x i64, slot count i32, entry count i32
        f.seek(36)
        (count,) = struct.unpack(">i", f.read(4))
        assert count == 1 + len(head) + len(tail)  # entry 0 is unused
        f.seek(36)
        f.write(struct.pack(">i", count - uncommitted))

    caplog.set_level(logging.INFO, logger="broker.store")
    store = make_store(store_dir)
    report = store.start()
    try:
        assert report.abnormal
        assert report.index_entries_rebuilt == len(tail)
        assert "point past its last entry" in messages_logged(caplog)
        assert_serves(store, head + tail)
        more = write(store, rng, 100, 1000)
        assert_serves(store, head + tail + more)
    finally:
        store.shutdown()
    restart_and_check(store_dir, head + tail + more)
