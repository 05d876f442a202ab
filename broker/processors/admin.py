"""Admin and query path: topics, queue offsets, consumer offsets, lookups.

RocketMQ's AdminBrokerProcessor and QueryMessageProcessor: topic
create/update/delete, per-queue min/max offsets, search by timestamp,
message by offset msgId or by key, consumer offsets and lag.
"""

from __future__ import annotations

from broker.config import BrokerConfig
from broker.store.offsets import ConsumerOffsetTable
from broker.store.store import MessageStore
from broker.store.topics import TopicConfig
from broker.topic_manager import TopicManager
from connector.errors import (
    ConsumerOffsetNotExistError,
    InvalidQueueError,
    InvalidTopicError,
    MessageIllegalError,
    MessageNotExistError,
    PyMQError,
    TopicNotExistError,
)
from connector.protocol.message import MessageExt
from connector.protocol.msgid import decode_offset_msg_id, is_msg_id
from connector.protocol.names import DEFAULT_TOPIC, SCHEDULE_TOPIC, validate_group, validate_topic
from connector.protocol.rest import (
    ConsumerOffset,
    ConsumerProgress,
    QueueProgress,
    QueueStatus,
    TopicConfigBody,
    TopicStatus,
)

__all__ = ["AdminProcessor"]

_PROTECTED = frozenset({DEFAULT_TOPIC, SCHEDULE_TOPIC})


class AdminProcessor:
    def __init__(
        self,
        store: MessageStore,
        topics: TopicManager,
        offsets: ConsumerOffsetTable,
        config: BrokerConfig,
    ) -> None:
        self.store = store
        self.topics = topics
        self.offsets = offsets
        self.config = config

    # -- topics ----------------------------------------------------------------------

    def topic_config(self, topic: str) -> TopicConfig:
        validate_topic(topic)
        cfg = self.topics.get(topic)
        if cfg is None:
            raise TopicNotExistError(f"topic {topic} does not exist on {self.config.broker_name}")
        return cfg

    def put_topic(self, topic: str, body: TopicConfigBody) -> TopicStatus:
        validate_topic(topic)
        if topic in _PROTECTED:
            raise InvalidTopicError(f"topic {topic} is managed by the broker")
        cfg = TopicConfig(topic, body.read_queue_nums, body.write_queue_nums, body.perm,
                          order=body.order)  # fmt: skip
        self.topics.put(cfg)
        return self.topic_status(topic)

    def delete_topic(self, topic: str) -> None:
        self.topic_config(topic)
        if topic in _PROTECTED:
            raise InvalidTopicError(f"topic {topic} is managed by the broker")
        self.topics.delete(topic)
        self.store.delete_topic(topic)
        self.offsets.delete_topic(topic)
        self.offsets.persist()

    def queue_status(self, topic: str, queue_id: int) -> QueueStatus:
        lo = self.store.get_min_offset_in_queue(topic, queue_id)
        hi = self.store.get_max_offset_in_queue(topic, queue_id)
        last = self.store.get_store_timestamp(topic, queue_id, hi - 1) if hi > lo else 0
        return QueueStatus(queue_id=queue_id, min_offset=lo, max_offset=hi,
                           last_update_timestamp=max(last, 0))  # fmt: skip

    def topic_status(self, topic: str) -> TopicStatus:
        cfg = self.topic_config(topic)
        n = max(cfg.read_queue_nums, cfg.write_queue_nums)
        return TopicStatus(
            topic=topic,
            read_queue_nums=cfg.read_queue_nums,
            write_queue_nums=cfg.write_queue_nums,
            perm=cfg.perm,
            order=cfg.order,
            queues=[self.queue_status(topic, q) for q in range(n)],
        )

    def topic_list(self) -> list[TopicStatus]:
        return [
            TopicStatus(topic=c.topic, read_queue_nums=c.read_queue_nums,
                        write_queue_nums=c.write_queue_nums, perm=c.perm, order=c.order)
            for c in self.topics.all()
        ]  # fmt: skip

    def check_queue(self, topic: str, queue_id: int) -> TopicConfig:
        cfg = self.topic_config(topic)
        if not 0 <= queue_id < max(cfg.read_queue_nums, cfg.write_queue_nums):
            raise InvalidQueueError(f"topic {topic} has no queue {queue_id}")
        return cfg

    def search_offset(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        self.check_queue(topic, queue_id)
        return self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)

    # -- lookups -----------------------------------------------------------------------

    def message_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """The message ``msg_id`` names: an offset msgId of this broker's store, or the
        msgId a send returns (UNIQ_KEY), looked up in the index of ``topic`` (of every
        topic when None), as RocketMQ's queryMsgById takes either."""
        if not is_msg_id(msg_id):
            raise MessageIllegalError(f"{msg_id!r} is not a msgId (32 hex characters)")
        try:
            _, offset = decode_offset_msg_id(msg_id)
        except PyMQError:  # a UNIQ_KEY whose bytes are no offset
            offset = -1
        msg = self.store.look_message_by_offset(offset) if offset >= 0 else None
        if msg is not None and msg.offset_msg_id.upper() == msg_id.upper():
            return msg
        if topic is not None:
            validate_topic(topic)
        for name in [topic] if topic else sorted(c.topic for c in self.topics.all()):
            for found in self.store.query_message(name, msg_id, 32):
                if found.msg_id.upper() == msg_id.upper():
                    return found
        raise MessageNotExistError(f"no message with msgId {msg_id} on {self.config.broker_name}")

    def record_by_id(self, msg_id: str, topic: str | None = None) -> tuple[MessageExt, bytes]:
        """``message_by_id`` and its stored record, byte for byte (what
        CONSUME_MESSAGE_DIRECTLY carries to a consumer)."""
        msg = self.message_by_id(msg_id, topic)
        record = self.store.read_record(msg.commit_log_offset)
        if record is None:
            raise MessageNotExistError(f"the record of {msg_id} is gone")
        return msg, record

    def messages_by_key(self, topic: str, key: str, max_num: int = 32) -> list[MessageExt]:
        validate_topic(topic)
        return self.store.query_message(topic, key, max(1, min(max_num, 1000)))

    # -- consumer offsets --------------------------------------------------------------

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> ConsumerOffset:
        validate_group(group)
        self.check_queue(topic, queue_id)
        self.offsets.commit(topic, group, queue_id, offset)
        return ConsumerOffset(group=group, topic=topic, queue_id=queue_id, offset=offset)

    def query_offset(self, group: str, topic: str, queue_id: int) -> ConsumerOffset:
        validate_group(group)
        self.check_queue(topic, queue_id)
        offset = self.offsets.query(topic, group, queue_id)
        if offset < 0:
            raise ConsumerOffsetNotExistError(f"group {group} has no offset for {topic}:{queue_id}")
        return ConsumerOffset(group=group, topic=topic, queue_id=queue_id, offset=offset)

    def progress(self, group: str) -> ConsumerProgress:
        """Per queue the group committed: broker max offset, committed offset, lag."""
        validate_group(group)
        rows: list[QueueProgress] = []
        for topic, g in self.offsets.groups():
            if g != group or self.topics.get(topic) is None:
                continue
            for queue_id, committed in sorted(self.offsets.table(topic, group).items()):
                hi = self.store.get_max_offset_in_queue(topic, queue_id)
                last = self.store.get_store_timestamp(topic, queue_id, committed - 1)
                rows.append(
                    QueueProgress(
                        topic=topic,
                        queue_id=queue_id,
                        broker_offset=hi,
                        consumer_offset=committed,
                        lag=max(0, hi - committed),
                        last_timestamp=max(last, 0),
                    )
                )
        return ConsumerProgress(group=group, total_lag=sum(r.lag for r in rows), queues=rows)
