"""MessageStore: the CommitLog, its ConsumeQueues and index, flushing and recovery.

One put lock orders every append: the record goes to the CommitLog, its
ConsumeQueue entry and index entries are written at once (the dispatch that
RocketMQ's ReputMessageService does), and readers see a message as soon as
its ConsumeQueue entry exists. Expected outcomes are statuses
(PutMessageStatus, GetMessageStatus); exceptions mean corruption.
"""

from __future__ import annotations

import errno
import itertools
import logging
import math
import operator
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import numpy as np

from broker.store.checkpoint import Checkpoint
from broker.store.commitlog import CommitLog, RecordRefused, SingleGroup
from broker.store.config import FlushDiskType, StoreConfig
from broker.store.consume_queue import CQ_ENTRY, CQ_ENTRY_SIZE, ConsumeQueue
from broker.store.flush import FlushRealTimeService, GroupCommitService, PeriodicService
from broker.store.index import IndexService
from broker.store.inner import BatchInner, MessageInner
from broker.store.kernels import Q_BASE, RECORD_FIXED, ScannedBatch, check_records, scan_batch
from broker.store.read_result import GetMessageResult, RecordRun
from broker.store.recovery import recover
from broker.store.results import (
    AppendResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    RecoveryReport,
)
from broker.store.retention import clean_expired_files, disk_used_percent
from connector.errors import CorruptRecordError, InvalidTopicError, StoreError
from connector.protocol.hashing import crc32
from connector.protocol.message import MessageExt
from connector.protocol.msgid import encode_host
from connector.protocol.names import validate_topic
from connector.protocol.properties import properties_well_formed
from connector.protocol.record import (
    BLANK_MAGIC_CODE,
    END_FILE_MIN_BLANK_LENGTH,
    HEADER,
    HEADER_SIZE,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    OFF_STORETIMESTAMP,
    decode_record,
)

__all__ = ["MessageStore"]


log = logging.getLogger(__name__)
MAX_FILTER_SCAN = 16_000
# reads of at most this many messages with no tags filter take the lean path (_read_small)
SMALL_READ = 64
ArrivalListener = Callable[[str, int, int], None]


def _not_running() -> PutMessageResult:
    return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, message="store is not running")


class MessageStore:
    def __init__(
        self,
        config: StoreConfig,
        *,
        clock: Callable[[], float] = time.time,
        disk_usage: Callable[[Path], tuple[int, int, int]] = shutil.disk_usage,
    ) -> None:
        self.config = config
        self.clock = clock
        self.disk_usage = disk_usage
        self.store_host = encode_host(config.store_host, config.store_port)
        self.commit_log = CommitLog(config, self.store_host)
        self.index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
        self.queues: dict[str, dict[int, ConsumeQueue]] = {}
        self.dispatched_offset = 0
        self.running = False
        self.recovery: RecoveryReport | None = None
        self.arrival_listeners: list[ArrivalListener] = []
        # told, under the put lock, as soon as records are in the CommitLog and before
        # their queue and index entries are written: a SYNC_MASTER's slaves get the bytes
        # while the master dispatches them (the slaves' copy is on the send's path)
        self.log_listeners: list[Callable[[], None]] = []
        # a SYNC_MASTER's readers see only the records that end at or below this CommitLog
        # offset (its confirm offset: its in-sync slaves have them, so a reader that moves
        # to a slave finds everything it saw); None: every record is readable
        self.read_limit: int | None = None
        self.last_flush_seconds = 0.0
        self._put_lock = threading.Lock()
        self._queues_lock = threading.Lock()
        self._checkpoint_lock = threading.Lock()  # checkpoints are written in the order taken
        # where the index was last flushed to (the checkpoint's index offset), and when
        self._index_offset = 0
        self._index_flushed_at = -math.inf
        self._valid_topics: set[str] = set()
        self._last_store_ts = 0
        self._group_commit: GroupCommitService | None = None
        self._here_commits = 0  # flush_here calls (SYNC_FLUSH commits off the thread)
        self._here_requests = 0  # appends they covered
        self.groups_appended = 0  # put_group_nowait calls that appended something
        self.messages_grouped = 0  # messages they appended
        self._services: list[PeriodicService] = []
        self.disk_full = False  # past disk_space_warning_level_ratio: writes are refused
        self.disk_used = 0.0  # percent, as last measured

    # -- lifecycle ---------------------------------------------------------------

    def start(self, *, replica: bool = False) -> RecoveryReport:
        """Recover from whatever is on disk, then accept writes.

        ``replica``: a slave's store, written by replication only: its CommitLog is
        flushed periodically (as with ASYNC_FLUSH) whatever ``flush_disk_type`` says,
        since no append of its own asks for a flush, and recovery makes readable only
        what was readable before (what the master had confirmed)."""
        for d in (
            self.config.commit_log_dir,
            self.config.consume_queue_dir,
            self.config.index_dir,
            self.config.config_dir,
        ):
            d.mkdir(parents=True, exist_ok=True)
        report = recover(self, replica=replica)
        self.commit_log.queue.advise_tail()
        self.recovery = report
        self.config.abort_path.write_bytes(b"")
        cfg = self.config
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH and not replica:
            self._group_commit = GroupCommitService(self.commit_log.flush, on_flush=self._flushed)
            self._group_commit.start()
        else:
            self._services.append(
                FlushRealTimeService(
                    self.commit_log.flush,
                    interval_ms=cfg.flush_interval_commit_log_ms,
                    least_pages=cfg.flush_commit_log_least_pages,
                    thorough_interval_ms=cfg.flush_commit_log_thorough_interval_ms,
                    on_flush=self._flushed,
                )
            )
        self._services.append(
            PeriodicService(
                "FlushConsumeQueueService",
                cfg.flush_interval_consume_queue_ms,
                self._checkpoint_periodically,
            )
        )
        self._services.append(
            PeriodicService(
                "CleanResourceService",
                cfg.clean_resource_interval_ms,
                self._clean_periodically,
            )
        )
        for service in self._services:
            service.start()
        self.note_disk_used(disk_used_percent(self))
        self.running = True
        return report

    def shutdown(self) -> None:
        """Stop services, flush everything, write a clean checkpoint, remove the abort file."""
        if not self.running:
            return
        self.running = False
        with self._put_lock:
            pass  # wait for an append in progress
        self._stop_services()
        self.commit_log.flush(0)
        self.flush_queues_and_checkpoint(clean=True)
        self.config.abort_path.unlink(missing_ok=True)
        self.close()

    def _stop_services(self) -> None:
        for service in self._services:
            service.stop()
        self._services = []
        if self._group_commit is not None:
            self._group_commit.stop()
            self._group_commit = None

    def close(self) -> None:
        """Stop background work and unmap every file without flushing (a crash, for tests)."""
        self.running = False
        self._stop_services()
        for queues in self.queues.values():
            for cq in queues.values():
                cq.close()
        self.index.close()
        self.commit_log.close()

    def _checkpoint_periodically(self) -> None:
        self.flush_queues_and_checkpoint()

    def _clean_periodically(self) -> None:
        self.clean_expired_files()

    def _flushed(self, seconds: float) -> None:
        self.last_flush_seconds = seconds

    def flush_queues_and_checkpoint(self, *, clean: bool = False) -> Checkpoint:
        """Flush the queues (and the index when ``flush_interval_index_ms`` has passed or
        ``flush_index_max_lag_bytes`` were written since its last flush, or ``clean``),
        then record how far everything is durable."""
        with self._checkpoint_lock:
            with self._put_lock:
                dispatched = self.dispatched_offset
                snapshot = self.queue_offsets()
            with self._queues_lock:  # delete_topic must not close a queue being flushed
                for queues in list(self.queues.values()):
                    for cq in list(queues.values()):
                        cq.flush()
            started = time.monotonic()
            interval_s = self.config.flush_interval_index_ms / 1000
            if not self.config.message_index_enable:
                self._index_offset = dispatched  # nothing is indexed: nothing to redo
            elif (
                clean
                or started - self._index_flushed_at >= interval_s
                or dispatched - self._index_offset >= self.config.flush_index_max_lag_bytes
            ):
                self.index.flush()
                self._index_offset = dispatched
                self._index_flushed_at = started
            now = int(self.clock() * 1000)
            cp = Checkpoint(
                physic_offset=min(self.commit_log.flushed_offset(), dispatched),
                logic_offset=dispatched,
                index_offset=self._index_offset,
                physic_timestamp=now,
                logic_timestamp=now,
                clean_shutdown=clean,
                queue_offsets=snapshot,
            )
            cp.save(self.config.checkpoint_path)
            return cp

    # -- queues --------------------------------------------------------------------

    def consume_queue(
        self, topic: str, queue_id: int, *, create: bool = False
    ) -> ConsumeQueue | None:
        queues = self.queues.get(topic)
        cq = queues.get(queue_id) if queues else None
        if cq is None and create:
            validate_topic(topic)
            if queue_id < 0:
                raise StoreError(f"negative queue id {queue_id}")
            cq = ConsumeQueue(
                self.config.consume_queue_dir,
                topic,
                queue_id,
                self.config.consume_queue_entries_per_file,
            )
            self.queues.setdefault(topic, {})[queue_id] = cq
        return cq

    def queue_offsets(self) -> dict[str, dict[str, int]]:
        return {
            topic: {str(qid): cq.max_offset for qid, cq in queues.items()}
            for topic, queues in self.queues.items()
        }

    def topics(self) -> list[str]:
        return sorted(self.queues)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queue(topic, queue_id)
        return cq.min_offset if cq else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """The queue's end as readers see it (``read_limit``)."""
        cq = self.consume_queue(topic, queue_id)
        return self.visible_max_offset(cq) if cq else 0

    def visible_max_offset(self, cq: ConsumeQueue) -> int:
        """``cq.max_offset``, less the entries of records past ``read_limit``."""
        hi = cq.max_offset
        limit = self.read_limit
        if limit is None or hi <= cq.min_offset:
            return hi
        last = cq.last_entry()
        if last is None or last[0] + last[1] <= limit:
            return hi  # the common case: the newest record is readable already
        lo, top = cq.min_offset, hi - 1  # the first unreadable entry is in [lo, top]
        while lo < top:
            mid = (lo + top) // 2
            entry = cq.get_entries(mid, 1)
            if len(entry) and int(entry["offset"][0]) + int(entry["size"][0]) <= limit:
                lo = mid + 1
            else:
                top = mid
        return lo

    def delete_topic(self, topic: str) -> None:
        """Forget a topic's queues (its records stay in the log until retention)."""
        with self._queues_lock:
            with self._put_lock:
                queues = self.queues.pop(topic, {})
            for cq in queues.values():
                cq.destroy()
        path = self.config.consume_queue_dir / validate_topic(topic)
        if path.exists():
            shutil.rmtree(path)

    # -- writes ----------------------------------------------------------------------

    def _store_timestamp(self) -> int:
        now = int(self.clock() * 1000)
        now = max(now, self._last_store_ts)  # keep store time monotonic for the timestamp search
        self._last_store_ts = now
        return now

    def note_disk_used(self, percent: float) -> None:
        """Mark the disk full past ``disk_space_warning_level_ratio`` (writes are then
        refused) and writable again once use is back at ``disk_space_clean_forcibly_ratio``."""
        cfg = self.config
        self.disk_used = percent
        if percent > cfg.disk_space_warning_level_ratio:
            if not self.disk_full:
                log.error(
                    "disk %.1f%% used, past disk_space_warning_level_ratio %d%%: "
                    "refusing writes until it is back at %d%%",
                    percent, cfg.disk_space_warning_level_ratio,
                    cfg.disk_space_clean_forcibly_ratio,
                )  # fmt: skip
            self.disk_full = True
        elif percent <= cfg.disk_space_clean_forcibly_ratio and self.disk_full:
            log.warning("disk %.1f%% used: accepting writes again", percent)
            self.disk_full = False

    def _disk_full(self) -> PutMessageResult:
        cfg = self.config
        return PutMessageResult(
            PutMessageStatus.SERVICE_NOT_AVAILABLE,
            message=(
                f"disk full: {self.disk_used:.1f}% used, past disk_space_warning_level_ratio "
                f"{cfg.disk_space_warning_level_ratio}%; writes are refused until it is back "
                f"at {cfg.disk_space_clean_forcibly_ratio}%"
            ),
        )

    def _check(self, topic: str, queue_id: int, bodies: Iterable[bytes]) -> PutMessageResult | None:
        if not self.running:
            return _not_running()
        if self.disk_full:
            return self._disk_full()
        if topic not in self._valid_topics:
            try:
                validate_topic(topic)
            except InvalidTopicError as exc:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=str(exc))
            self._valid_topics.add(topic)
        if queue_id < 0:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message="negative queue id")
        limit = self.config.max_message_size
        for body in bodies:
            if not body:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message="empty body")
            if len(body) > limit:
                return PutMessageResult(
                    PutMessageStatus.MESSAGE_ILLEGAL,
                    message=f"body of {len(body)} bytes exceeds max_message_size {limit}",
                )
        return None

    def put_message_nowait(
        self, msg: MessageInner, *, request_flush: bool = True
    ) -> tuple[PutMessageResult, Future[bool] | None]:
        """Append; with SYNC_FLUSH also return the future of its flush.

        ``request_flush=False``: no flush is requested (the future is None); the
        caller makes the append durable (``request_flush``, ``flush_here``).
        """
        bad = self._check(msg.topic, msg.queue_id, (msg.body,))
        if bad is not None:
            return bad, None
        with self._put_lock:
            if not self.running:  # shutdown began after the check above
                return _not_running(), None
            cq = self.consume_queue(msg.topic, msg.queue_id)
            queue_offset = cq.max_offset if cq is not None else 0
            ts = self._store_timestamp()
            try:
                res = self.commit_log.append(msg, queue_offset=queue_offset, store_timestamp=ts)
            except RecordRefused as exc:
                return PutMessageResult(exc.status, message=str(exc)), None
            for tell in self.log_listeners:
                tell()
            if cq is None:  # created only once something is stored in it
                cq = self.consume_queue(msg.topic, msg.queue_id, create=True)
                assert cq is not None
            cq.put(queue_offset, res.wrote_offset, res.wrote_bytes, msg.tags_code)
            if msg.keys and self.config.message_index_enable:
                self.index.put_keys_at(msg.topic, msg.keys, res.wrote_offset, ts)
            self.dispatched_offset = res.end_offset
        return self._after_append(msg.topic, msg.queue_id, res, request_flush)

    def scan(self, batch: BatchInner) -> tuple[ScannedBatch | None, str]:
        """Validate a batch and gather its columns (``(None, reason)`` if it is bad)."""
        return scan_batch(
            batch.data, topic=batch.topic, max_message_size=self.config.max_message_size
        )

    def put_messages_nowait(
        self, batch: BatchInner, scanned: ScannedBatch | None = None, *, request_flush: bool = True
    ) -> tuple[PutMessageResult, Future[bool] | None]:
        """Append a whole batch under one lock hold; nothing is written if any entry is bad.

        ``scanned`` is ``scan(batch)`` when the caller already ran it;
        ``request_flush`` as for ``put_message_nowait``.
        """
        bad = self._check(batch.topic, batch.queue_id, ())
        if bad is not None:
            return bad, None
        if scanned is None:
            # validation, CRCs and property scans run before the lock (without the GIL from
            # 64 KiB of batch)
            scanned, reason = self.scan(batch)
            if scanned is None:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL, message=reason), None
        with self._put_lock:
            if not self.running:  # shutdown began after the check above
                return _not_running(), None
            cq = self.consume_queue(batch.topic, batch.queue_id)
            queue_offset = cq.max_offset if cq is not None else 0
            ts = self._store_timestamp()
            try:
                appended = self.commit_log.append_batch(
                    batch, scanned, queue_offset=queue_offset, store_timestamp=ts
                )
            except RecordRefused as exc:
                return PutMessageResult(exc.status, message=str(exc)), None
            except OSError as exc:  # the disk filled up between two checks of its use
                log.error("batch append to %s failed: %s", batch.topic, exc)
                if exc.errno == errno.ENOSPC:
                    self.note_disk_used(100.0)
                return PutMessageResult(
                    PutMessageStatus.SERVICE_NOT_AVAILABLE, message=f"write failed: {exc}"
                ), None
            for tell in self.log_listeners:
                tell()
            if cq is None:  # created only once something is stored in it
                cq = self.consume_queue(batch.topic, batch.queue_id, create=True)
                assert cq is not None
            cq.put_entries(queue_offset, appended.cq_entries)
            if len(scanned.key_hashes) and self.config.message_index_enable:
                self.index.put_hashes(scanned.key_hashes, appended.offsets[scanned.key_msgs], ts)
            res = appended.result
            self.dispatched_offset = res.end_offset
        return self._after_append(batch.topic, batch.queue_id, res, request_flush)

    def put_group_nowait(
        self, msgs: Sequence[MessageInner], *, request_flush: bool = True
    ) -> tuple[list[PutMessageResult], Future[bool] | None]:
        """Append single messages from many writers at once, with one flush request.

        Each message gets the result ``put_message_nowait`` would give it (a
        bad one is refused alone) and its own record; the group shares one
        lock hold, one store time, one compiled layout pass, one ConsumeQueue
        write per queue, one index insert and, with SYNC_FLUSH, one group
        commit request (the returned future covers every appended message;
        ``request_flush`` as for ``put_message_nowait``).
        """
        if len(msgs) == 1:  # the struct path is cheaper for one
            res, future = self.put_message_nowait(msgs[0], request_flush=request_flush)
            if res.ok:
                self.groups_appended += 1
                self.messages_grouped += 1
            return [res], future
        results: list[PutMessageResult] = [_not_running()] * len(msgs)
        group = SingleGroup.of(msgs)
        good = self._check_group(group, results)
        if good is not None:
            if not good:
                return results, None
            group = SingleGroup.of([msgs[i] for i in good])
        keys = list(zip(group.topics, group.queue_ids, strict=True))
        queues = list(dict.fromkeys(keys))  # distinct (topic, queue id), first-seen order
        if len(queues) == 1:
            slot_of: list[int] = [0] * len(keys)
        else:
            slot = {key: s for s, key in enumerate(queues)}
            slot_of = [slot[key] for key in keys]
        slots = np.zeros((len(queues), 3), dtype=np.int64)
        with self._put_lock:
            if not self.running:  # shutdown began after the checks above
                return results, None
            for s, (topic, queue_id) in enumerate(queues):
                cq = self.consume_queue(topic, queue_id)
                if cq is not None:
                    slots[s, Q_BASE] = cq.max_offset
            ts = self._store_timestamp()
            appended = self.commit_log.append_singles(group, slot_of, slots, store_timestamp=ts)
            for tell in self.log_listeners:
                tell()
            self.groups_appended += 1
            self.messages_grouped += len(group)
            entries = appended.cq_entries.reshape(-1, CQ_ENTRY_SIZE)  # each queue's rows together
            rows = slots.tolist()
            for (topic, queue_id), (base, count, first) in zip(queues, rows, strict=True):
                cq = self.consume_queue(topic, queue_id, create=True)
                assert cq is not None
                cq.put_entries(base, entries[first : first + count])
            if len(appended.key_hashes) and self.config.message_index_enable:
                self.index.put_hashes(appended.key_hashes, appended.key_offsets, ts)
            self.dispatched_offset = appended.end_offset
        if self.arrival_listeners:
            for (topic, queue_id), (base, count, _) in zip(queues, rows, strict=True):
                for listener in self.arrival_listeners:
                    listener(topic, queue_id, base + count)
        future = self.request_flush(appended.end_offset) if request_flush else None
        ok = PutMessageStatus.PUT_OK
        placed = appended.out.tolist()
        if good is None:
            results = [PutMessageResult(ok, AppendResult(o, z, q, 1, ts)) for o, z, q in placed]
            return results, future
        for i, (o, z, q) in zip(good, placed, strict=True):
            results[i] = PutMessageResult(ok, AppendResult(o, z, q, 1, ts))
        return results, future

    def _check_group(self, group: SingleGroup, results: list[PutMessageResult]) -> list[int] | None:
        """None when every message may be appended; else the indexes of those that may
        (``results`` gets the refusals)."""
        log_ = self.commit_log
        body_lens, props_lens = group.body_lens, group.props_lens
        if (
            self.running
            and all(self._check(t, 0, ()) is None and log_.topic_fits(t) for t in set(group.topics))
            and min(group.queue_ids) >= 0
            and min(body_lens) > 0
            and max(body_lens) <= self.config.max_message_size
            and max(props_lens) <= MAX_PROPERTIES_BYTES
            and all(map(properties_well_formed, group.props))
            and RECORD_FIXED + MAX_TOPIC_BYTES + max(map(operator.add, body_lens, props_lens))
            + END_FILE_MIN_BLANK_LENGTH <= log_.segment_size
        ):  # fmt: skip
            return None
        good: list[int] = []
        for i, m in enumerate(group.msgs):  # find which ones, and why
            bad = self._check(m.topic, m.queue_id, (m.body,))
            if bad is None:
                problem = log_.check_single(m)
                if problem is None:
                    good.append(i)
                    continue
                bad = PutMessageResult(problem.status, message=str(problem))
            results[i] = bad
        return good

    def group_commit_stats(self) -> tuple[int, int] | None:
        """SYNC_FLUSH: (fsyncs done, append requests they covered), by the group
        commit thread and by ``flush_here`` together; else None."""
        gc = self._group_commit
        if gc is None:
            return None
        return gc.groups + self._here_commits, gc.requests_served + self._here_requests

    def request_flush(self, end_offset: int, requests: int = 1) -> Future[bool] | None:
        """SYNC_FLUSH: a future set to True once the group commit thread has made the
        log durable up to ``end_offset`` (False if it could not); None otherwise.
        ``requests``: how many appends this covers (for the metrics)."""
        gc = self._group_commit
        return gc.submit(end_offset, requests) if gc is not None else None

    def flush_here(self, end_offset: int, requests: int = 1) -> bool:
        """SYNC_FLUSH's group commit on the calling thread, without the thread hand-off:
        fdatasync the log now; True if it is durable up to ``end_offset``.

        For the broker's event loop (``broker.store.aio.GroupAppender``), which
        blocks meanwhile. Raises ``OSError`` if the flush fails.
        """
        if not self.running:
            return False
        started = time.monotonic()
        flushed = self.commit_log.flush(0)
        self._flushed(time.monotonic() - started)
        self._here_commits += 1
        self._here_requests += requests
        return flushed >= end_offset

    def _after_append(
        self, topic: str, queue_id: int, res: AppendResult, request_flush: bool
    ) -> tuple[PutMessageResult, Future[bool] | None]:
        for listener in self.arrival_listeners:
            listener(topic, queue_id, res.queue_offset + res.msg_num)
        future = self.request_flush(res.end_offset) if request_flush else None
        return PutMessageResult(PutMessageStatus.PUT_OK, append=res), future

    def wait_flush(self, result: PutMessageResult, future: Future[bool] | None) -> PutMessageResult:
        """Block until a SYNC_FLUSH append is durable, or answer FLUSH_DISK_TIMEOUT."""
        if future is None:
            return result
        try:
            ok = future.result(timeout=self.config.sync_flush_timeout_ms / 1000)
        except FutureTimeout:
            ok = False
        return result if ok else result.flush_timed_out()

    def put_message(self, msg: MessageInner) -> PutMessageResult:
        return self.wait_flush(*self.put_message_nowait(msg))

    def put_messages(self, batch: BatchInner) -> PutMessageResult:
        return self.wait_flush(*self.put_messages_nowait(batch))

    # -- reads -----------------------------------------------------------------------

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int = 32,
        *,
        tags_codes: Iterable[int] | None = None,
        max_bytes: int = 64 << 20,
    ) -> GetMessageResult:
        """Read up to ``max_nums`` messages of a queue from logical ``offset``: the
        queue's bounds checked (``_out_of_range``), its entries picked
        (``_pick_entries``: tags filter, ``max_bytes``), their records read."""
        cq = self.consume_queue(topic, queue_id)
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        lo, hi = cq.min_offset, self.visible_max_offset(cq)
        refused = _out_of_range(offset, lo, hi)
        if refused is not None:
            return refused
        if tags_codes is None and 0 < max_nums <= SMALL_READ:
            small = self._read_small(cq, offset, min(max_nums, hi - offset), lo, hi, max_bytes)
            if small is not None:
                return small
        wanted = None if tags_codes is None else np.fromiter(tags_codes, dtype=np.int64)
        picked = self._pick_entries(cq, offset, hi, max(1, max_nums), wanted, max_bytes)
        if not picked.count:
            if picked.removed:
                status = GetMessageStatus.MESSAGE_WAS_REMOVING
            elif wanted is not None:
                status = GetMessageStatus.NO_MATCHED_MESSAGE
            else:
                status = GetMessageStatus.OFFSET_FOUND_NULL
            return GetMessageResult(status, picked.next_offset, lo, hi)
        qoffs, chosen = picked.joined()
        runs = self._read_runs(chosen["offset"].astype(np.int64), chosen["size"].astype(np.int64))
        if runs is None:
            return GetMessageResult(
                GetMessageStatus.MESSAGE_WAS_REMOVING, picked.next_offset, lo, hi
            )
        return GetMessageResult(
            GetMessageStatus.FOUND, picked.next_offset, lo, hi, runs, qoffs.tolist()
        )

    def _read_small(
        self, cq: ConsumeQueue, offset: int, count: int, lo: int, hi: int, max_bytes: int
    ) -> GetMessageResult | None:
        """``get_message`` of a few entries with no tags filter, without numpy's fixed
        costs (a long poll woken by one send reads this way): its answer when the
        entries' records lie back to back in one segment within ``max_bytes``, else
        None (the general path answers)."""
        raw = cq.get_raw(offset, count)
        if len(raw) != count * CQ_ENTRY_SIZE:  # none, or the rest is in the next file
            return None
        entries = list(CQ_ENTRY.iter_unpack(raw))
        start = entries[0][0]
        if start < self.commit_log.min_offset():
            return None
        starts: list[int] = []
        sizes: list[int] = []
        end = start
        for phys, size, _ in entries:
            if phys != end:
                return None
            starts.append(end - start)
            sizes.append(size)
            end += size
        seg = self.commit_log.segment_size
        if end - start > max_bytes or start // seg != (end - 1) // seg:
            return None
        data = self.commit_log.read(start, end - start)
        if data is None:
            return None
        n = len(entries)
        run_starts = np.array(starts, dtype=np.int64)
        run_sizes = np.array(sizes, dtype=np.int64)
        body_starts = np.empty(n, dtype=np.int64)
        body_ends = np.empty(n, dtype=np.int64)
        bad = check_records(data, run_starts, run_sizes, body_starts, body_ends)
        if bad >= 0:
            raise CorruptRecordError(
                "ConsumeQueue entry points at a damaged record at CommitLog offset "
                f"{start + starts[bad]}",
                position=start + starts[bad],
            )
        run = RecordRun(data, run_starts, run_sizes, body_starts, body_ends)
        return GetMessageResult(
            GetMessageStatus.FOUND, offset + n, lo, hi, [run], list(range(offset, offset + n))
        )

    def _pick_entries(
        self,
        cq: ConsumeQueue,
        offset: int,
        hi: int,
        max_nums: int,
        wanted: np.ndarray | None,
        max_bytes: int,
    ) -> _Picked:
        """The queue's entries from ``offset`` (below ``hi``) a read returns: up to
        ``max_nums``, of the ``wanted`` tags codes (None: all), within ``max_bytes``
        (one always goes, however large), skipping entries whose records retention
        removed; at most ``MAX_FILTER_SCAN`` entries looked at."""
        picked = _Picked(offset)
        min_phys = self.commit_log.min_offset()
        scanned = 0
        while picked.next_offset < hi and picked.count < max_nums and scanned < MAX_FILTER_SCAN:
            at = picked.next_offset
            chunk = (
                max_nums - picked.count if wanted is None else min(MAX_FILTER_SCAN - scanned, 1024)
            )
            entries = cq.get_entries(at, min(chunk, hi - at))
            if len(entries) == 0:
                break
            if wanted is None and int(entries["offset"][0]) >= min_phys:
                # the common read: no filter, nothing removed (entries are in log order)
                chunk_bytes = int(entries["size"].sum(dtype=np.int64))
                if picked.total_bytes + chunk_bytes <= max_bytes:
                    picked.add(np.arange(at, at + len(entries)), entries, chunk_bytes)
                    picked.next_offset += len(entries)
                    scanned += len(entries)
                    continue
            keep = entries["offset"] >= min_phys
            picked.removed = picked.removed or not bool(keep.all())
            if wanted is not None:
                keep &= np.isin(entries["tags_code"].astype(np.int64), wanted)
            matched = np.flatnonzero(keep)
            csum = np.cumsum(entries["size"][matched].astype(np.int64)) + picked.total_bytes
            take = min(max_nums - picked.count, int(np.searchsorted(csum, max_bytes, side="right")))
            if picked.count == 0 and take == 0 and len(matched):
                take = 1  # one message always goes, however large
            stopped_early = take < len(matched)
            if take:
                sel = matched[:take]
                picked.add(sel + at, entries[sel], int(csum[take - 1]) - picked.total_bytes)
            # resume right after the last message taken, or at the first one not taken
            consumed = int(matched[take]) if stopped_early else len(entries)
            picked.next_offset += consumed
            scanned += consumed
            if stopped_early:
                break
        return picked

    def _read_runs(self, offsets: np.ndarray, sizes: np.ndarray) -> list[RecordRun] | None:
        """Read records in runs of adjacent ones (one copy per run), checking each header."""
        seg = self.commit_log.segment_size
        breaks = (
            np.flatnonzero(
                (offsets[1:] != offsets[:-1] + sizes[:-1])
                | (offsets[1:] // seg != offsets[:-1] // seg)
            )
            + 1
        )
        runs: list[RecordRun] = []
        bounds = [0, *breaks.tolist(), len(offsets)]
        for a, b in itertools.pairwise(bounds):
            start = int(offsets[a])
            end = int(offsets[b - 1] + sizes[b - 1])
            data = self.commit_log.read(start, end - start)
            if data is None:
                return None
            starts = offsets[a:b] - start
            run_sizes = sizes[a:b]
            body_starts = np.empty(b - a, dtype=np.int64)
            body_ends = np.empty(b - a, dtype=np.int64)
            bad = check_records(np.frombuffer(data, dtype=np.uint8), starts, run_sizes,
                                body_starts, body_ends)  # fmt: skip
            if bad >= 0:
                raise CorruptRecordError(
                    "ConsumeQueue entry points at a damaged record at CommitLog offset "
                    f"{int(offsets[a + bad])}",
                    position=int(offsets[a + bad]),
                )
            run = RecordRun(data, starts, run_sizes, body_starts, body_ends)
            runs.append(run)
        return runs

    def look_message_by_offset(
        self,
        commit_log_offset: int,
        size: int | None = None,
        *,
        decompress: bool = True,
        with_body: bool = True,
    ) -> MessageExt | None:
        """Decode the record at a physical offset, or None if there is none there.

        ``decompress=False`` keeps a compressed body as stored (to re-append it);
        ``with_body=False`` leaves the body out (empty, unchecked: ``read_body``).
        """
        if size is None:
            head = self.commit_log.read(commit_log_offset, 8)
            if head is None:
                return None
            size = int.from_bytes(head[:4], "big", signed=True)
            if int.from_bytes(head[4:8], "big") == BLANK_MAGIC_CODE:
                return None
        if size < HEADER_SIZE or size > self.config.max_message_size + (64 << 10):
            return None
        data = self.commit_log.read(commit_log_offset, size)
        if data is None:
            return None
        try:
            msg = decode_record(data, decompress=decompress, with_body=with_body)
        except CorruptRecordError:
            return None
        return msg if msg.commit_log_offset == commit_log_offset else None

    def read_body(self, msg: MessageExt) -> memoryview:
        """The body of a stored message, as stored (compressed if it was), read again
        from the log and checked against its BODYCRC: a view of one copy of the record
        (a large body is neither copied twice nor decoded). Raises ``CorruptRecordError``
        if the record is gone or no longer the one ``msg`` was read from."""
        at = msg.commit_log_offset
        data = self.commit_log.read(at, msg.store_size)
        if data is None or len(data) < HEADER_SIZE:
            raise CorruptRecordError(f"no record at CommitLog offset {at}", position=at)
        head = HEADER.unpack_from(data)
        total, crc, phys, body_len = head[0], head[2], head[6], head[14]
        if total != msg.store_size or phys != at or body_len < 0 or HEADER_SIZE + body_len > total:
            raise CorruptRecordError(f"the record at {at} is not the one read", position=at)
        body = memoryview(data)[HEADER_SIZE : HEADER_SIZE + body_len]
        if crc32(body) & 0x7FFFFFFF != crc:
            raise CorruptRecordError(f"body CRC mismatch at CommitLog offset {at}", position=at)
        return body

    def read_record(self, commit_log_offset: int) -> bytes | None:
        """The stored record at a physical offset, byte for byte, or None if there is
        no whole, valid record there."""
        msg = self.look_message_by_offset(commit_log_offset, decompress=False)
        if msg is None:
            return None
        return self.commit_log.read(commit_log_offset, msg.store_size)

    def get_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """STORETIMESTAMP of the message at a logical offset, -1 if there is none."""
        cq = self.consume_queue(topic, queue_id)
        if cq is None:
            return -1
        entries = cq.get_entries(offset, 1)
        if len(entries) == 0:
            return -1
        raw = self.commit_log.read(int(entries["offset"][0]) + OFF_STORETIMESTAMP, 8)
        return int.from_bytes(raw, "big", signed=True) if raw else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first logical offset stored at or after ``timestamp_ms`` (binary search).

        Before every message: the min offset; after every message: the max offset.
        """
        cq = self.consume_queue(topic, queue_id)
        if cq is None:
            return 0
        lo, hi = cq.min_offset, self.visible_max_offset(cq)
        while lo < hi:
            mid = (lo + hi) // 2
            ts = self.get_store_timestamp(topic, queue_id, mid)
            if ts < 0 or ts < timestamp_ms:  # the record went away under us (retention): look later
                lo = mid + 1
            else:
                hi = mid
        return lo

    def query_message(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS or UNIQ_KEY is ``key``, newest first (those
        readers may see: ending at or below ``read_limit``)."""
        end = end_ms if end_ms is not None else int(self.clock() * 1000) + 60_000
        out: list[MessageExt] = []
        max_phys = self.commit_log.max_offset()
        if self.read_limit is not None:
            max_phys = min(max_phys, self.read_limit)
        for phys in self.index.lookup(topic, key, max_num * 2, begin_ms, end):
            if phys >= max_phys:
                continue
            msg = self.look_message_by_offset(phys)
            if msg is None or msg.topic != topic or phys + msg.store_size > max_phys:
                continue
            if key in msg.keys or msg.properties.get("UNIQ_KEY") == key:
                out.append(msg)
            if len(out) >= max_num:
                break
        return out

    # -- retention -------------------------------------------------------------------

    def clean_expired_files(self, *, now: float | None = None, manual: bool = False) -> int:
        """Delete expired segments and what pointed into them; returns segments deleted."""
        return clean_expired_files(self, now=self.clock() if now is None else now, manual=manual)


def _out_of_range(offset: int, lo: int, hi: int) -> GetMessageResult | None:
    """The answer to a read at ``offset`` of a queue holding ``[lo, hi)`` when there is
    nothing to read there (RocketMQ's statuses and next offsets), else None."""
    if hi == 0 or (lo == hi and offset == hi):
        status = (
            GetMessageStatus.NO_MESSAGE_IN_QUEUE
            if hi == 0
            else GetMessageStatus.OFFSET_OVERFLOW_ONE
        )
        return GetMessageResult(status, hi if hi else 0, lo, hi)
    if offset < lo:
        return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, lo, lo, hi)
    if offset == hi:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
    if offset > hi:
        return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, hi, lo, hi)
    return None


class _Picked:
    """The entries a read picked so far: their queue offsets and entries, in runs."""

    __slots__ = ("count", "entries", "next_offset", "qoffs", "removed", "total_bytes")

    def __init__(self, offset: int) -> None:
        self.next_offset = offset  # where the next read of the queue starts
        self.count = 0
        self.total_bytes = 0
        self.removed = False  # an entry's record was gone (retention)
        self.qoffs: list[np.ndarray] = []
        self.entries: list[np.ndarray] = []

    def add(self, qoffs: np.ndarray, entries: np.ndarray, size: int) -> None:
        self.qoffs.append(qoffs)
        self.entries.append(entries)
        self.count += len(entries)
        self.total_bytes += size

    def joined(self) -> tuple[np.ndarray, np.ndarray]:
        if len(self.qoffs) == 1:
            return self.qoffs[0], self.entries[0]
        return np.concatenate(self.qoffs), np.concatenate(self.entries)
