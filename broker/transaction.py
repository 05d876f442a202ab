"""Transactional messages: halves, decisions and check-backs (RocketMQ's
TransactionalMessageService, without its defects).

A transactional send is stored as a **half**: in ``RMQ_SYS_TRANS_HALF_TOPIC``
queue 0, the real topic and queue in its properties (``REAL_TOPIC``,
``REAL_QID``), its producer group in ``PGROUP``: stored, replicated, invisible
to the real topic's consumers. ``end`` decides it:

- commit: the message is appended to its real topic (sysFlag "commit"), then
  an **op record** (``RMQ_SYS_TRANS_OP_HALF_TOPIC``, body the half's queue
  offset, tag ``d``, as RocketMQ's) saying which decision it was;
- rollback: only the op record.

Unlike RocketMQ's END_TRANSACTION, ``end`` is idempotent: the same decision
again changes nothing and says so (``already``); the other decision is
refused (``TransactionDecidedError``). A commit interrupted between its two
appends (a crash) is found again: before committing, or checking back, a
half without an op record, the real topic's index is asked for the half's
UNIQ_KEY stored after it.

Undecided halves older than ``transaction_timeout_ms`` are **checked back**:
CHECK_TRANSACTION_STATE to a live producer of the half's group (``ask``), at
most ``transaction_check_max`` times (a group with no live producer counts a
check too), then rolled back (logged). The halves before the first undecided
one are done with: the check pass starts after them (``half_progress``, with
``op_progress``, in ``config/transaction.json``) and forgets their
decisions, so memory and checks do not grow with the half topic; a
repeated ``end`` of such an old half finds its op record by key (the index).
The op records and halves are in the CommitLog, so a slave has them, and
decisions survive ``kill -9``: on start the op queue is read again from
``op_progress``.

**Batch commits** (pymq's; the exactly-once Spark sink's): a *batch half*
holds a whole batch request as its body, tagged with a key (``writer``,
``batch``). ``commit_batch`` decides the halves of one key at once: it
checks every half of the manifest is a live half of that key (from its
header and properties: the body is not read), writes one op record naming
the key and its halves (the commit point, indexed by key), then appends
each half's batch to its queue with the compiled batch path (the body read
once, CRC-checked, not copied again) and records the halves committed, up
to ``_OP_GROUP`` in an op record. The same key again answers "already
committed" with the manifest first committed and changes nothing; a
broker killed in the middle finishes the commit on start. Halves of a key
not in its manifest (failed or speculative task attempts, a re-run of a
committed batch) are rolled back by the next check pass; a key never
committed has its halves rolled back like any undecided half, after
``transaction_timeout_ms`` and ``transaction_check_max`` check passes
(nobody is asked: the writer's tasks are gone).
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from broker.config import BrokerConfig
from broker.store.files import load_json, save_json
from broker.store.inner import BatchInner, MessageInner, index_keys
from broker.store.store import MessageStore
from connector.errors import (
    MessageIllegalError,
    MessageNotExistError,
    NoPermissionError,
    StoreError,
    TransactionDecidedError,
)
from connector.protocol.hashing import tags_code
from connector.protocol.message import MessageExt, SysFlag
from connector.protocol.msgid import encode_host
from connector.protocol.names import TRANS_HALF_TOPIC, TRANS_OP_TOPIC
from connector.protocol.properties import PropertyKeys, decode_properties, encode_properties

__all__ = [
    "COMMIT", "ROLLBACK", "BatchCommitResult", "EndResult", "TransactionService", "born_host_of",
]  # fmt: skip

log = logging.getLogger(__name__)
P = PropertyKeys
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
OP_TAG = "d"  # RocketMQ's op records' tag ("remove")
DECISION = "TRAN_DECISION"  # pymq: which decision an op record is
BATCH_COMMIT = "BATCH_COMMIT"  # the DECISION of a batch commit's op record
TRANSACTION_TYPES = SysFlag.TRANSACTION_PREPARED | SysFlag.TRANSACTION_COMMIT
_CHUNK = 256
_OP_GROUP = 128  # halves an op record decides at most (its keys stay well under 32 KiB)
_LOCALHOST = b"\x7f\x00\x00\x01\x00\x00\x00\x00"

# ask a live producer of a group about a half (CHECK_TRANSACTION_STATE); False: none
Ask = Callable[[str, MessageExt], bool]


BatchKey = tuple[str, int]  # (writer, batch)


@dataclass(frozen=True, slots=True)
class BatchCommitResult:
    already: bool  # the key was committed before: nothing was changed
    halves: list[int]  # the half queue offsets committed under the key (the first time)
    messages: int  # messages they hold
    manifest: Any  # what the first commit of the key carried (the caller's, as given)


@dataclass(frozen=True, slots=True)
class _Committed:
    halves: frozenset[int]
    messages: int
    manifest: Any
    op_offset: int
    # decided by this process (not read back from the op queue): every append of its
    # halves since was made here, and is known (``_applied``, ``_decided``), so none
    # needs looking for in the log; and its halves as read when deciding (no body)
    found: dict[int, MessageExt] | None = None


@dataclass(frozen=True, slots=True)
class EndResult:
    decision: str  # COMMIT or ROLLBACK
    already: bool  # decided so before: nothing was changed
    half_offset: int


class TransactionService:
    def __init__(
        self,
        store: MessageStore,
        config: BrokerConfig,
        *,
        ask: Ask = lambda group, half: False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.config = config
        self.ask = ask  # set by the remoting edge
        self.clock = clock
        self.path = store.config.config_dir / "transaction.json"
        self.half_progress = 0  # every half before it is decided
        self.op_progress = 0  # op records before it are of halves before half_progress
        self._decided: dict[int, tuple[str, int]] = {}  # half offset -> (decision, op offset)
        self._checks: dict[int, int] = {}  # half offset -> times checked back
        self._batches: dict[BatchKey, _Committed] = {}  # batch commits since op_progress
        # halves appended here whose op record is not written yet (a failure in between)
        self._applied: set[int] = set()
        self._ops_read = 0  # the op queue read up to here
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.checked = 0  # check-backs sent
        self.rolled_back_unchecked = 0  # halves rolled back after transaction_check_max

    # -- lifecycle -------------------------------------------------------------------

    def load(self) -> None:
        """Progress from ``transaction.json``, then the decisions since (the op queue)."""
        raw = load_json(self.path)
        if isinstance(raw, dict):
            self.half_progress = int(raw.get("half_progress", 0))
            self.op_progress = int(raw.get("op_progress", 0))
        self._ops_read = self.op_progress
        with self._lock:
            self._read_ops()
            self._finish_batches()

    def persist(self) -> None:
        save_json(self.path, {"half_progress": self.half_progress, "op_progress": self.op_progress})

    def start(self) -> None:
        """Load, then check back undecided halves every ``transaction_check_interval_ms``."""
        self.load()
        self._thread = threading.Thread(target=self._run, name="TransactionCheck", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.persist()

    def _run(self) -> None:
        interval_s = self.config.transaction_check_interval_ms / 1000
        while not self._stop.wait(interval_s):
            try:
                self.check_pass()
            except Exception:  # keep checking; the defect is logged
                log.exception("transaction check pass failed")

    # -- decisions -------------------------------------------------------------------

    def end(self, group: str, half_offset: int, commit_log_offset: int, decision: str) -> EndResult:
        """Commit or roll back the half at ``commit_log_offset`` (queue offset
        ``half_offset`` of the half topic; -1: whatever it is), once."""
        half = self.store.look_message_by_offset(commit_log_offset, decompress=False)
        if (
            half is None
            or half.topic != TRANS_HALF_TOPIC
            or (half_offset >= 0 and half.queue_offset != half_offset)
        ):
            raise MessageNotExistError(
                f"no half message at CommitLog offset {commit_log_offset}"
                + (f" (half queue offset {half_offset})" if half_offset >= 0 else "")
            )
        owner = half.properties.get(P.PRODUCER_GROUP, "")
        if group and owner and group != owner:
            raise NoPermissionError(
                f"the half at {commit_log_offset} belongs to producer group {owner}, not {group}"
            )
        with self._lock:
            return self._decide(half, decision)

    def commit_batch(
        self,
        group: str,
        writer: str,
        batch_id: int,
        halves: Sequence[tuple[int, int]],
        manifest: Any = None,
        *,
        defer: bool = False,
    ) -> BatchCommitResult:
        """Commit the batch halves ``halves`` ((half queue offset, CommitLog offset)
        each) of the key (``writer``, ``batch_id``), all or none, once per key.

        ``defer``: only take the decision (the commit record); the halves are appended
        by the next call for the key (or the next check pass). A call for a key
        committed before appends whatever of it is not appended yet, then answers
        ``already``."""
        key = (writer, batch_id)
        with self._lock:
            self._read_ops()
            prior = self._committed_batch(key)
            if prior is not None:
                self._finish(prior)
                return BatchCommitResult(True, sorted(prior.halves), prior.messages, prior.manifest)
            found = [self._live_half(group, key, q, phys) for q, phys in halves]
            offsets = sorted({h.queue_offset for h in found})
            messages = sum(int(h.properties.get(P.TX_MESSAGES, "0")) for h in found)
            record = {"writer": writer, "batch": batch_id, "halves": offsets,
                      "messages": messages, "manifest": manifest}  # fmt: skip
            op = self._put_op(orjson.dumps(record), _batch_op_key(key), BATCH_COMMIT)
            kept = {h.queue_offset: h for h in found} if defer else None  # for _finish
            self._batches[key] = _Committed(frozenset(offsets), messages, manifest, op, kept)
            if not defer:  # the commit point is passed: a crash now is finished on start
                todo = [h for h in found if h.queue_offset not in self._decided]
                self._apply_all(todo, fresh=True)
            return BatchCommitResult(False, offsets, messages, manifest)

    def _live_half(self, group: str, key: BatchKey, queue_offset: int, phys: int) -> MessageExt:
        """The half at ``phys``, checked (its body is left out: ``_apply`` reads it)."""
        half = self.store.look_message_by_offset(phys, decompress=False, with_body=False)
        if half is None or half.topic != TRANS_HALF_TOPIC or half.queue_offset != queue_offset:
            raise MessageNotExistError(
                f"no half message at CommitLog offset {phys} (half queue offset {queue_offset})"
            )
        if _batch_key(half) != key:
            raise MessageIllegalError(
                f"the half at {queue_offset} is not one of batch {key[1]} of writer {key[0]}"
            )
        owner = half.properties.get(P.PRODUCER_GROUP, "")
        if group and owner and group != owner:
            raise NoPermissionError(f"the half at {queue_offset} belongs to producer group {owner}")
        prior = self._prior(half)
        if prior is not None:
            raise TransactionDecidedError(
                f"the half at {queue_offset} of batch {key[1]} of writer {key[0]} was "
                f"{'committed' if prior == COMMIT else 'rolled back'} already "
                "(older than the transaction timeout?)",
                decision=prior,
            )
        return half

    def _committed_batch(self, key: BatchKey) -> _Committed | None:
        known = self._batches.get(key)
        if known is not None:
            return known
        for op in self.store.query_message(TRANS_OP_TOPIC, _batch_op_key(key), 8):
            found, committed = _parse_batch_record(op, -1)
            if found == key and committed is not None:
                return committed
        return None

    def _finish_batches(self) -> None:
        """Batch commits a crash interrupted (their halves not all recorded): finished."""
        for committed in list(self._batches.values()):
            self._finish(committed, crashed=True)

    def _finish(self, committed: _Committed, *, crashed: bool = False) -> None:
        """Append the halves of a committed key not appended yet."""
        cq = self.store.consume_queue(TRANS_HALF_TOPIC, 0)
        if cq is None:
            return
        todo: list[MessageExt] = []
        found = committed.found
        for offset in sorted(committed.halves):
            if offset in self._decided or offset < self.half_progress:
                continue
            half = found.get(offset) if found is not None else None  # read when decided
            if half is None:
                entries = cq.get_entries(offset, 1)
                if len(entries) == 0:
                    continue
                half = self.store.look_message_by_offset(
                    int(entries["offset"][0]), int(entries["size"][0]), with_body=False
                )
                if half is None or half.queue_offset != offset:
                    continue
                if crashed:
                    log.warning("finishing the commit of half %d (interrupted by a crash)", offset)
            todo.append(half)
        self._apply_all(todo, fresh=found is not None)
        if found is not None:
            found.clear()  # every half appended and recorded: not read again

    def _apply_all(self, halves: Sequence[MessageExt], *, fresh: bool = False) -> None:
        """Append committed halves, recording them in op records of up to ``_OP_GROUP``
        halves each (RocketMQ 5's comma-separated op bodies), each written after its
        halves' appends: a crash in between leaves appends without their op record,
        which ``_committed_before`` finds when the commit is finished on start.
        ``fresh``: halves of a key this process decided (``_Committed.found``), whose
        appends all happened here: not looked for in the log."""
        for at in range(0, len(halves), _OP_GROUP):
            group = halves[at : at + _OP_GROUP]
            for half in group:
                self._apply(half, look=not fresh)
            self._write_ops(group, COMMIT)

    def _decide(self, half: MessageExt, decision: str) -> EndResult:
        offset = half.queue_offset
        self._read_ops()
        prior = self._prior(half)
        if prior is not None:
            if prior != decision:
                raise TransactionDecidedError(
                    f"transaction {half.properties.get(P.UNIQ_KEY, '?')} was "
                    f"{'committed' if prior == COMMIT else 'rolled back'} already",
                    decision=prior,
                )
            return EndResult(prior, True, offset)
        if decision == COMMIT:
            self._apply(half)
        self._write_op(half, decision)
        self._checks.pop(offset, None)
        return EndResult(decision, False, offset)

    def _apply(self, half: MessageExt, *, look: bool = True) -> None:
        """Append what a committed half holds to its real queue (unless a commit a crash
        cut short did already: ``look`` looks for it in the log; else only appends made
        by this process are known). A batch half's body (its wire batch) is read from
        the log here, checked against its CRC, and handed to the batch path uncopied:
        ``half`` may come without it (``with_body=False``)."""
        if half.queue_offset in self._applied:
            return
        topic, queue = _real_queue(half)
        if P.TX_WRITER in half.properties:  # a batch half: its body is a wire batch
            data = self.store.read_body(half)
            if look and self._committed_before(half, _first_uniq_key(data)):
                return
            put = self.store.put_messages(
                BatchInner(topic, queue, data, born_timestamp=half.born_timestamp,
                           born_host=born_host_of(half))
            )  # fmt: skip
        else:
            if look and self._committed_before(half):
                return
            put = self.store.put_message(_real_message(half))
        if not put.ok:
            raise StoreError(
                f"committing the half at {half.queue_offset} failed: {put.status.value}"
            )
        self._applied.add(half.queue_offset)

    def _prior(self, half: MessageExt) -> str | None:
        offset = half.queue_offset
        known = self._decided.get(offset)
        if known is not None:
            return known[0]
        if offset >= self.half_progress:
            return None
        # decided before the check pass moved on: its op record, by key
        for op in self.store.query_message(TRANS_OP_TOPIC, _op_key(offset), 4):
            if offset in (_op_offsets(op.body) or ()):
                return op.properties.get(DECISION, COMMIT)
        return COMMIT if self._committed_before(half) else ROLLBACK

    def _committed_before(self, half: MessageExt, batch_uniq: str | None = None) -> bool:
        """The real message of ``half`` is stored already (a commit a crash cut before its
        op record was written). A batch half is known by its first message's UNIQ_KEY
        (``batch_uniq`` if the caller has it; else read from the half's body)."""
        topic = half.properties.get(P.REAL_TOPIC)
        uniq = half.properties.get(P.UNIQ_KEY)
        if P.TX_WRITER in half.properties:  # a batch: its first message's
            uniq = (
                batch_uniq
                if batch_uniq is not None
                else _first_uniq_key(self.store.read_body(half))
            )
        if not topic or not uniq:
            return False
        found = self.store.query_message(topic, uniq, 4, begin_ms=half.store_timestamp)
        return any(m.store_timestamp >= half.store_timestamp for m in found)

    def _write_op(self, half: MessageExt, decision: str) -> None:
        self._write_ops([half], decision)

    def _write_ops(self, halves: Sequence[MessageExt], decision: str) -> None:
        """One op record deciding ``halves`` alike: its body their half queue offsets,
        comma-separated, its keys theirs (``_op_key``)."""
        if not halves:
            return
        offsets = [h.queue_offset for h in halves]
        body = ",".join(map(str, offsets)).encode()
        op = self._put_op(body, " ".join(map(_op_key, offsets)), decision)
        for offset in offsets:
            self._decided[offset] = (decision, op)
            self._applied.discard(offset)

    def _put_op(self, body: bytes, key: str, decision: str) -> int:
        """Append an op record; its op queue offset."""
        props = {P.TAGS: OP_TAG, P.KEYS: key, DECISION: decision}
        op = MessageInner(
            topic=TRANS_OP_TOPIC,
            queue_id=0,
            body=body,
            properties=encode_properties(props),
            tags_code=tags_code(OP_TAG),
            keys=index_keys(props),
            born_timestamp=int(self.clock() * 1000),
        )
        put = self.store.put_message(op)
        if not put.ok or put.append is None:
            raise StoreError(f"recording a transaction decision ({key}) failed")
        self._ops_read = max(self._ops_read, put.append.queue_offset + 1)
        return put.append.queue_offset

    def _read_ops(self) -> None:
        """Decisions written since the op queue was last read (a slave promoted, a start)."""
        cq = self.store.consume_queue(TRANS_OP_TOPIC, 0)
        if cq is None:
            return
        at = max(self._ops_read, cq.min_offset)
        while True:
            entries = cq.get_entries(at, _CHUNK)
            if len(entries) == 0:
                break
            sizes = entries["size"].tolist()
            for phys, size in zip(entries["offset"].tolist(), sizes, strict=True):
                op = self.store.look_message_by_offset(phys, size)
                if op is not None and op.properties.get(DECISION) == BATCH_COMMIT:
                    key, committed = _parse_batch_record(op, at)
                    if key is not None and committed is not None:
                        self._batches.setdefault(key, committed)
                elif op is not None and (decided := _op_offsets(op.body)) is not None:
                    decision = op.properties.get(DECISION, COMMIT)
                    for half in decided:
                        if half >= self.half_progress:
                            self._decided[half] = (decision, at)
                at += 1
        self._ops_read = at

    # -- check-backs -----------------------------------------------------------------

    def check_pass(self) -> int:
        """Check back every undecided half past ``transaction_timeout_ms``, roll back those
        checked ``transaction_check_max`` times, and move past the decided ones; returns
        the check-backs sent."""
        cq = self.store.consume_queue(TRANS_HALF_TOPIC, 0)
        if cq is None:
            return 0
        sent = 0
        timeout_ms = self.config.transaction_timeout_ms
        with self._lock:
            self._read_ops()
            self.half_progress = max(self.half_progress, cq.min_offset)
            at = self.half_progress
            now_ms = int(self.clock() * 1000)
            while not self._stop.is_set():
                entries = cq.get_entries(at, _CHUNK)
                if len(entries) == 0:
                    break
                young = False
                for phys, size in zip(
                    entries["offset"].tolist(), entries["size"].tolist(), strict=True
                ):
                    if at not in self._decided:
                        half = self.store.look_message_by_offset(phys, size, decompress=False)
                        if half is None or half.topic != TRANS_HALF_TOPIC:
                            self._decided[at] = (ROLLBACK, self._ops_read)  # gone: retention
                        elif now_ms - half.store_timestamp < timeout_ms:
                            young = True  # the halves after it are younger still
                            break
                        else:
                            sent += self._check_one(half)
                    at += 1
                if young:
                    break
            self._compact()
        self.persist()
        return sent

    def _check_one(self, half: MessageExt) -> int:
        offset = half.queue_offset
        key = _batch_key(half)
        if key is not None:
            committed = self._committed_batch(key)
            if committed is not None:  # in its manifest: finish it; else a stray attempt
                if offset in committed.halves:
                    self._apply(half)
                    self._write_op(half, COMMIT)
                else:
                    self._write_op(half, ROLLBACK)
                return 0
        elif self._committed_before(half):
            self._write_op(half, COMMIT)  # the op record a crash cut off
            return 0
        times = self._checks.get(offset, 0)
        if times >= self.config.transaction_check_max:
            log.warning(
                "transaction %s (half %d, group %s) undecided after %d check-backs: rolled back",
                half.properties.get(P.UNIQ_KEY, "?"), offset,
                half.properties.get(P.PRODUCER_GROUP, "?"), times,
            )  # fmt: skip
            self._write_op(half, ROLLBACK)
            self.rolled_back_unchecked += 1
            return 0
        self._checks[offset] = times + 1
        group = half.properties.get(P.PRODUCER_GROUP, "")
        if key is not None:
            return 0  # a batch's writer cannot be asked: its tasks are gone
        if self.ask(group, _as_real(half)):
            self.checked += 1
            return 1
        log.info("transaction half %d: no live producer of group %s to ask", offset, group)
        return 0

    def _compact(self) -> None:
        """Move past the decided halves at the front: forget their decisions."""
        progress = self.half_progress
        decided = self._decided
        while progress in decided:
            del decided[progress]
            self._checks.pop(progress, None)
            progress += 1
        self.half_progress = progress
        if self.store.config.message_index_enable:  # else kept: no key lookup to fall back on
            for key in [k for k, c in self._batches.items() if all(h < progress for h in c.halves)]:
                del self._batches[key]  # still found by its key (the index) if asked again
        self.op_progress = min(
            [op for _, op in decided.values()] + [c.op_offset for c in self._batches.values()],
            default=self._ops_read,
        )

    def state(self, half_offset: int) -> str:
        """``open``, ``committed`` or ``rolled_back``: the half at that queue offset of the
        half topic (MessageNotExistError if there is none)."""
        cq = self.store.consume_queue(TRANS_HALF_TOPIC, 0)
        if cq is None or half_offset < 0:
            raise MessageNotExistError(f"no half at half queue offset {half_offset}")
        entries = cq.get_entries(half_offset, 1)
        if len(entries) == 0:
            raise MessageNotExistError(f"no half at half queue offset {half_offset}")
        half = self.store.look_message_by_offset(
            int(entries["offset"][0]), int(entries["size"][0]), decompress=False
        )
        if half is None:
            raise MessageNotExistError(f"the half at half queue offset {half_offset} is gone")
        with self._lock:
            self._read_ops()
            prior = self._prior(half)
        return "open" if prior is None else "committed" if prior == COMMIT else "rolled_back"

    @property
    def halves_stored(self) -> int:
        """Halves ever stored here (the half queue's end)."""
        cq = self.store.consume_queue(TRANS_HALF_TOPIC, 0)
        return cq.max_offset if cq is not None else 0

    @property
    def undecided(self) -> int:
        """Halves past the check pass's progress not decided yet."""
        cq = self.store.consume_queue(TRANS_HALF_TOPIC, 0)
        end = cq.max_offset if cq is not None else 0
        with self._lock:
            return max(0, end - self.half_progress - len(self._decided))


def _op_key(half_offset: int) -> str:
    return f"half-{half_offset}"


def _op_offsets(body: bytes) -> list[int] | None:
    """The half queue offsets an op record decides (its body: one, or several
    comma-separated); None if the body is not such a list."""
    parts = body.split(b",")
    if not all(p.isdigit() for p in parts):
        return None
    return [int(p) for p in parts]


def _batch_op_key(key: BatchKey) -> str:
    return f"batch-{key[1]}-{key[0]}"


def _batch_key(half: MessageExt) -> BatchKey | None:
    writer = half.properties.get(P.TX_WRITER)
    raw = half.properties.get(P.TX_BATCH, "")
    if writer is None or not raw.isdigit():
        return None
    return writer, int(raw)


def _parse_batch_record(
    op: MessageExt, op_offset: int
) -> tuple[BatchKey | None, _Committed | None]:
    try:
        rec = orjson.loads(op.body)
        key = (str(rec["writer"]), int(rec["batch"]))
        halves = frozenset(int(h) for h in rec["halves"])
        committed = _Committed(halves, int(rec.get("messages", 0)), rec.get("manifest"), op_offset)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        log.error("a batch commit record at op offset %d is damaged; ignored", op_offset)
        return None, None
    return key, committed


_ENTRY_HEAD = struct.Struct(">iIiii")  # a wire batch entry: TOTALSIZE, MAGIC, CRC, FLAG, BODYLEN


def _first_uniq_key(body: bytes | memoryview) -> str | None:
    """The UNIQ_KEY of the first message of a batch half's body, a wire batch (its first
    entry read alone: the batch was checked whole when the half was stored)."""
    if len(body) < _ENTRY_HEAD.size + 2:
        return None
    body_len = _ENTRY_HEAD.unpack_from(body)[4]
    at = _ENTRY_HEAD.size + body_len
    if body_len < 0 or at + 2 > len(body):
        return None
    props_len = int.from_bytes(body[at : at + 2], "big")
    try:
        return decode_properties(bytes(body[at + 2 : at + 2 + props_len])).get(P.UNIQ_KEY)
    except (ValueError, UnicodeDecodeError):
        return None


def _real_queue(half: MessageExt) -> tuple[str, int]:
    topic = half.properties.get(P.REAL_TOPIC, "")
    queue = half.properties.get(P.REAL_QUEUE_ID, "")
    if not topic or not queue.isdigit():
        raise StoreError(f"the half at {half.commit_log_offset} names no real topic and queue")
    return topic, int(queue)


def born_host_of(half: MessageExt) -> bytes:
    """A stored message's BORNHOST as the record holds it (loopback if unreadable)."""
    host, _, port = half.born_host.rpartition(":")
    try:
        return encode_host(host, int(port))
    except (ValueError, OSError):
        return _LOCALHOST


def _as_real(half: MessageExt) -> MessageExt:
    """The half as its producer sent it: its real topic and queue (a check-back's body)."""
    props = half.properties
    return dataclasses.replace(
        half,
        topic=props.get(P.REAL_TOPIC, half.topic),
        queue_id=int(props.get(P.REAL_QUEUE_ID, "0") or 0),
        properties=dict(props),
    )


def _real_message(half: MessageExt) -> MessageInner:
    """The committed message: the half's, in its real topic and queue."""
    topic, queue = _real_queue(half)
    props = dict(half.properties)
    props.pop(P.REAL_TOPIC, None)
    props.pop(P.REAL_QUEUE_ID, None)
    return MessageInner(
        topic=topic,
        queue_id=queue,
        body=half.body,
        properties=encode_properties(props),
        tags_code=tags_code(props.get(P.TAGS)),
        keys=index_keys(props),
        flag=half.flag,
        sys_flag=(half.sys_flag & ~TRANSACTION_TYPES) | SysFlag.TRANSACTION_COMMIT,
        born_timestamp=half.born_timestamp,
        born_host=born_host_of(half),
        reconsume_times=half.reconsume_times,
    )
