"""Crash recovery: make the CommitLog, queues and index agree again.

* The scan starts at the checkpoint (the point up to which log, queues and
  index were all durable), so recovery time follows the unflushed tail, not
  the size of the log. With no usable checkpoint it starts at the segment
  holding the newest queue entry, or at the start of the log.
* Every record from there on is checked (magic, size bounds, body CRC,
  PHYSICALOFFSET equal to its own position, lengths that add up, a valid
  topic name, properties that are whole ``name\\x01value\\x02`` pairs) and
  re-dispatched to its ConsumeQueue and the index where they lack it.
* The body CRC covers only the body (RocketMQ v1). A write cut by kill -9 or
  a crash leaves zeros at the end of a record; where that end lies in the
  properties or the topic, their form gives it away (the broker accepts only
  well-formed properties, so a stored record always has them).
* The scan stops at the first invalid record: the log is truncated there
  (the rest of that segment punched to zeros, later segments deleted) and
  queue entries pointing past it are dropped.
* A queue that lost entries below the scan start (a deleted file, a gap, or
  fewer entries than the checkpoint recorded) is rebuilt from the whole log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from broker.store.checkpoint import Checkpoint
from broker.store.consume_queue import CQ_DTYPE, CQ_ENTRY_SIZE, ConsumeQueue
from broker.store.files import file_name
from broker.store.index import IndexFile
from broker.store.kernels import (
    LOG_CHUNK_FULL,
    LOG_END_OF_DATA,
    LOG_ERRORS,
    LOG_SEGMENT_END,
    group_queues,
    scan_log,
)
from broker.store.mapped_file import MappedFile
from broker.store.results import RecoveryReport
from connector.errors import CorruptRecordError, InvalidTopicError, StoreError
from connector.protocol.names import validate_topic
from connector.protocol.record import OFF_STORETIMESTAMP, check_record

if TYPE_CHECKING:
    from broker.store.store import MessageStore

__all__ = ["dispatch_between", "recover"]

log = logging.getLogger(__name__)
_ZERO8 = bytes(8)
# a replica's dispatch takes its compiled path for a chunk of at most this many queues
APPEND_GROUPS = 256
# topic names kept valid (or None) by raw bytes between a replica's dispatches
NAMES_KEPT = 4096


def _load_queues(store: MessageStore) -> set[tuple[str, int]]:
    """Map every ConsumeQueue on disk; returns the queues that must be rebuilt."""
    root = store.config.consume_queue_dir
    broken: set[tuple[str, int]] = set()
    for topic_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            topic = validate_topic(topic_dir.name)
        except InvalidTopicError:
            log.warning("ignoring %s: not a valid topic name", topic_dir)
            continue
        for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
            if not qdir.name.isdigit():
                log.warning("ignoring %s: not a queue id", qdir)
                continue
            cq = store.consume_queue(topic, int(qdir.name), create=True)
            assert cq is not None
            try:
                cq.load()
            except StoreError as exc:
                log.warning(
                    "ConsumeQueue %s/%s is damaged (%s); rebuilding it", topic, qdir.name, exc
                )
                cq.close()
                cq.destroy()
                broken.add((topic, cq.queue_id))
    return broken


def _lost_queues(store: MessageStore, checkpoint: Checkpoint | None) -> set[tuple[str, int]]:
    """Queues that lost entries which were durable: files or the whole directory deleted.

    A queue with fewer entries than the checkpoint counted lost its end; while
    the CommitLog still starts at 0 (retention never removed a record), a
    queue that does not start at 0 lost its head.
    """
    lost: set[tuple[str, int]] = set()
    if checkpoint is not None:
        for topic, qs in checkpoint.queue_offsets.items():
            for qid_s, count in qs.items():
                if count <= 0 or not qid_s.isdigit():
                    continue
                try:
                    validate_topic(topic)
                except InvalidTopicError:
                    continue
                cq = store.consume_queue(topic, int(qid_s))
                if cq is None or cq.max_offset < count:
                    lost.add((topic, int(qid_s)))
    if store.commit_log.min_offset() == 0:
        for topic, queues in store.queues.items():
            lost.update((topic, qid) for qid, cq in queues.items() if cq.min_offset > 0)
    for topic, qid in sorted(lost):
        log.warning("ConsumeQueue %s/%d lost entries it had on disk; rebuilding it", topic, qid)
    return lost


def _newest_entry(store: MessageStore) -> tuple[int, int] | None:
    """(CommitLog offset, size) of the newest record any ConsumeQueue points at."""
    newest: tuple[int, int] | None = None
    for queues in store.queues.values():
        for cq in queues.values():
            last = cq.last_entry()
            if last is not None and (newest is None or last[0] > newest[0]):
                newest = (last[0], last[1])
    return newest


def _fallback_start(store: MessageStore) -> int:
    """No checkpoint: start at the segment holding the newest queue entry."""
    newest = _newest_entry(store)
    segments = store.commit_log.queue
    if newest is None:
        return segments.min_offset()
    mf = segments.find(newest[0]) or segments.last()
    assert mf is not None
    return mf.file_from_offset


def _replica_limit(store: MessageStore, checkpoint: Checkpoint | None) -> int:
    """Where a slave's readers stopped before this start: its last dispatch (which the
    checkpoint records, ~1 s late after a crash) or the newest record a ConsumeQueue
    points at, whichever is later. A slave dispatches only what its master confirmed."""
    newest = _newest_entry(store)
    return max(
        checkpoint.logic_offset if checkpoint is not None else 0,
        newest[0] + newest[1] if newest is not None else 0,
    )


def _check_tail(store: MessageStore, end: int) -> int:
    """After a clean stop: where the valid log really ends, at most ``end`` (the checkpoint's).

    The log should end with the newest record a queue points at, exactly at
    ``end``; if that record is intact nothing else is read. Otherwise the
    segment holding it (or the last byte of data) is checked up to ``end``
    and the first bad record's offset returned, so that the scan starting
    there cuts the log. Only checked, not re-dispatched: the queues were
    complete at the clean stop. Damage further back is not looked for.
    """
    segments = store.commit_log.queue
    newest = _newest_entry(store)
    mf = segments.find(newest[0] if newest is not None else end - 1)
    if mf is None:
        return end
    if newest is not None and newest[0] + newest[1] == end:
        try:
            check_record(
                mf.buffer(),
                newest[0] - mf.file_from_offset,
                expected_offset=newest[0],
                limit=mf.file_size,
                check_crc=store.config.check_crc_on_recover,
            )
            return end
        except CorruptRecordError as exc:
            log.warning("the last record, at %d, is damaged (%s)", newest[0], exc.message)
    walker = _LogWalker(store, check_crc=store.config.check_crc_on_recover)
    for _ in walker.walk(mf.file_from_offset, stop_at=end):
        pass
    return min(walker.end, end)


@dataclass(slots=True)
class _Chunk:
    """Records checked by one ``scan_log`` call (arrays trimmed to the records found)."""

    segment: MappedFile
    offsets: np.ndarray
    sizes: np.ndarray
    queue_ids: np.ndarray
    queue_offsets: np.ndarray
    store_ts: np.ndarray
    topic_pos: np.ndarray
    topic_lens: np.ndarray
    topic_crcs: np.ndarray
    tags_codes: np.ndarray
    key_hashes: np.ndarray
    key_recs: np.ndarray


class _LogWalker:
    """Walks valid records from an offset in compiled chunks; stops at the first bad one.

    After the walk, ``end`` is where valid data ends, ``garbage`` says whether
    something other than zeros was found there, ``reason`` what.
    """

    def __init__(self, store: MessageStore, *, check_crc: bool, chunk: int = 1 << 16) -> None:
        self.segments = store.commit_log.queue
        self.check_crc = check_crc
        self.chunk = chunk
        self.end = 0
        self.reason = ""
        self.garbage = False
        self.records = 0

    def walk(self, start: int, stop_at: int | None = None) -> Iterator[_Chunk]:
        files = self.segments.files
        mf = self.segments.find(start)
        idx = files.index(mf) if mf is not None else len(files)
        offset = start
        while idx < len(files):
            mf = files[idx]
            buf = np.frombuffer(mf.buffer(), dtype=np.uint8)
            try:
                rel = offset - mf.file_from_offset
                while True:
                    cols = np.empty((9, self.chunk), dtype=np.int64)
                    keys = np.empty((2, self.chunk * 4 + 16_400), dtype=np.int64)
                    status, n, nxt, nk = scan_log(
                        buf, rel, mf.file_from_offset, self.check_crc, *cols, *keys
                    )
                    if stop_at is not None:
                        cut = int(np.searchsorted(cols[0, :n], stop_at))
                        if cut < n or mf.file_from_offset + nxt >= stop_at:
                            n = cut
                            nk = int(np.searchsorted(keys[1, :nk], n))
                            status, nxt = LOG_END_OF_DATA, stop_at - mf.file_from_offset
                    if n:
                        self.records += n
                        c = cols[:, :n]
                        yield _Chunk(
                            mf, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8],
                            keys[0, :nk], keys[1, :nk],
                        )  # fmt: skip
                    rel = nxt
                    if status == LOG_CHUNK_FULL:
                        continue
                    if status == LOG_SEGMENT_END:
                        offset = mf.end_offset
                        break
                    self.end = mf.file_from_offset + rel
                    if status != LOG_END_OF_DATA:
                        self.garbage = True
                        self.reason = LOG_ERRORS[status]
                    elif not self.reason:
                        self.reason = "end of data"
                    return
            finally:
                del buf
            idx += 1
        self.end = offset
        self.reason = self.reason or "end of data"


def _topic_name(chunk: _Chunk, row: int, cache: dict[bytes, str | None]) -> str | None:
    """The topic of the chunk's record ``row`` (None if not a valid name)."""
    raw = chunk.segment.read(int(chunk.topic_pos[row]), int(chunk.topic_lens[row]))
    if raw not in cache:
        try:
            cache[raw] = validate_topic(raw.decode("utf-8"))
        except (UnicodeDecodeError, InvalidTopicError):
            cache[raw] = None
    return cache[raw]


def _topic_names(
    chunk: _Chunk, cache: dict[bytes, str | None]
) -> tuple[list[str | None], np.ndarray]:
    """Each distinct topic of a chunk (None if not a valid name), and each record's index."""
    _, first, inverse = np.unique(chunk.topic_crcs, return_index=True, return_inverse=True)
    names = [_topic_name(chunk, i, cache) for i in first.tolist()]
    return names, inverse.reshape(-1)


def _entries_between(cq: ConsumeQueue, lo: int, hi: int) -> np.ndarray:
    """The queue's entries for logical offsets ``lo .. hi-1`` (fewer if it has fewer)."""
    parts = []
    while lo < hi:
        got = cq.get_entries(lo, hi - lo)
        if not len(got):
            break
        parts.append(got)
        lo += len(got)
    return np.concatenate(parts) if parts else np.empty(0, dtype=CQ_DTYPE)


def _dispatch(
    store: MessageStore,
    chunk: _Chunk,
    *,
    index_from: int | None,
    gaps: set[tuple[str, int]],
    report: RecoveryReport,
    cache: dict[bytes, str | None],
    only: set[tuple[str, int]] | None = None,
    touched: dict[tuple[str, int], int] | None = None,
) -> None:
    """Give the chunk's records the ConsumeQueue (and index) entries they lack;
    ``touched`` gets each queue that gained entries, with its new max offset."""
    names, topic_idx = _topic_names(chunk, cache)
    group = (topic_idx.astype(np.int64) << 32) | (chunk.queue_ids & 0xFFFFFFFF)
    order = np.argsort(group, kind="stable")  # keeps log order inside each queue
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    for rows in np.split(order, bounds):
        topic = names[int(topic_idx[rows[0]])]
        qid = int(chunk.queue_ids[rows[0]])
        if topic is None or qid < 0:
            log.warning("records at %d name an invalid queue", int(chunk.offsets[rows[0]]))
            continue
        key = (topic, qid)
        if key in gaps or (only is not None and key not in only):
            continue
        cq = store.consume_queue(topic, qid, create=True)
        assert cq is not None
        qoffs = chunk.queue_offsets[rows]
        have = cq.max_offset if cq.files.files else int(qoffs[0])
        old = rows[(qoffs < have) & (qoffs >= cq.min_offset)]
        if len(old):  # present already: rewrite only entries that disagree
            first = int(chunk.queue_offsets[old[0]])
            current = _entries_between(cq, first, have)
            at = chunk.queue_offsets[old] - first
            ok = at < len(current)
            ok[ok] = (current["offset"][at[ok]] == chunk.offsets[old[ok]]) & (
                current["size"][at[ok]] == chunk.sizes[old[ok]]
            )
            for r in old[~ok].tolist():
                cq.put(int(chunk.queue_offsets[r]), int(chunk.offsets[r]), int(chunk.sizes[r]),
                       int(chunk.tags_codes[r]))  # fmt: skip
                report.consume_queue_entries_rebuilt += 1
        new = rows[qoffs >= have]
        if not len(new):
            continue
        if not np.array_equal(chunk.queue_offsets[new], np.arange(have, have + len(new))):
            gaps.add(key)  # the queue lost entries below the scan: rebuilt whole later
            continue
        entries = np.empty(len(new), dtype=CQ_DTYPE)
        entries["offset"] = chunk.offsets[new]
        entries["size"] = chunk.sizes[new]
        entries["tags_code"] = chunk.tags_codes[new]
        cq.put_entries(have, entries)
        report.consume_queue_entries_rebuilt += len(new)
        if touched is not None:
            touched[key] = cq.max_offset
    if index_from is not None and len(chunk.key_hashes) and store.config.message_index_enable:
        offsets = chunk.offsets[chunk.key_recs]
        sel = offsets >= index_from
        if sel.any():
            store.index.put_hashes(
                chunk.key_hashes[sel], offsets[sel], chunk.store_ts[chunk.key_recs][sel]
            )
            report.index_entries_rebuilt += int(sel.sum())
    store._last_store_ts = max(store._last_store_ts, int(chunk.store_ts.max()))


def _dispatch_appends(
    store: MessageStore,
    chunk: _Chunk,
    *,
    index_from: int,
    cache: dict[bytes, str | None],
    touched: dict[tuple[str, int], int],
) -> bool:
    """A replica's usual dispatch, one compiled grouping for the chunk: every queue it
    names gains entries right at its end, in order. False, with nothing written, when
    the chunk is not that (entries already there, a gap, a bad name, many queues):
    ``_dispatch`` does the rest."""
    n = len(chunk.offsets)
    groups = np.empty((min(n, APPEND_GROUPS), 4), dtype=np.int64)
    entries = np.empty(n * CQ_ENTRY_SIZE, dtype=np.uint8)
    found = group_queues(
        chunk.segment.buffer(), n, chunk.topic_pos, chunk.topic_lens, chunk.topic_crcs,
        chunk.queue_ids, chunk.queue_offsets, chunk.offsets, chunk.sizes, chunk.tags_codes,
        groups, entries,
    )  # fmt: skip
    if found < 0:
        return False
    plan: list[tuple[ConsumeQueue, int, int, tuple[str, int]]] = []
    for first, count, queue_offset, rising in groups[:found].tolist():
        topic = _topic_name(chunk, first, cache)
        qid = int(chunk.queue_ids[first])
        if topic is None or qid < 0 or not rising:
            return False
        cq = store.consume_queue(topic, qid, create=True)
        assert cq is not None
        if (cq.max_offset if cq.files.files else queue_offset) != queue_offset:
            return False
        plan.append((cq, queue_offset, count, (topic, qid)))
    at = 0
    for cq, queue_offset, count, key in plan:
        cq.put_entries(queue_offset, entries[at : at + count * CQ_ENTRY_SIZE])
        at += count * CQ_ENTRY_SIZE
        touched[key] = cq.max_offset
    if len(chunk.key_hashes) and store.config.message_index_enable:
        offsets = chunk.offsets[chunk.key_recs]
        sel = offsets >= index_from
        if sel.all():
            store.index.put_hashes(chunk.key_hashes, offsets, chunk.store_ts[chunk.key_recs])
        elif sel.any():
            store.index.put_hashes(
                chunk.key_hashes[sel], offsets[sel], chunk.store_ts[chunk.key_recs][sel]
            )
    store._last_store_ts = max(store._last_store_ts, int(chunk.store_ts.max()))
    return True


def dispatch_between(
    store: MessageStore,
    start: int,
    end: int,
    *,
    max_records: int | None = None,
    names: dict[bytes, str | None] | None = None,
) -> tuple[int, dict[tuple[str, int], int]]:
    """Give the whole records in ``[start, end)`` their ConsumeQueue and index entries,
    as an append does: a slave's dispatch of what it replicated (``end`` may fall
    inside a record, whose bytes may not all be there yet: it waits for a later call).
    ``max_records``: at most about that many (the next call goes on), so that a
    dispatch is done in slices. Returns where the dispatched records end (the next
    call's ``start``) and each queue that gained entries, with its new max offset.
    ``names``: topic names by raw bytes, kept by the caller from one call to the next."""
    # columns sized for the records the span can hold (the smallest is ~90 bytes), not
    # recovery's 65,536: a slave dispatches a few dozen records at a time
    rows = min(1 << 16, (end - start) // 64 + 16)
    if max_records is not None:
        rows = min(rows, max_records)
    walker = _LogWalker(store, check_crc=False, chunk=rows)
    touched: dict[tuple[str, int], int] = {}
    gaps: set[tuple[str, int]] = set()
    report = RecoveryReport(abnormal=False)
    cache: dict[bytes, str | None] = {} if names is None else names
    if len(cache) > NAMES_KEPT:
        cache.clear()
    reached = start
    for walked in walker.walk(start, stop_at=end):
        ends = walked.offsets + walked.sizes
        whole = int(np.searchsorted(ends, end, side="right"))
        chunk = _head(walked, whole) if whole < len(ends) else walked
        if whole:
            if not _dispatch_appends(store, chunk, index_from=start, cache=cache,
                                     touched=touched):  # fmt: skip
                _dispatch(store, chunk, index_from=start, gaps=gaps, report=report,
                          cache=cache, touched=touched)  # fmt: skip
            reached = int(ends[whole - 1])
        if whole < len(ends) or max_records is not None:
            break
    else:
        if not walker.garbage and walker.end <= end:
            reached = max(reached, walker.end)  # past BLANKs at segment ends
    if gaps:
        log.error("replicated records do not follow their queues %s", sorted(gaps))
    return reached, touched


def _head(chunk: _Chunk, n: int) -> _Chunk:
    """The chunk's first ``n`` records."""
    keys = int(np.searchsorted(chunk.key_recs, n))
    return _Chunk(
        chunk.segment, chunk.offsets[:n], chunk.sizes[:n], chunk.queue_ids[:n],
        chunk.queue_offsets[:n], chunk.store_ts[:n], chunk.topic_pos[:n], chunk.topic_lens[:n],
        chunk.topic_crcs[:n], chunk.tags_codes[:n], chunk.key_hashes[:keys],
        chunk.key_recs[:keys],
    )  # fmt: skip


def _rebuild_queues(
    store: MessageStore, queues: set[tuple[str, int]], end: int, report: RecoveryReport
) -> None:
    """Rebuild whole queues from every retained record below ``end``."""
    for topic, qid in sorted(queues):
        cq = store.consume_queue(topic, qid, create=True)
        assert cq is not None
        cq.destroy()
        report.queues_rebuilt.append(f"{topic}/{qid}")
    log.warning("rebuilding ConsumeQueues %s from the whole CommitLog", sorted(queues))
    walker = _LogWalker(store, check_crc=False)
    gaps: set[tuple[str, int]] = set()
    cache: dict[bytes, str | None] = {}
    for chunk in walker.walk(store.commit_log.min_offset(), stop_at=end):
        _dispatch(store, chunk, index_from=None, gaps=gaps, report=report, cache=cache,
                  only=queues)  # fmt: skip
    if gaps:
        log.error("queues %s have holes in the CommitLog itself", sorted(gaps))
    if walker.garbage and walker.end < end:
        log.error("rebuild stopped at %d: %s", walker.end, walker.reason)


def recover(store: MessageStore, *, replica: bool = False) -> RecoveryReport:
    """Bring the log, the ConsumeQueues and the index back to one consistent state.

    The log is scanned from where the checkpoint says everything was durable
    (or checked only at its tail after a clean stop) and cut at the first
    damaged record; queues and index get the entries of the records scanned.
    ``replica``: a slave's store, whose readers saw only what its master had
    confirmed: the scan still checks the whole log (the master goes on from its
    end), but only what was readable before (``_replica_limit``) is dispatched;
    the rest waits for the master to confirm it again.

    The phases, in order (as RocketMQ's ``DefaultMessageStore.recover``: load,
    recover the CommitLog, then the queues): ``load`` maps the files;
    ``scan_start`` picks where the scan begins; ``scan`` checks the records
    from there and dispatches them; ``cut_log`` truncates at the first bad
    one; ``fix_queues`` drops queue entries past the end and rebuilds queues
    that lost entries; ``finish`` makes the result durable.
    """
    run = _Recovery(store, replica=replica)
    run.load()
    run.scan_start()
    run.scan()
    run.cut_log()
    run.fix_queues()
    return run.finish()


class _Recovery:
    """One run of ``recover``: the state its phases hand on."""

    def __init__(self, store: MessageStore, *, replica: bool) -> None:
        self.store = store
        self.cfg = store.config
        self.replica = replica
        self.started = time.monotonic()
        self.report = RecoveryReport(abnormal=self.cfg.abort_path.exists())
        self.segments = store.commit_log.queue
        self.checkpoint: Checkpoint | None = None
        self.rebuild: set[tuple[str, int]] = set()  # queues rebuilt whole from the log
        self.gaps: set[tuple[str, int]] = set()  # queues that lost entries below the scan
        self.had_index = False
        self.log_end = 0  # the end of the last segment file
        self.start = 0  # where the scan begins
        self.index_from = 0  # records from here on get index entries
        self.limit: int | None = None  # a replica dispatches only below this
        self.end = 0  # where valid records end
        self.garbage = ""  # what follows them, if not zeros
        self.dispatched = 0

    def load(self) -> None:
        """Map the segments (as if full: the scan finds their end), queues and index."""
        report, segments = self.report, self.segments
        self.checkpoint = Checkpoint.load(self.cfg.checkpoint_path)
        report.checkpoint_found = self.checkpoint is not None
        segments.load()
        for mf in segments.files:
            mf.wrote_position = mf.flushed_position = mf.file_size
        self.rebuild = _load_queues(self.store)
        self.store.index.load()
        self.had_index = bool(self.store.index.files)
        last = segments.last()
        self.log_end = last.end_offset if last is not None else 0

    def scan_start(self) -> None:
        """Where the scan starts: the checkpoint's durable point (after a clean stop,
        only the tail checked), else the fallback; the whole log if index files were
        lost. Which queues lost entries below it (rebuilt whole, not patched)."""
        store, cfg, checkpoint = self.store, self.cfg, self.checkpoint
        min_offset = self.segments.min_offset()
        if checkpoint is not None:
            start = checkpoint.recover_from
            if not self.report.abnormal:
                start = _check_tail(store, min(start, self.log_end))
        else:
            start = _fallback_start(store)
            if self.segments.files:
                log.warning(
                    "no usable checkpoint in %s: scanning from offset %d", cfg.store_dir, start
                )
        if (
            cfg.message_index_enable
            and not self.had_index
            and checkpoint is not None
            and checkpoint.index_offset > min_offset
        ):
            log.warning("index files are missing: re-indexing the whole CommitLog")
            start = min_offset
        start = min(max(start, min_offset), self.log_end)
        self.start = start
        self.index_from = (
            start
            if checkpoint is None or not self.had_index
            else max(start, checkpoint.index_offset)
        )
        self.report.scanned_from = start
        # a slave dispatches only what its readers could see before: the rest, unconfirmed,
        # could yet be truncated away when it meets its master
        if self.replica:
            self.limit = max(start, _replica_limit(store, checkpoint))
        self.gaps = _lost_queues(store, checkpoint)
        self.rebuild |= self.gaps

    def scan(self) -> None:
        """Check every record from the start; dispatch those the queues and index lack."""
        walker = _LogWalker(self.store, check_crc=self.cfg.check_crc_on_recover)
        cache: dict[bytes, str | None] = {}
        limit = self.limit
        for walked in walker.walk(self.start):
            chunk = walked
            if limit is not None:
                whole = int(np.searchsorted(walked.offsets + walked.sizes, limit, side="right"))
                if not whole:
                    continue  # scanned, not dispatched
                chunk = _head(walked, whole)
            _dispatch(self.store, chunk, index_from=self.index_from, gaps=self.gaps,
                      report=self.report, cache=cache)  # fmt: skip
        self.end = walker.end
        self.report.records_scanned = walker.records
        self.report.scanned_bytes = self.end - self.start
        self.garbage = walker.reason if walker.garbage else ""

    def cut_log(self) -> None:
        """Truncate at the end of valid records if anything but zeros follows it, a
        segment lies past it, or it falls short of what the checkpoint calls durable."""
        report, segments = self.report, self.segments
        end, log_end, checkpoint = self.end, self.log_end, self.checkpoint
        later = [
            f
            for f in segments.files
            if f.file_from_offset > end or (f.file_from_offset == end and end < log_end)
        ]
        # the checkpoint says the log was durable up to here: zeros before it are lost data
        durable_end = min(checkpoint.recover_from, log_end) if checkpoint is not None else 0
        if self.garbage or later or end < durable_end:
            report.truncated_at = end
            if self.garbage:
                report.reason = self.garbage
            elif end < durable_end:
                report.reason = (
                    f"zeros where the checkpoint says data is durable (up to {durable_end})"
                )
            else:
                report.reason = "segments past the end of valid data"
            report.dropped_bytes = log_end - end
            log.warning(
                "CommitLog truncated at %d (%s); %d segment(s) after it deleted",
                end,
                report.reason,
                len(later),
            )
            segments.truncate(end)
        for f in segments.files:
            f.wrote_position = f.flushed_position = min(
                f.file_size, max(0, end - f.file_from_offset)
            )

    def fix_queues(self) -> None:
        """Drop queue entries past what is dispatched, rebuild the queues that lost
        entries, and move each queue's minimum up to the log's first record."""
        store, report = self.store, self.report
        self.dispatched = self.end if self.limit is None else min(self.end, self.limit)
        for queues in store.queues.values():
            for cq in queues.values():
                report.consume_queue_entries_dropped += cq.truncate_dirty(self.dispatched)
        self.rebuild |= self.gaps  # the scan may have found more
        if self.rebuild:
            _rebuild_queues(store, self.rebuild, self.dispatched, report)
        min_offset = self.segments.min_offset()
        for queues in store.queues.values():
            for cq in queues.values():
                cq.correct_min_offset(min_offset)
        if report.consume_queue_entries_dropped:
            log.warning(
                "dropped %d ConsumeQueue entries past the end of the log",
                report.consume_queue_entries_dropped,
            )

    def finish(self) -> RecoveryReport:
        """The index's first file, the dispatch point, the newest store time; then the
        log's re-dispatched tail, queues and a checkpoint made durable."""
        store, cfg, report, end, dispatched = (
            self.store, self.cfg, self.report, self.end, self.dispatched,
        )  # fmt: skip
        if cfg.message_index_enable and not store.index.files:
            # an (empty) index file tells the next start that no index file was lost, so a
            # log without keyed messages is not re-indexed from its start on every restart
            store.index.files.append(
                IndexFile(cfg.index_dir / file_name(end), store.index.slot_num,
                          store.index.index_num)
            )  # fmt: skip
        store.dispatched_offset = dispatched
        if dispatched < end:
            log.info(
                "recovery: %d bytes past %d wait for the master to confirm them", end - dispatched,
                dispatched,
            )  # fmt: skip
        newest = _newest_entry(store)
        if newest is not None:  # keep store time monotonic across restarts (timestamp search)
            raw = store.commit_log.read(newest[0] + OFF_STORETIMESTAMP, 8)
            if raw is not None:
                store._last_store_ts = max(store._last_store_ts, int.from_bytes(raw, "big"))
        # make the re-dispatched tail durable before a new checkpoint claims it
        self.segments.flush(0)
        store.flush_queues_and_checkpoint()
        report.seconds = time.monotonic() - self.started
        log.info(
            "recovery (%s) of %s: scanned %d records (%d bytes) from %d in %.3fs; end %d",
            "abnormal" if report.abnormal else "normal",
            cfg.store_dir,
            report.records_scanned,
            report.scanned_bytes,
            self.start,
            report.seconds,
            end,
        )
        return report
