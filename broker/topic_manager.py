"""The broker's topics: the persisted table, system topics, auto-creation.

RocketMQ's TopicConfigManager: a topic unknown to the broker is created on
first send from the default topic TBW102 when ``auto_create_topic_enable``
(the broker registers TBW102 so producers find a route for new topics);
``%RETRY%group`` and ``%DLQ%group`` topics are created when first needed.
Every change moves the table's data version and asks for a registration, so
NameServers learn about it without waiting for the next heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from broker.config import BrokerConfig
from broker.store.topics import PERM_READ, PERM_WRITE, TopicConfig, TopicConfigTable
from connector.errors import InvalidTopicError
from connector.protocol.names import (
    DEFAULT_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
)
from connector.protocol.route import DataVersion, TopicQueueConfig

__all__ = ["TopicManager"]

log = logging.getLogger(__name__)


class TopicManager:
    def __init__(
        self,
        table: TopicConfigTable,
        config: BrokerConfig,
        *,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.table = table
        self.config = config
        self.on_change = on_change

    def start(self) -> None:
        self.table.load()
        levels = len(self.config.delay_levels_ms)
        self.table.put(TopicConfig(SCHEDULE_TOPIC, levels, levels, PERM_READ | PERM_WRITE))
        if self.config.auto_create_topic_enable:
            n = self.config.default_topic_queue_nums
            self.table.put(TopicConfig(DEFAULT_TOPIC, n, n, PERM_READ | PERM_WRITE))
        else:
            self.table.delete(DEFAULT_TOPIC)

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def all(self) -> list[TopicConfig]:
        return self.table.all()

    def put(self, config: TopicConfig) -> TopicConfig:
        before = self.table.data_version
        stored = self.table.put(config)
        if self.table.data_version != before:
            log.info("topic %s: %s", config.topic, config)
            self._changed()
        return stored

    def delete(self, topic: str) -> bool:
        deleted = self.table.delete(topic)
        if deleted:
            self._changed()
        return deleted

    def replace(self, raw: dict[str, Any]) -> None:
        """Take a master's whole table (a slave, from HA); registers again if it changed."""
        if self.table.replace(raw):
            self._changed()

    def auto_create_config(self, topic: str) -> TopicConfig | None:
        """The config a topic first seen in a send would get (from TBW102), not yet stored.

        The send path stores it only once the message is stored, so a
        rejected send never leaves a topic behind.
        """
        if not self.config.auto_create_topic_enable:
            return None
        default = self.table.get(DEFAULT_TOPIC)
        if default is None or not default.writable:
            return None
        queues = min(self.config.default_topic_queue_nums, default.write_queue_nums)
        return TopicConfig(topic, queues, queues, PERM_READ | PERM_WRITE)

    def retry_config(self, group: str) -> TopicConfig:
        topic = RETRY_GROUP_TOPIC_PREFIX + group
        return self.table.get(topic) or TopicConfig(topic, 1, 1, PERM_READ | PERM_WRITE)

    def ensure_retry_topic(self, group: str) -> bool:
        """Create ``%RETRY%group`` (1 queue) if it is missing, as RocketMQ's broker does
        when a consumer group heartbeats: its push consumers look up that topic's route
        as they start. False when ``%RETRY%`` + the group's name is too long for a topic
        (a group name may have 127 characters): the group goes without one."""
        if not self.config.broker_role.is_master:
            return False  # a slave's topics are its master's
        try:
            self.ensure(self.retry_config(group))
        except InvalidTopicError:
            log.debug("group %s has a name too long for a retry topic", group)
            return False
        return True

    def dlq_config(self, group: str) -> TopicConfig:
        topic = DLQ_GROUP_TOPIC_PREFIX + group
        return self.table.get(topic) or TopicConfig(topic, 1, 1, PERM_READ | PERM_WRITE)

    def ensure(self, config: TopicConfig) -> None:
        """Store ``config`` unless its topic exists (a concurrent send may have made it)."""
        if self.table.get(config.topic) is None:
            self.put(config)

    def data_version(self) -> DataVersion:
        ts, counter = self.table.data_version
        return DataVersion(timestamp=ts, counter=counter)

    def registration_topics(self) -> dict[str, TopicQueueConfig]:
        """Every topic with its queues and permission, as a NameServer wants them."""
        perm_mask = self.config.broker_permission
        return {
            cfg.topic: TopicQueueConfig(
                read_queue_nums=cfg.read_queue_nums,
                write_queue_nums=cfg.write_queue_nums,
                perm=cfg.perm & perm_mask,
                topic_sys_flag=cfg.topic_sys_flag,
                order=cfg.order,
            )
            for cfg in self.table.all()
        }
