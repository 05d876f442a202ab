"""Transactional messages (RocketMQ's ``TransactionMQProducer``).

    class Listener:
        def execute_local_transaction(self, msg, arg) -> LocalTransactionState: ...
        def check_local_transaction(self, msg_ext) -> LocalTransactionState: ...

    with TransactionProducer(group="tx", namesrv=ns, listener=Listener()) as tp:
        r = tp.send_message_in_transaction(Message(topic="T", body=b"x"), arg=None)

``send_message_in_transaction`` sends the message as a half (stored,
invisible to consumers) on the full send path (route, queue selection,
retries, fault avoidance), runs ``execute_local_transaction`` and tells the
broker the outcome (END_TRANSACTION): ``COMMIT_MESSAGE`` makes the message
readable, ``ROLLBACK_MESSAGE`` drops it, ``UNKNOW`` leaves it to the broker's
check-back, which calls ``check_local_transaction`` (on a thread of its
own) about halves undecided after the broker's ``transaction_timeout_ms``,
for as long as this producer (or another of its group) is running. A
listener that raises counts as ``UNKNOW``; a half the broker could not store
but answered for (FLUSH_DISK_TIMEOUT, the slave statuses) is rolled back,
as RocketMQ's producer does.

pymq's broker answers END_TRANSACTION, and a decision sent twice changes
nothing (RocketMQ's delivers the message twice); this producer asks and
logs a failed answer (the check-back then settles the half).
"""

from __future__ import annotations

import contextlib
import enum
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from connector.client.connection import RemotingConnection
from connector.client.encoding import Encoded
from connector.client.producer import Producer
from connector.client.send_request import SendRequests
from connector.errors import CorruptRecordError, PyMQError
from connector.protocol.message import Message, MessageExt, MessageQueue, SysFlag
from connector.protocol.msgid import decode_offset_msg_id
from connector.protocol.properties import PropertyKeys, encode_properties
from connector.protocol.record import decode_record, record_size
from connector.protocol.remoting import SEND_V2_LETTERS as V2
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.protocol.status import SendStatus

__all__ = [
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]

log = logging.getLogger(__name__)
P = PropertyKeys
END_TIMEOUT_S = 3.0


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # sic, RocketMQ's name

    @property
    def wire(self) -> int:
        """END_TRANSACTION's commitOrRollback."""
        return _WIRE[self]


_WIRE = {
    LocalTransactionState.COMMIT_MESSAGE: SysFlag.TRANSACTION_COMMIT,
    LocalTransactionState.ROLLBACK_MESSAGE: SysFlag.TRANSACTION_ROLLBACK,
    LocalTransactionState.UNKNOW: 0,
}


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState: ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    status: SendStatus  # of the half
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int  # the half's, in the broker's half topic
    local_transaction_state: LocalTransactionState
    transaction_id: str


class _Half(Encoded):
    """A transactional message as encoded for SEND_MESSAGE_V2 (a half is one message,
    never part of a batch): its body and properties apart."""

    __slots__ = ("body", "flag", "properties")

    def __init__(self, msg: Message, properties: dict[str, str], group: str) -> None:
        props = dict(properties)
        props[P.TRANSACTION_PREPARED] = "true"
        props[P.PRODUCER_GROUP] = group
        encoded = encode_properties(props)
        size = record_size(len(msg.body), len(msg.topic.encode()), len(encoded))
        super().__init__(msg.topic, b"", [props[P.UNIQ_KEY]], [size], None)
        self.body = msg.body
        self.flag = msg.flag
        self.properties = encoded.decode()


class _HalfRequests(SendRequests):
    """Sends as a plain producer's; a ``_Half`` as a single message (SEND_MESSAGE_V2,
    its properties in the header), prepared."""

    def command(self, mq: MessageQueue, encoded: Encoded) -> RemotingCommand:
        cmd = super().command(mq, encoded)  # the queue's header (a fresh dict)
        if not isinstance(encoded, _Half):
            return cmd
        ext = cmd.ext
        ext.pop("offsetRuns", None)
        ext[V2["sysFlag"]] = str(SysFlag.TRANSACTION_PREPARED)
        ext[V2["flag"]] = str(encoded.flag)
        ext[V2["properties"]] = encoded.properties
        ext[V2["batch"]] = "false"
        return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext, encoded.body)


class TransactionProducer(Producer):
    """A ``Producer`` that also sends transactional messages; every ``Producer`` setting
    applies. ``check_threads``: threads that run ``check_local_transaction``;
    ``heartbeat_broker_interval_ms``: how often every broker of the routes is told this
    producer is alive (so it can be asked about its halves)."""

    ANSWERS_BROKERS = True

    def __init__(
        self,
        *,
        listener: TransactionListener,
        check_threads: int = 1,
        heartbeat_broker_interval_ms: int = 30_000,
        **settings: Any,
    ) -> None:
        self.listener = listener
        self.heartbeat_broker_interval_ms = heartbeat_broker_interval_ms
        # ready before joining the client instance, which may hand it a check at once
        self._checks = ThreadPoolExecutor(check_threads, thread_name_prefix="pymq-tx-check")
        self._told: set[str] = set()  # brokers heartbeated since start
        # the client instance heartbeats this group to every broker it knows
        super().__init__(heartbeat_broker_interval_ms=heartbeat_broker_interval_ms, **settings)

    def start(self) -> TransactionProducer:
        super().start()
        return self

    def shutdown(self) -> None:
        super().shutdown()
        self._checks.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> TransactionProducer:
        return self.start()

    # -- sending -----------------------------------------------------------------------

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        self.start()
        self.encoder.check(msg)
        props = msg.all_properties()
        props.pop(P.DELAY_TIME_LEVEL, None)  # as RocketMQ: a transaction is not delayed
        props[P.UNIQ_KEY] = props.get(P.UNIQ_KEY) or self.encoder.uniq.next_id()
        half = _Half(msg, props, self.group)
        sent = self._send(half, msg, self.retry_times_when_send_failed)
        addr = self.instance.broker_addr(sent.queue.broker_name)
        if addr is not None and addr not in self._told:
            self._tell(addr)  # it may check back before the next heartbeat
        state = LocalTransactionState.ROLLBACK_MESSAGE
        if sent.status is SendStatus.SEND_OK:
            state = self._execute(msg, arg)
        if addr is not None:
            self._end(addr, sent.queue_offset, sent.offset_msg_id, sent.msg_id, state, False)
        return TransactionSendResult(
            sent.status, sent.msg_id, sent.offset_msg_id, sent.queue, sent.queue_offset,
            state, sent.msg_id,
        )  # fmt: skip

    def _make_requests(self) -> SendRequests:
        return _HalfRequests(self.group, self.default_topic_queue_nums)

    def _execute(self, msg: Message, arg: Any) -> LocalTransactionState:
        try:
            state = self.listener.execute_local_transaction(msg, arg)
        except Exception:  # the broker checks back later
            log.exception("execute_local_transaction raised: the transaction stays UNKNOW")
            return LocalTransactionState.UNKNOW
        return _state(state)

    def _end(
        self,
        addr: str,
        half_offset: int,
        offset_msg_id: str,
        msg_id: str,
        state: LocalTransactionState,
        from_check: bool,
    ) -> None:
        """END_TRANSACTION; a failure is logged (the broker checks back)."""
        try:
            _, commit_log_offset = decode_offset_msg_id(offset_msg_id)
            ext = {
                "producerGroup": self.group,
                "tranStateTableOffset": str(half_offset),
                "commitLogOffset": str(commit_log_offset),
                "commitOrRollback": str(state.wire),
                "fromTransactionCheck": "true" if from_check else "false",
                "msgId": msg_id,
                "transactionId": msg_id,
            }
            self.rpc.call(addr, RequestCode.END_TRANSACTION, ext, timeout_s=END_TIMEOUT_S)
        except PyMQError as exc:
            log.warning(
                "END_TRANSACTION (%s) of %s to %s failed: %s; the broker will check back",
                state.value, msg_id, addr, exc,
            )  # fmt: skip

    # -- check-backs -------------------------------------------------------------------

    def on_request(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        """A broker's request, on the connection's reader thread: handed to a check
        thread (the listener may take its time)."""
        if cmd.code != RequestCode.CHECK_TRANSACTION_STATE:
            return
        with contextlib.suppress(RuntimeError):  # shut down meanwhile
            self._checks.submit(self._check_back, conn.addr, dict(cmd.ext), bytes(cmd.body))

    def _check_back(self, addr: str, ext: dict[str, str], body: bytes) -> None:
        try:
            msg = decode_record(body)
        except CorruptRecordError as exc:
            log.warning("a check-back from %s carries no message: %s", addr, exc.message)
            return
        try:
            state = _state(self.listener.check_local_transaction(msg))
        except Exception:
            log.exception("check_local_transaction raised: the transaction stays UNKNOW")
            state = LocalTransactionState.UNKNOW
        uniq = ext.get("transactionId") or msg.properties.get(P.UNIQ_KEY, "")
        offset_msg_id = ext.get("offsetMsgId") or msg.offset_msg_id
        self._end(
            addr, int(ext.get("tranStateTableOffset", msg.queue_offset)), offset_msg_id, uniq,
            state, True,
        )  # fmt: skip

    # -- heartbeats --------------------------------------------------------------------

    def _tell(self, addr: str) -> None:
        """A heartbeat now to a broker just sent to, so it can check back before the
        client instance's next round."""
        if self.instance.heartbeat(addr, timeout_s=END_TIMEOUT_S):
            self._told.add(addr)


def _state(value: object) -> LocalTransactionState:
    if isinstance(value, LocalTransactionState):
        return value
    if isinstance(value, str) and value in LocalTransactionState.__members__:
        return LocalTransactionState[value]
    log.warning("a listener answered %r, not a LocalTransactionState: UNKNOW", value)
    return LocalTransactionState.UNKNOW
