"""kill -9 of a real store process, again and again, on one store directory.

The durability probe (``python -m broker.store.probe``) appends with
SYNC_FLUSH and prints one ``ack`` line per message only once it is durable.
This test SIGKILLs it at random moments (sometimes right after it is ready),
restarts it on the same store, and every few rounds opens the store
in-process and checks it against everything the probes ever acknowledged:

* every acknowledged message is at its (queue, offset), body hash and key equal;
* every offset in ``[min, max)`` of every queue decodes (body CRC checked) to
  a probe message with that queue offset, and nothing is served at ``max``;
* nothing exists that no probe wrote: per probe run, the stored keys are
  exactly the run's first ``n`` sequence numbers (acked ones plus at most the
  single batch that was in flight when the kill landed), each stored once;
* the CommitLog holds exactly those records, and only zeros after its end;
* each key is found exactly once through the index.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.store.config import StoreConfig
from broker.store.results import GetMessageStatus, RecoveryReport
from broker.store.store import MessageStore
from connector.protocol.record import check_record

ROOT = Path(__file__).resolve().parents[3]
TOPIC = "ProbeTopic"  # broker.store.probe's topic and queue count
QUEUES = 4
MAX_BATCH = 20
SEGMENT_BYTES = 16 * 1024  # dozens of segment (and queue file) rollovers per round
READY_TIMEOUT_S = 60.0
EXIT_TIMEOUT_S = 30.0
KEY_RE = re.compile(r"^(?P<run>(?P<pid>\d+)-[0-9a-f]{8})-(?P<seq>\d+)$")

pytestmark = pytest.mark.timeout(300)


@dataclass(frozen=True, slots=True)
class Ack:
    queue_id: int
    offset: int
    sha1: str
    key: str


@dataclass(slots=True)
class Round:
    pid: int
    ready: str
    acks: list[Ack] = field(default_factory=list)


class LineReader:
    """Complete lines from a pipe, every read bounded by a deadline (no blocking readline)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._buf = b""
        self.eof = False

    def _fill(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); False on timeout or EOF."""
        left = deadline - time.monotonic()
        if self.eof or left <= 0:
            return False
        ready, _, _ = select.select([self._fd], [], [], left)
        if not ready:
            return False
        chunk = os.read(self._fd, 1 << 16)
        if not chunk:
            self.eof = True
            return False
        self._buf += chunk
        return True

    def lines_until(self, deadline: float) -> list[str]:
        """Every complete line received before ``deadline`` or EOF."""
        while self._fill(deadline):
            pass
        return self._take_lines()

    def line(self, deadline: float) -> str | None:
        """The next complete line, or None if none came before ``deadline`` / EOF."""
        while b"\n" not in self._buf:
            if not self._fill(deadline):
                return None
        head, self._buf = self._buf.split(b"\n", 1)
        return head.decode()

    def _take_lines(self) -> list[str]:
        *lines, self._buf = self._buf.split(b"\n")
        return [ln.decode() for ln in lines]


def parse_acks(lines: list[str]) -> list[Ack]:
    acks = []
    for line in lines:
        parts = line.split()
        if parts and parts[0] == "fail":
            pytest.fail(f"probe reported a failed append: {line}")
        if len(parts) == 6 and parts[0] == "ack":
            assert parts[1] == TOPIC, line
            acks.append(Ack(int(parts[2]), int(parts[3]), parts[4], parts[5]))
    return acks


def run_probe_and_kill(
    store_dir: Path,
    *,
    flush: str,
    kill_after_s: float,
    after_first_ack: bool,
    stderr_path: Path,
) -> Round:
    """Start the probe, SIGKILL it ``kill_after_s`` after it is ready (or after its first
    ack: its first append may wait on JIT compilation), return what it acknowledged."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    cmd = [
        sys.executable,
        "-m",
        "broker.store.probe",
        "--store",
        str(store_dir),
        "--flush",
        flush,
        "--segment-size",
        str(SEGMENT_BYTES),
    ]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
        )
    try:
        reader = LineReader(proc)
        ready = reader.line(time.monotonic() + READY_TIMEOUT_S)
        if ready is None or not ready.startswith("ready "):
            proc.kill()
            proc.wait(EXIT_TIMEOUT_S)
            pytest.fail(
                f"probe did not get ready: {ready!r}; stderr:\n{stderr_path.read_text()[-4000:]}"
            )
        lines: list[str] = []
        if after_first_ack:
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not lines or not lines[-1].startswith("ack "):
                line = reader.line(deadline)
                if line is None:
                    break  # no ack in time (or the probe died): kill it anyway, checks follow
                lines.append(line)
        lines += reader.lines_until(time.monotonic() + kill_after_s)
        os.kill(proc.pid, signal.SIGKILL)
        # whatever it acknowledged before the kill landed is still in the pipe
        lines += reader.lines_until(time.monotonic() + EXIT_TIMEOUT_S)
        assert reader.eof, "the probe's stdout did not close after SIGKILL"
        rc = proc.wait(EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(EXIT_TIMEOUT_S)
        assert proc.stdout is not None
        proc.stdout.close()
    assert rc == -signal.SIGKILL, f"probe exited with {rc}; stderr:\n{stderr_path.read_text()}"
    assert "done" not in lines, "the probe finished before it was killed"
    return Round(pid=proc.pid, ready=ready, acks=parse_acks(lines))


def reader_config(store_dir: Path) -> StoreConfig:
    """The probe's layout exactly (index file sizes derive from the slot/entry counts)."""
    return StoreConfig(
        store_dir=store_dir,
        mapped_file_size_commit_log=SEGMENT_BYTES,
        consume_queue_entries_per_file=500,
        max_hash_slot_num=1024,
        max_index_num=20_000,
    )


def scan_commit_log(store: MessageStore) -> int:
    """Walk the log record by record; returns the record count.

    Asserts that the log is a gap-free chain of valid records (and BLANK ends
    of segments) followed only by zero bytes: nothing of a torn tail is left.
    """
    files = store.commit_log.queue.files
    if not files:  # every probe so far was killed before its first append
        assert store.commit_log.max_offset() == 0
        return 0
    records = 0
    end = None
    for mf in files:
        assert end is None, f"segment {mf.path.name} follows the end of data"
        buf = mf.buffer()
        pos = 0
        while pos < mf.file_size:
            if buf[pos : pos + 8] == bytes(8):
                end = mf.file_from_offset + pos
                break
            chk = check_record(
                buf, pos, expected_offset=mf.file_from_offset + pos, limit=mf.file_size
            )
            if chk.blank:
                break
            records += 1
            pos += chk.size
        if end is not None:
            tail = bytes(buf[pos:])
            assert tail.count(0) == len(tail), (
                f"non-zero bytes after the end of data at {end} in {mf.path.name}"
            )
    if end is None:  # the last segment ended exactly full (or with a BLANK)
        end = files[-1].end_offset
    assert store.commit_log.max_offset() == end
    return records


def describe_index_lookup(store: MessageStore, key: str) -> str:
    """What the index holds for ``key`` and what those offsets decode to (failure text)."""
    hits = store.index.lookup(TOPIC, key, 8, 0, 1 << 62)
    decoded = {}
    for phys in hits:
        msg = store.look_message_by_offset(phys)
        decoded[phys] = None if msg is None else (msg.topic, msg.keys, msg.commit_log_offset)
    files = [(f.file.path.name, f.index_count, f.begin_ts, f.end_ts) for f in store.index.files]
    return f"index hits {decoded}, log end {store.commit_log.max_offset()}, index files {files}"


def verify_store(
    store_dir: Path, acked: dict[tuple[int, int], Ack], pids: set[int]
) -> RecoveryReport:
    """Open the store in-process and check it against every acknowledged message."""
    store = MessageStore(reader_config(store_dir))
    report = store.start()
    try:
        stored: dict[str, tuple[int, int, str]] = {}  # key -> (queue, offset, sha1)
        total = 0
        for qid in range(QUEUES):
            lo = store.get_min_offset_in_queue(TOPIC, qid)
            hi = store.get_max_offset_in_queue(TOPIC, qid)
            assert lo == 0, f"queue {qid} lost its head: min offset {lo}"
            offset = lo
            while offset < hi:
                got = store.get_message(TOPIC, qid, offset, 256)
                assert got.status is GetMessageStatus.FOUND, (qid, offset, hi, got.status)
                assert got.queue_offsets == list(range(offset, offset + got.message_count))
                for qo, msg in zip(got.queue_offsets, got.messages(check_crc=True), strict=True):
                    assert (msg.topic, msg.queue_id, msg.queue_offset) == (TOPIC, qid, qo)
                    assert len(msg.keys) == 1, msg.keys
                    key = msg.keys[0]
                    m = KEY_RE.match(key)
                    assert m is not None, f"({qid}, {qo}) has a key no probe wrote: {key!r}"
                    assert int(m["pid"]) in pids, f"({qid}, {qo}): {key!r} is from no probe run"
                    assert key not in stored, f"{key} stored twice: {stored[key]} and {qid, qo}"
                    stored[key] = (qid, qo, hashlib.sha1(msg.body).hexdigest())
                offset = got.next_begin_offset
                total += got.message_count
            assert offset == hi
            past = store.get_message(TOPIC, qid, hi, 32)
            assert past.message_count == 0
            empty = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
            expected = empty if hi == 0 else (GetMessageStatus.OFFSET_OVERFLOW_ONE,)
            assert past.status in expected, (qid, hi, past.status)

        # every acknowledged message, byte for byte, where the ack said
        for (qid, off), ack in acked.items():
            assert stored.get(ack.key) == (qid, off, ack.sha1), (
                f"acknowledged {ack} is not intact: {stored.get(ack.key)}"
            )

        # per probe run: keys 0..n-1, nothing missing in between; the unacknowledged
        # ones are the one batch or group in flight at the kill: the run's last keys,
        # consecutive offsets in each queue (a batch has one queue, a group several)
        acked_keys = {a.key for a in acked.values()}
        runs: dict[str, list[tuple[int, str]]] = defaultdict(list)
        for key in stored:
            m = KEY_RE.match(key)
            assert m is not None
            runs[m["run"]].append((int(m["seq"]), key))
        for run, seqs in runs.items():
            seqs.sort()
            assert [s for s, _ in seqs] == list(range(len(seqs))), f"run {run} has gaps"
            unacked = [s for s, k in seqs if k not in acked_keys]
            assert len(unacked) <= MAX_BATCH, f"run {run}: {len(unacked)} unacknowledged messages"
            assert unacked == [s for s, _ in seqs[len(seqs) - len(unacked) :]], (run, unacked)
            extra = [stored[k] for _, k in seqs if k not in acked_keys]
            for queue in {q for q, _, _ in extra}:
                offsets = sorted(o for q, o, _ in extra if q == queue)
                assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), extra

        # the log holds these records and nothing else, no torn bytes after its end
        assert scan_commit_log(store) == total == len(stored)

        # lookups by key find each message exactly once
        rng = random.Random(total)
        for key in rng.sample(sorted(stored), min(200, len(stored))):
            found = store.query_message(TOPIC, key, max_num=4)
            assert [(m.queue_id, m.queue_offset) for m in found] == [stored[key][:2]], (
                key,
                describe_index_lookup(store, key),
            )
    finally:
        store.shutdown()
    return report


def test_sync_flush_survives_repeated_kill_9(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    rounds = 24
    verify_after = {3, 7, 8, 12, 16, 19, rounds}  # others leave recovery to the next probe
    acked: dict[tuple[int, int], Ack] = {}
    pids: set[int] = set()
    unclean = False  # was the last thing to touch the store a kill -9?
    started = time.monotonic()
    for n in range(1, rounds + 1):
        moment = rng.random()  # right after ready / during warm-up / while appending
        rnd = run_probe_and_kill(
            store_dir,
            flush="sync",
            kill_after_s=0.0 if moment < 0.15 else rng.uniform(0.05, 0.6),
            after_first_ack=moment >= 0.3,
            stderr_path=tmp_path / f"probe-{n}.err",
        )
        abnormal = rnd.ready.split()[1]
        assert abnormal == str(unclean), f"round {n}: {rnd.ready!r} after unclean={unclean}"
        pids.add(rnd.pid)
        for ack in rnd.acks:
            previous = acked.get((ack.queue_id, ack.offset))
            assert previous is None, f"round {n}: ({ack.queue_id}, {ack.offset}) acked twice"
            acked[(ack.queue_id, ack.offset)] = ack
        unclean = True
        if n in verify_after:
            report = verify_store(store_dir, acked, pids)
            assert report.abnormal, f"round {n}: recovery after kill -9 was not abnormal"
            unclean = False
    assert len(acked) > 1000, f"only {len(acked)} messages acknowledged in {rounds} rounds"
    segments = len(list((store_dir / "commitlog").iterdir()))
    assert segments > 2 * rounds, f"only {segments} segments: rounds did not cross boundaries"
    assert time.monotonic() - started < 120


def test_async_flush_acked_messages_survive_kill_9(tmp_path: Path) -> None:
    """kill -9 loses no page cache: even ASYNC_FLUSH acknowledgements must all survive."""
    store_dir = tmp_path / "store"
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    acked: dict[tuple[int, int], Ack] = {}
    pids: set[int] = set()
    for n in range(1, 4):
        rnd = run_probe_and_kill(
            store_dir,
            flush="async",
            kill_after_s=rng.uniform(0.1, 0.5),
            after_first_ack=True,
            stderr_path=tmp_path / f"probe-{n}.err",
        )
        pids.add(rnd.pid)
        acked.update(((a.queue_id, a.offset), a) for a in rnd.acks)
        report = verify_store(store_dir, acked, pids)
        assert report.abnormal
    assert len(acked) > 300
