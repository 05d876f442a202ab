"""Send path: msgCheck, retry/DLQ, delay, append (RocketMQ's SendMessageProcessor).

Every message, single or batch, passes ``check``: broker writable, topic name
legal and not reserved, topic known (or auto-created from TBW102), topic
writable, queue id in range. A single message then goes through the retry /
DLQ rule and the delay rule before it is appended; a batch is validated whole
by the store (nothing is stored if one entry is bad).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.config import BrokerConfig
from broker.store.aio import GroupAppender
from broker.store.config import FlushDiskType
from broker.store.inner import BatchInner, MessageInner, index_keys
from broker.store.results import PutMessageResult, PutMessageStatus
from broker.store.store import MessageStore
from broker.store.topics import PERM_READ, PERM_WRITE, TopicConfig
from broker.topic_manager import TopicManager
from connector.errors import (
    BrokerBusyError,
    InvalidQueueError,
    InvalidTopicError,
    MessageIllegalError,
    MessageNotExistError,
    MessageTooLargeError,
    NoPermissionError,
    NotMasterError,
    PyMQError,
    ServiceNotAvailableError,
    StoreError,
    TopicNotExistError,
)
from connector.protocol.batch import decode_batch
from connector.protocol.compression import CompressionType, decompress
from connector.protocol.hashing import tags_code
from connector.protocol.message import MAX_DELAY_LEVEL, SysFlag
from connector.protocol.msgid import UniqKeyGenerator, decode_offset_msg_id
from connector.protocol.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    is_system_topic,
    validate_group,
    validate_key,
    validate_topic,
)
from connector.protocol.properties import PropertyKeys, decode_properties, encode_properties
from connector.protocol.rest import SendBackRequest, SendMessageRequest

__all__ = ["Routed", "SendMessageProcessor", "SendOutcome", "raise_for_status"]

P = PropertyKeys
_NOT_STORED: dict[PutMessageStatus, type[PyMQError]] = {
    PutMessageStatus.MESSAGE_ILLEGAL: MessageIllegalError,
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: MessageIllegalError,
    PutMessageStatus.SERVICE_NOT_AVAILABLE: ServiceNotAvailableError,
    PutMessageStatus.OS_PAGE_CACHE_BUSY: BrokerBusyError,
}


def raise_for_status(put: PutMessageResult) -> None:
    """Stored (possibly not flushed in time) -> return; not stored -> its error."""
    if put.ok:
        return
    cls = _NOT_STORED.get(put.status, StoreError)
    raise cls(put.message or put.status.value)


@dataclass(slots=True)
class Routed:
    """A message ready to append, and topics to create once it is stored."""

    inner: MessageInner
    new_topics: list[TopicConfig]
    msg_id: str = ""  # the UNIQ_KEY
    real_queue_id: int = -1  # a half's: the queue it goes to once committed
    real_topic: str = ""  # ... and its topic


@dataclass(slots=True)
class SendOutcome:
    """An append; with SYNC_FLUSH (the group appender), ``pending``: the future of
    its result once durable."""

    put: PutMessageResult
    topic: str
    queue_id: int
    msg_id: str = ""
    count: int = 1
    pending: asyncio.Future[PutMessageResult] | None = None
    new_topics: list[TopicConfig] = field(default_factory=list)
    transaction_id: str = ""  # a half's (its UNIQ_KEY)

    def settle(self, put: PutMessageResult, topics: TopicManager) -> PutMessageResult:
        """Take a pending append's result: raise if it was refused, else create the
        topics its routing asked for."""
        self.put = put
        self.pending = None
        raise_for_status(put)
        for cfg in self.new_topics:
            topics.ensure(cfg)
        return put


_PENDING = PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, message="not appended yet")


class SendMessageProcessor:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicManager,
        config: BrokerConfig,
        *,
        clock: Callable[[], float] = time.time,
        replicated: Callable[[int], asyncio.Future[PutMessageStatus]] | None = None,
        master_addr: Callable[[], str | None] = lambda: None,
    ) -> None:
        """``replicated`` (SYNC_MASTER): the HA service's wait for the in-sync slaves
        to have the log up to an offset; ``master_addr``: a slave's master, named when
        it refuses a write."""
        self.store = store
        self.topics = topics
        self.config = config
        self.clock = clock
        self.replicated = replicated
        self.master_addr = master_addr
        self.delay_levels_ms = config.delay_levels_ms
        self.uniq = UniqKeyGenerator()
        self._round_robin = itertools.count()
        # SYNC_FLUSH: the sends of one event-loop step share one append and one flush
        self.appender = (
            GroupAppender(store)
            if store.config.flush_disk_type is FlushDiskType.SYNC_FLUSH
            else None
        )

    # -- msgCheck --------------------------------------------------------------------

    def check(
        self,
        topic: str,
        queue_id: int | None,
        *,
        internal: bool = False,
        new_topics: list[TopicConfig] | None = None,
    ) -> tuple[TopicConfig, int]:
        """The topic's config and the queue to write, or the error that stops the send.

        A topic that does not exist yet but may be created (auto-create, retry,
        DLQ) is appended to ``new_topics``; the caller stores it once the
        message is stored.
        """
        self.check_master()
        if not self.config.broker_permission & PERM_WRITE:
            raise NoPermissionError(f"broker {self.config.broker_name} is not writable")
        validate_topic(topic)
        if not internal and is_system_topic(topic):
            raise InvalidTopicError(f"topic {topic} is reserved for the system")
        cfg = self.topics.get(topic)
        if cfg is None:
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                cfg = self.topics.retry_config(topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
            elif topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                cfg = self.topics.dlq_config(topic[len(DLQ_GROUP_TOPIC_PREFIX) :])
            else:
                cfg = self.topics.auto_create_config(topic)
            if cfg is None:
                raise TopicNotExistError(
                    f"topic {topic} does not exist on broker {self.config.broker_name}"
                    " and auto-create is off"
                )
            if new_topics is not None:
                new_topics.append(cfg)
        if not cfg.writable:
            raise NoPermissionError(f"topic {topic} is not writable")
        if queue_id is None:
            queue_id = next(self._round_robin) % cfg.write_queue_nums
        elif not 0 <= queue_id < max(cfg.read_queue_nums, cfg.write_queue_nums):
            raise InvalidQueueError(
                f"queue {queue_id} does not exist: topic {topic} has "
                f"{max(cfg.read_queue_nums, cfg.write_queue_nums)} queues"
            )
        return cfg, queue_id

    def check_master(self) -> None:
        """A slave takes no writes: NotMasterError naming the master (if known)."""
        cfg = self.config
        if cfg.broker_role.is_master:
            return
        master = self.master_addr()
        where = f"its master is {master}" if master else "its master is not known now"
        raise NotMasterError(
            f"broker {cfg.broker_name} id {cfg.broker_id} is a SLAVE and takes no writes; {where}",
            broker_name=cfg.broker_name,
            master_addr=master or "",
        )

    def check_body(self, body: bytes) -> None:
        if not body:
            raise MessageIllegalError("message body is empty")
        limit = self.store.config.max_message_size
        if len(body) > limit:
            raise MessageTooLargeError(len(body), limit)

    def check_inflates(self, body: bytes, sys_flag: int) -> None:
        """A compressed body must inflate, or readers would fail later."""
        try:
            decompress(body, sys_flag, limit=self.store.config.max_message_size * 64)
        except ValueError as exc:
            raise MessageIllegalError(f"compressed body: {exc}") from None

    # -- single messages ---------------------------------------------------------------

    def single_from_request(
        self, topic: str, req: SendMessageRequest, *, born_host: bytes
    ) -> Routed:
        """Validate a JSON send and build the message to append (rules applied)."""
        if req.body_base64 is not None:
            try:
                body = base64.b64decode(req.body_base64, validate=True)
            except (binascii.Error, ValueError):
                raise MessageIllegalError("body_base64 is not valid base64") from None
        else:
            try:
                body = (req.body or "").encode("utf-8")
            except UnicodeEncodeError:  # JSON may carry lone surrogates ("\ud800")
                raise MessageIllegalError("body is not valid Unicode text") from None
        self.check_body(body)
        props = dict(req.properties)
        for key in req.keys:
            validate_key(key)
        if req.tags:
            props[P.TAGS] = req.tags
        if req.keys:
            props[P.KEYS] = P.KEY_SEPARATOR.join(req.keys)
        if req.delay_level:
            props[P.DELAY_TIME_LEVEL] = str(req.delay_level)
        if req.max_reconsume_times is not None:
            props[P.MAX_RECONSUME_TIMES] = str(req.max_reconsume_times)
        props.setdefault(P.UNIQ_KEY, self.uniq.next_id())
        born = req.born_timestamp if req.born_timestamp is not None else int(self.clock() * 1000)
        if req.transaction_group is not None:
            props.pop(P.DELAY_TIME_LEVEL, None)
        return self.route_single(
            topic,
            req.queue_id,
            body,
            props,
            flag=req.flag,
            born_timestamp=born,
            born_host=born_host,
            reconsume_times=req.reconsume_times,
            half_group=req.transaction_group,
        )

    def route_single(
        self,
        topic: str,
        queue_id: int | None,
        body: bytes,
        props: dict[str, str],
        *,
        flag: int = 0,
        sys_flag: int = 0,
        born_timestamp: int,
        born_host: bytes,
        reconsume_times: int = 0,
        internal: bool = False,
        retry_rule: bool = True,
        encoded: bytes | None = None,
        half_group: str | None = None,
    ) -> Routed:
        """msgCheck, then the retry/DLQ and delay rules; the result is ready to append.

        ``retry_rule=False``: the caller (send-back) already chose retry or DLQ.
        ``encoded``: ``props`` as the producer encoded them, stored as they are
        unless a rule changes them. ``half_group``: a transactional send of that
        producer group: stored as a half (``broker/transaction.py``), no delay.
        """
        new_topics: list[TopicConfig] = []
        _, queue_id = self.check(topic, queue_id, internal=internal, new_topics=new_topics)
        tag_code = tags_code(props.get(P.TAGS))
        if retry_rule and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            max_times = self._max_reconsume(props)
            if reconsume_times >= max_times:
                dlq = self.topics.dlq_config(topic[len(RETRY_GROUP_TOPIC_PREFIX) :])
                new_topics = [c for c in new_topics if c.topic != topic]  # not stored there
                if self.topics.get(dlq.topic) is None:
                    new_topics.append(dlq)
                topic, queue_id = dlq.topic, 0
                props.pop(P.DELAY_TIME_LEVEL, None)
                encoded = None
        real_queue_id = -1
        if half_group is not None:
            real_queue_id = queue_id
            validate_group(half_group)
            props.pop(P.DELAY_TIME_LEVEL, None)  # as RocketMQ: a transaction is not delayed
            props[P.REAL_TOPIC] = topic
            props[P.REAL_QUEUE_ID] = str(queue_id)
            props[P.TRANSACTION_PREPARED] = "true"
            props[P.PRODUCER_GROUP] = half_group
            topic, queue_id, encoded = TRANS_HALF_TOPIC, 0, None
            sys_flag &= ~(SysFlag.TRANSACTION_PREPARED | SysFlag.TRANSACTION_COMMIT)
            if self.topics.get(TRANS_HALF_TOPIC) is None:
                new_topics.append(TopicConfig(TRANS_HALF_TOPIC, 1, 1, PERM_READ | PERM_WRITE))
        level = self._delay_level(props)
        if level and not topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
            props[P.REAL_TOPIC] = topic
            props[P.REAL_QUEUE_ID] = str(queue_id)
            props[P.DELAY_TIME_LEVEL] = str(level)
            topic, queue_id = SCHEDULE_TOPIC, level - 1
            # the schedule queue's tagsCode is the delivery time (as in RocketMQ)
            tag_code = int(self.clock() * 1000) + self.delay_levels_ms[level - 1]
            encoded = None
        inner = MessageInner(
            topic=topic,
            queue_id=queue_id,
            body=body,
            properties=encode_properties(props) if encoded is None else encoded,
            tags_code=tag_code,
            keys=index_keys(props),
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            born_host=born_host,
            reconsume_times=reconsume_times,
        )
        return Routed(
            inner, new_topics, props.get(P.UNIQ_KEY, ""), real_queue_id,
            props.get(P.REAL_TOPIC, "") if half_group is not None else "",
        )  # fmt: skip

    def _max_reconsume(self, props: dict[str, str]) -> int:
        raw = props.get(P.MAX_RECONSUME_TIMES)
        if raw is not None and raw.isdigit():
            return int(raw)
        return self.config.max_reconsume_times

    def _delay_level(self, props: dict[str, str]) -> int:
        raw = props.get(P.DELAY_TIME_LEVEL)
        if raw is None:
            return 0
        try:
            level = int(raw)
        except ValueError:
            raise MessageIllegalError(f"property DELAY={raw!r} is not a delay level") from None
        if level < 0:
            raise MessageIllegalError("delay level must not be negative")
        return min(level, len(self.delay_levels_ms), MAX_DELAY_LEVEL)

    def put_single(self, routed: Routed) -> SendOutcome:
        """Append one routed message. With a group appender (SYNC_FLUSH brokers) the
        append joins the others of this event-loop step: the outcome is pending until
        ``BrokerController.stored`` awaits it."""
        inner = routed.inner
        if self.appender is not None:
            outcome = SendOutcome(
                _PENDING, inner.topic, inner.queue_id, routed.msg_id,
                pending=self.appender.put(inner), new_topics=routed.new_topics,
            )  # fmt: skip
        else:
            put, _ = self.store.put_message_nowait(inner)  # ASYNC_FLUSH: no flush future
            raise_for_status(put)
            for cfg in routed.new_topics:
                self.topics.ensure(cfg)
            outcome = SendOutcome(put, inner.topic, inner.queue_id, routed.msg_id)
        if routed.real_queue_id >= 0:  # a half: answered for its real queue, as RocketMQ's
            outcome.topic, outcome.queue_id = routed.real_topic, routed.real_queue_id
            outcome.transaction_id = routed.msg_id
        return self._replicated(outcome)

    def _replicated(self, outcome: SendOutcome) -> SendOutcome:
        """SYNC_MASTER: the outcome answers once the in-sync slaves have the append too
        (after its flush, with SYNC_FLUSH: the slaves received the bytes meanwhile)."""
        wait = self.replicated
        if wait is None:
            return outcome
        done: asyncio.Future[PutMessageResult] = asyncio.get_running_loop().create_future()

        def replicate(put: PutMessageResult) -> None:
            if not put.ok or put.append is None:
                done.set_result(put)
                return

            def answered(f: asyncio.Future[PutMessageStatus]) -> None:
                if not done.done():
                    done.set_result(put.replicated(f.result()))

            wait(put.append.end_offset).add_done_callback(answered)

        flushed = outcome.pending
        if flushed is None:
            replicate(outcome.put)
        else:

            def after_flush(f: asyncio.Future[PutMessageResult]) -> None:
                if f.cancelled():
                    done.cancel()
                elif (exc := f.exception()) is not None:
                    done.set_exception(exc)
                else:
                    replicate(f.result())

            flushed.add_done_callback(after_flush)
        outcome.pending = done
        return outcome

    # -- batches -----------------------------------------------------------------------

    def put_batch(
        self,
        topic: str,
        queue_id: int | None,
        data: bytes,
        *,
        born_timestamp: int | None,
        born_host: bytes,
        compression: CompressionType | None = None,
        before_store: Callable[[], None] | None = None,
    ) -> SendOutcome:
        """Append a wire batch to one queue; the whole batch or nothing.

        ``compression`` (single messages only) says the producer compressed the
        body with that codec; it must inflate, or readers would fail later.
        ``before_store``: called (it may raise) once the batch is checked and
        scanned, before anything is stored or created (the remoting edge's ACL
        check, its signature hashed meanwhile on another thread).
        """
        if not data:
            raise MessageIllegalError("the batch is empty")
        single = len(data) >= 4 and int.from_bytes(data[:4], "big", signed=True) == len(data)
        if compression is not None and not single:
            raise MessageIllegalError("only a single message may be sent compressed")
        born = born_timestamp if born_timestamp is not None else int(self.clock() * 1000)
        if single:
            if before_store is not None:
                before_store()
            # one message: take the single path, so delay and retry rules apply
            decoded = decode_batch(data, max_message_size=self.store.config.max_message_size)
            body = decoded.bodies[0]
            sys_flag = 0
            if compression is not None:
                sys_flag = SysFlag.COMPRESSED | compression.flag
                self.check_inflates(body, sys_flag)
            raw_props = decoded.properties[0]
            routed = self.route_single(
                topic,
                queue_id,
                body,
                decode_properties(raw_props),
                encoded=raw_props,
                flag=decoded.flags[0],
                sys_flag=sys_flag,
                born_timestamp=born,
                born_host=born_host,
            )
            return self.put_single(routed)
        new_topics: list[TopicConfig] = []
        _, queue_id = self.check(topic, queue_id, new_topics=new_topics)
        batch = BatchInner(topic, queue_id, data, born_timestamp=born, born_host=born_host)
        scanned, reason = self.store.scan(batch)  # compiled: checks, CRCs, TAGS/KEYS/DELAY
        if scanned is None:
            raise MessageIllegalError(reason)
        if scanned.delayed:
            # as RocketMQ: a delayed message must be sent on its own
            raise MessageIllegalError(
                "delay levels are not supported in a batch of several messages"
            )
        if before_store is not None:
            before_store()
        appender = self.appender
        put, _ = self.store.put_messages_nowait(batch, scanned, request_flush=False)
        raise_for_status(put)
        for cfg in new_topics:
            self.topics.ensure(cfg)
        count = put.append.msg_num if put.append else 0
        if appender is not None:  # durable with the other appends of this loop step
            outcome = SendOutcome(put, topic, queue_id, count=count, pending=appender.durable(put))
        else:
            outcome = SendOutcome(put, topic, queue_id, count=count)
        return self._replicated(outcome)

    def put_batch_half(
        self,
        topic: str,
        queue_id: int | None,
        data: bytes,
        *,
        group: str,
        writer: str,
        batch_id: int,
        born_timestamp: int | None,
        born_host: bytes,
    ) -> SendOutcome:
        """A wire batch held as one half (its body), for a batch commit keyed on
        (``writer``, ``batch_id``) to append to its queue later; checked now, so the
        commit cannot fail on it."""
        if not writer or len(writer) > 255 or not writer.isprintable() or batch_id < 0:
            raise MessageIllegalError("a batch half needs a writer id (1-255 chars) and a batch id")
        self.check_body(data)
        _, queue_id = self.check(topic, queue_id)
        scanned, reason = self.store.scan(BatchInner(topic, queue_id, data))
        if scanned is None:
            raise MessageIllegalError(reason)
        if scanned.delayed:
            raise MessageIllegalError("delay levels are not supported in a batch")
        props = {P.TX_WRITER: writer, P.TX_BATCH: str(batch_id), P.TX_MESSAGES: str(scanned.count)}
        born = born_timestamp if born_timestamp is not None else int(self.clock() * 1000)
        routed = self.route_single(
            topic, queue_id, data, props, born_timestamp=born, born_host=born_host,
            half_group=group,
        )  # fmt: skip
        return self.put_single(routed)

    # -- consumer send-back -----------------------------------------------------------

    def send_back(self, group: str, req: SendBackRequest, *, born_host: bytes) -> Routed:
        """A consumed message comes back: to ``%RETRY%group`` later, or to the DLQ."""
        validate_group(group)
        try:
            _, offset = decode_offset_msg_id(req.offset_msg_id)
        except (ValueError, PyMQError):
            raise MessageIllegalError(f"{req.offset_msg_id!r} is not an offset msgId") from None
        msg = self.store.look_message_by_offset(offset, decompress=False)
        if msg is None:
            raise MessageNotExistError(f"no message at offset msgId {req.offset_msg_id}")
        max_times = (
            req.max_reconsume_times
            if req.max_reconsume_times is not None
            else self._max_reconsume(msg.properties)
        )
        props = dict(msg.properties)
        props.setdefault(P.RETRY_TOPIC, req.origin_topic or msg.topic)
        props.setdefault(P.ORIGIN_MESSAGE_ID, msg.msg_id)
        props[P.MAX_RECONSUME_TIMES] = str(max_times)
        props.pop(P.REAL_TOPIC, None)
        props.pop(P.REAL_QUEUE_ID, None)
        if msg.reconsume_times >= max_times or req.delay_level < 0:
            topic, queue_id = self.topics.dlq_config(group).topic, 0
            props.pop(P.DELAY_TIME_LEVEL, None)
        else:
            topic, queue_id = self.topics.retry_config(group).topic, 0
            level = req.delay_level or 3 + msg.reconsume_times
            props[P.DELAY_TIME_LEVEL] = str(min(level, len(self.delay_levels_ms)))
        return self.route_single(
            topic,
            queue_id,
            msg.body,
            props,
            flag=msg.flag,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=born_host,
            reconsume_times=msg.reconsume_times + 1,
            internal=True,
            # decided above on the consumed message's count, as RocketMQ's
            # consumerSendMsgBack does; re-checking the incremented count here
            # would dead-letter one retry early
            retry_rule=False,
        )
