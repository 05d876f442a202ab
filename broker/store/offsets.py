"""Consumer group offsets, persisted as ``config/consumerOffset.json``.

Keys are ``topic@group`` with a ``{queueId: offset}`` map, RocketMQ's layout.
Commits update memory at once; ``persist()`` (called periodically and at
shutdown) writes the file atomically. ``commit(..., flush=True)`` persists
before returning, for callers that need the offset on disk now.
"""

from __future__ import annotations

import threading
from pathlib import Path

from broker.store.files import load_json, save_json
from connector.errors import InvalidOffsetError
from connector.protocol.names import validate_group, validate_topic

__all__ = ["ConsumerOffsetTable"]


class ConsumerOffsetTable:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._persist_lock = threading.Lock()  # snapshots reach the file in the order taken
        self._offsets: dict[str, dict[int, int]] = {}
        self._dirty = False
        self.version = 0  # moves with every change (the HA master sends a changed table)
        # a slave keeps the commits its consumers made on it, to hand them to its master
        self.track_local = False
        self._local: dict[str, dict[int, int]] = {}

    @property
    def dirty(self) -> bool:
        """Changed since the last ``persist``."""
        return self._dirty

    @staticmethod
    def key(topic: str, group: str) -> str:
        return f"{validate_topic(topic)}@{validate_group(group)}"

    def load(self) -> None:
        raw = load_json(self.path)
        if not isinstance(raw, dict):
            return
        table = {
            str(k): {int(q): int(o) for q, o in v.items()}
            for k, v in raw.get("offset_table", {}).items()
        }
        with self._lock:
            self._offsets = table

    def commit(
        self, topic: str, group: str, queue_id: int, offset: int, *, flush: bool = False
    ) -> None:
        if offset < 0:
            raise InvalidOffsetError(f"offset {offset} is negative")
        if queue_id < 0:
            raise InvalidOffsetError(f"queue id {queue_id} is negative")
        key = self.key(topic, group)
        with self._lock:
            self._offsets.setdefault(key, {})[queue_id] = offset
            self._dirty = True
            self.version += 1
            if self.track_local:
                self._local.setdefault(key, {})[queue_id] = offset
        if flush:
            self.persist()

    def query(self, topic: str, group: str, queue_id: int) -> int:
        """The committed offset, or -1 if the group never committed this queue."""
        return self._offsets.get(self.key(topic, group), {}).get(queue_id, -1)

    def groups(self) -> list[tuple[str, str]]:
        """(topic, group) pairs that have committed offsets."""
        out = []
        for key in self._offsets:
            topic, _, group = key.partition("@")
            out.append((topic, group))
        return sorted(out)

    def table(self, topic: str, group: str) -> dict[int, int]:
        return dict(self._offsets.get(self.key(topic, group), {}))

    def delete_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self._offsets if k.partition("@")[0] == topic]:
                del self._offsets[key]
                self._dirty = True
                self.version += 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        """The whole table in its JSON form (``topic@group`` -> {queue id: offset})."""
        with self._lock:
            return {k: {str(q): o for q, o in v.items()} for k, v in self._offsets.items()}

    def replace(self, table: dict[str, dict[str, int]]) -> None:
        """Take a master's table (a slave); commits made here and not yet handed to the
        master stay on top of it."""
        parsed = {str(k): {int(q): int(o) for q, o in v.items()} for k, v in table.items()}
        with self._lock:
            for key, queues in self._local.items():
                parsed.setdefault(key, {}).update(queues)
            if parsed != self._offsets:
                self._offsets = parsed
                self._dirty = True
                self.version += 1

    def take_local(self) -> dict[str, dict[str, int]]:
        """The commits made on this slave since the last call (to send to the master)."""
        with self._lock:
            local, self._local = self._local, {}
        return {k: {str(q): o for q, o in v.items()} for k, v in local.items()}

    def restore_local(self, local: dict[str, dict[str, int]]) -> None:
        """Commits taken but not delivered (the connection dropped): keep them."""
        with self._lock:
            for key, queues in local.items():
                mine = self._local.setdefault(key, {})
                for q, o in queues.items():
                    mine.setdefault(int(q), int(o))

    def merge(self, table: dict[str, dict[str, int]]) -> int:
        """Apply commits a slave took while its consumers read there; how many."""
        n = 0
        for key, queues in table.items():
            topic, _, group = key.partition("@")
            for q, o in queues.items():
                self.commit(topic, group, int(q), int(o))
                n += 1
        return n

    def persist(self) -> None:
        with self._persist_lock:
            with self._lock:
                self._dirty = False
            save_json(self.path, {"offset_table": self.snapshot()})
