"""Topic configuration, persisted as ``config/topics.json``.

Each topic has read/write queue counts and a permission (RocketMQ's PermName:
2 = write, 4 = read, 6 = both). The table carries a data version that moves
on every change, which is what a NameServer compares to decide whether a
broker's registration brings new route data.
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from broker.store.files import load_json, save_json
from connector.errors import ConfigError
from connector.protocol.names import validate_topic

__all__ = ["PERM_READ", "PERM_WRITE", "TopicConfig", "TopicConfigTable"]

PERM_WRITE = 2
PERM_READ = 4
DEFAULT_QUEUE_NUMS = 8
MAX_QUEUE_NUMS = 1024


@dataclass(frozen=True, slots=True)
class TopicConfig:
    topic: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    order: bool = False

    def __post_init__(self) -> None:
        validate_topic(self.topic)
        for name in ("read_queue_nums", "write_queue_nums"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= MAX_QUEUE_NUMS:
                raise ConfigError(f"{name} must be an integer in 1..{MAX_QUEUE_NUMS}")
        if self.perm not in (0, PERM_WRITE, PERM_READ, PERM_READ | PERM_WRITE):
            raise ConfigError("perm must be 0, 2 (write), 4 (read) or 6 (read+write)")

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)


class TopicConfigTable:
    """Thread-safe topic table; every change is written atomically before it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._topics: dict[str, TopicConfig] = {}
        self.data_version = (int(time.time() * 1000), 0)

    def load(self) -> None:
        raw = load_json(self.path)
        if not isinstance(raw, dict):
            return
        topics: dict[str, TopicConfig] = {}
        for item in raw.get("topics", {}).values():
            topics[item["topic"]] = TopicConfig(**item)
        version = raw.get("data_version", [0, 0])
        with self._lock:
            self._topics = topics
            self.data_version = (int(version[0]), int(version[1]))

    def _persist(self) -> None:
        payload: dict[str, Any] = {
            "data_version": list(self.data_version),
            "topics": {name: asdict(cfg) for name, cfg in sorted(self._topics.items())},
        }
        save_json(self.path, payload)

    def get(self, topic: str) -> TopicConfig | None:
        return self._topics.get(topic)

    def all(self) -> list[TopicConfig]:
        return sorted(self._topics.values(), key=lambda c: c.topic)

    def put(self, config: TopicConfig) -> TopicConfig:
        with self._lock:
            if self._topics.get(config.topic) == config:
                return config
            self._topics[config.topic] = config
            self.data_version = (int(time.time() * 1000), self.data_version[1] + 1)
            self._persist()
        return config

    def snapshot(self) -> dict[str, Any]:
        """The table in its file's form (the HA master sends it to its slaves)."""
        with self._lock:
            return {
                "data_version": list(self.data_version),
                "topics": {name: asdict(cfg) for name, cfg in sorted(self._topics.items())},
            }

    def replace(self, raw: dict[str, Any]) -> bool:
        """Take a master's table whole (a slave); True if anything changed."""
        topics = {item["topic"]: TopicConfig(**item) for item in raw.get("topics", {}).values()}
        version = raw.get("data_version", [0, 0])
        with self._lock:
            if topics == self._topics:
                return False
            self._topics = topics
            self.data_version = (int(version[0]), int(version[1]))
            self._persist()
        return True

    def delete(self, topic: str) -> bool:
        with self._lock:
            if self._topics.pop(topic, None) is None:
                return False
            self.data_version = (int(time.time() * 1000), self.data_version[1] + 1)
            self._persist()
        return True
