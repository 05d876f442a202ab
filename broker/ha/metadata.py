"""What a slave needs besides the CommitLog: topics, consumer offsets, delay progress.

The master sends the whole set when a slave connects and again whenever
any of it changed (looked at every ``ha_metadata_interval_ms``, 200 ms by
default), so a consumer that moves to the slave finds its group's offsets
there (RocketMQ copies them every 60 s, and consumers re-read after a
failover). Offsets committed on a slave (its consumers read there while the
master was down) go the other way, merged into the master's table, so a
consumer that moves back does not re-read what it committed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from broker.store.offsets import ConsumerOffsetTable

if TYPE_CHECKING:
    from broker.schedule import ScheduleMessageService
    from broker.topic_manager import TopicManager

__all__ = ["HAMetadata"]

log = logging.getLogger(__name__)


class HAMetadata:
    def __init__(
        self,
        topics: TopicManager,
        offsets: ConsumerOffsetTable,
        schedule: ScheduleMessageService,
    ) -> None:
        self.topics = topics
        self.offsets = offsets
        self.schedule = schedule

    def version(self) -> tuple[Any, ...]:
        """Changes whenever anything ``snapshot`` holds changed."""
        return (
            self.topics.table.data_version,
            self.offsets.version,
            tuple(sorted(self.schedule.offsets.items())),
        )

    def snapshot(self) -> dict[str, Any]:
        return {
            "topics": self.topics.table.snapshot(),
            "offsets": self.offsets.snapshot(),
            "delay": {str(k): v for k, v in sorted(self.schedule.offsets.items())},
        }

    def apply(self, meta: dict[str, Any]) -> None:
        """A slave takes its master's set (topics are saved at once; offsets and delay
        progress on the broker's periodic persist)."""
        topics = meta.get("topics")
        if isinstance(topics, dict):
            self.topics.replace(topics)
        offsets = meta.get("offsets")
        if isinstance(offsets, dict):
            self.offsets.replace(offsets)
        delay = meta.get("delay")
        if isinstance(delay, dict):
            self.schedule.offsets = {int(k): int(v) for k, v in delay.items()}

    def merge_from_slave(self, meta: dict[str, Any]) -> None:
        """A master takes the offsets a slave's consumers committed there."""
        offsets = meta.get("offsets")
        if isinstance(offsets, dict) and offsets:
            n = self.offsets.merge(offsets)
            log.info("HA: took %d consumer offset(s) committed on a slave", n)
