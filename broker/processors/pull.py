"""Pull path: read a queue by logical offset (RocketMQ's PullMessageProcessor).

The store answers with a GetMessageStatus; here it becomes what a consumer
acts on: FOUND, NO_NEW_MSG (long-poll-able), NO_MATCHED_MSG (the tag filter
skipped what is there: go on from ``next_begin_offset``), or an illegal
offset, which is an error carrying the queue's bounds so the caller can
correct itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.config import BrokerConfig
from broker.store.read_result import GetMessageResult
from broker.store.results import GetMessageStatus
from broker.store.store import MessageStore
from broker.store.topics import PERM_READ, TopicConfig
from broker.topic_manager import TopicManager
from connector.errors import (
    InvalidOffsetError,
    InvalidQueueError,
    NoPermissionError,
    TopicNotExistError,
)
from connector.protocol.hashing import tags_code
from connector.protocol.names import validate_topic
from connector.protocol.status import PullStatus

__all__ = ["PullMessageProcessor", "PullOutcome"]

S = GetMessageStatus


@dataclass(slots=True)
class PullOutcome:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    result: GetMessageResult | None = None


class PullMessageProcessor:
    def __init__(self, store: MessageStore, topics: TopicManager, config: BrokerConfig) -> None:
        self.store = store
        self.topics = topics
        self.config = config

    def check(self, topic: str, queue_id: int) -> TopicConfig:
        if not self.config.broker_permission & PERM_READ:
            raise NoPermissionError(f"broker {self.config.broker_name} is not readable")
        validate_topic(topic)
        cfg = self.topics.get(topic)
        if cfg is None:
            raise TopicNotExistError(f"topic {topic} does not exist on {self.config.broker_name}")
        if not cfg.readable:
            raise NoPermissionError(f"topic {topic} is not readable")
        if not 0 <= queue_id < max(cfg.read_queue_nums, cfg.write_queue_nums):
            raise InvalidQueueError(
                f"queue {queue_id} does not exist: topic {topic} has {cfg.read_queue_nums} queues"
            )
        return cfg

    def pull(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int = 32,
        *,
        tags: frozenset[str] | None = None,
        max_bytes: int | None = None,
    ) -> PullOutcome:
        """Up to ``max_nums`` messages from ``offset``; errors for offsets outside the queue."""
        self.check(topic, queue_id)
        if offset < 0:
            lo = self.store.get_min_offset_in_queue(topic, queue_id)
            hi = self.store.get_max_offset_in_queue(topic, queue_id)
            raise InvalidOffsetError(
                f"offset {offset} is negative",
                min_offset=lo,
                max_offset=hi,
                next_begin_offset=lo,
            )
        max_nums = max(1, min(max_nums, self.config.max_pull_nums))
        codes = None if tags is None else [tags_code(t) for t in tags]
        res = self.store.get_message(
            topic,
            queue_id,
            offset,
            max_nums,
            tags_codes=codes,
            max_bytes=min(max_bytes or self.config.max_pull_bytes, self.config.max_pull_bytes),
        )
        lo, hi = res.min_offset, res.max_offset
        st = res.status
        if st is S.FOUND:
            return PullOutcome(PullStatus.FOUND, res.next_begin_offset, lo, hi, res)
        if st in (S.NO_MATCHED_LOGIC_QUEUE, S.NO_MESSAGE_IN_QUEUE) and offset == 0:
            return PullOutcome(PullStatus.NO_NEW_MSG, 0, lo, hi)
        if st is S.OFFSET_OVERFLOW_ONE:
            return PullOutcome(PullStatus.NO_NEW_MSG, offset, lo, hi)
        if st in (S.NO_MATCHED_MESSAGE, S.OFFSET_FOUND_NULL):
            return PullOutcome(PullStatus.NO_MATCHED_MSG, res.next_begin_offset, lo, hi)
        # OFFSET_TOO_SMALL, OFFSET_OVERFLOW_BADLY, MESSAGE_WAS_REMOVING, empty queue from > 0
        next_begin = lo if offset < lo or st is S.MESSAGE_WAS_REMOVING else hi
        raise InvalidOffsetError(
            f"offset {offset} is outside queue {topic}:{queue_id} [{lo}, {hi})",
            min_offset=lo,
            max_offset=hi,
            next_begin_offset=next_begin,
        )
