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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.config import BrokerConfig
from broker.store.files import load_json, save_json
from broker.store.inner import MessageInner, index_keys
from broker.store.store import MessageStore
from connector.errors import (
    MessageNotExistError,
    NoPermissionError,
    StoreError,
    TransactionDecidedError,
)
from connector.protocol.hashing import tags_code
from connector.protocol.message import MessageExt, SysFlag
from connector.protocol.msgid import encode_host
from connector.protocol.names import TRANS_HALF_TOPIC, TRANS_OP_TOPIC
from connector.protocol.properties import PropertyKeys, encode_properties

__all__ = ["COMMIT", "ROLLBACK", "EndResult", "TransactionService"]

log = logging.getLogger(__name__)
P = PropertyKeys
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
OP_TAG = "d"  # RocketMQ's op records' tag ("remove")
DECISION = "TRAN_DECISION"  # pymq: which decision an op record is
TRANSACTION_TYPES = SysFlag.TRANSACTION_PREPARED | SysFlag.TRANSACTION_COMMIT
_CHUNK = 256
_LOCALHOST = b"\x7f\x00\x00\x01\x00\x00\x00\x00"

# ask a live producer of a group about a half (CHECK_TRANSACTION_STATE); False: none
Ask = Callable[[str, MessageExt], bool]


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
        if decision == COMMIT and not self._committed_before(half):
            put = self.store.put_message(_real_message(half))
            if not put.ok:
                raise StoreError(f"committing the half at {offset} failed: {put.status.value}")
        self._write_op(half, decision)
        self._checks.pop(offset, None)
        return EndResult(decision, False, offset)

    def _prior(self, half: MessageExt) -> str | None:
        offset = half.queue_offset
        known = self._decided.get(offset)
        if known is not None:
            return known[0]
        if offset >= self.half_progress:
            return None
        # decided before the check pass moved on: its op record, by key
        for op in self.store.query_message(TRANS_OP_TOPIC, _op_key(offset), 4):
            if op.body == str(offset).encode():
                return op.properties.get(DECISION, COMMIT)
        return COMMIT if self._committed_before(half) else ROLLBACK

    def _committed_before(self, half: MessageExt) -> bool:
        """The real message of ``half`` is stored already (a commit a crash cut before its
        op record was written)."""
        topic = half.properties.get(P.REAL_TOPIC)
        uniq = half.properties.get(P.UNIQ_KEY)
        if not topic or not uniq:
            return False
        found = self.store.query_message(topic, uniq, 4, begin_ms=half.store_timestamp)
        return any(m.store_timestamp >= half.store_timestamp for m in found)

    def _write_op(self, half: MessageExt, decision: str) -> None:
        offset = half.queue_offset
        props = {P.TAGS: OP_TAG, P.KEYS: _op_key(offset), DECISION: decision}
        op = MessageInner(
            topic=TRANS_OP_TOPIC,
            queue_id=0,
            body=str(offset).encode(),
            properties=encode_properties(props),
            tags_code=tags_code(OP_TAG),
            keys=index_keys(props),
            born_timestamp=int(self.clock() * 1000),
        )
        put = self.store.put_message(op)
        if not put.ok or put.append is None:
            raise StoreError(f"recording the decision on the half at {offset} failed")
        self._decided[offset] = (decision, put.append.queue_offset)
        self._ops_read = max(self._ops_read, put.append.queue_offset + 1)

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
                if op is not None and op.body.isdigit():
                    half = int(op.body)
                    if half >= self.half_progress:
                        self._decided[half] = (op.properties.get(DECISION, COMMIT), at)
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
        if self._committed_before(half):
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
        self.op_progress = min((op for _, op in decided.values()), default=self._ops_read)

    @property
    def undecided(self) -> int:
        """Halves past the check pass's progress not decided yet."""
        cq = self.store.consume_queue(TRANS_HALF_TOPIC, 0)
        end = cq.max_offset if cq is not None else 0
        with self._lock:
            return max(0, end - self.half_progress - len(self._decided))


def _op_key(half_offset: int) -> str:
    return f"half-{half_offset}"


def _as_real(half: MessageExt) -> MessageExt:
    """The half as its producer sent it: its real topic and queue (a check-back's body)."""
    props = half.properties
    real = MessageExt(
        topic=props.get(P.REAL_TOPIC, half.topic),
        body=half.body,
        queue_id=int(props.get(P.REAL_QUEUE_ID, "0") or 0),
        queue_offset=half.queue_offset,
        commit_log_offset=half.commit_log_offset,
        properties=dict(props),
        flag=half.flag,
        sys_flag=half.sys_flag,
        body_crc=half.body_crc,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        store_timestamp=half.store_timestamp,
        store_host=half.store_host,
        reconsume_times=half.reconsume_times,
        store_size=half.store_size,
        offset_msg_id=half.offset_msg_id,
    )
    return real


def _real_message(half: MessageExt) -> MessageInner:
    """The committed message: the half's, in its real topic and queue."""
    props = dict(half.properties)
    topic = props.pop(P.REAL_TOPIC, "")
    queue = props.pop(P.REAL_QUEUE_ID, "0")
    if not topic or not queue.isdigit():
        raise StoreError(f"the half at {half.commit_log_offset} names no real topic and queue")
    host, _, port = half.born_host.rpartition(":")
    try:
        born_host = encode_host(host, int(port))
    except (ValueError, OSError):
        born_host = _LOCALHOST
    return MessageInner(
        topic=topic,
        queue_id=int(queue),
        body=half.body,
        properties=encode_properties(props),
        tags_code=tags_code(props.get(P.TAGS)),
        keys=index_keys(props),
        flag=half.flag,
        sys_flag=(half.sys_flag & ~TRANSACTION_TYPES) | SysFlag.TRANSACTION_COMMIT,
        born_timestamp=half.born_timestamp,
        born_host=born_host,
        reconsume_times=half.reconsume_times,
    )
