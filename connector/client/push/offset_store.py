"""Where a push consumer keeps its progress: on the brokers (clustering,
RocketMQ's RemoteBrokerOffsetStore) or in a local file (broadcasting,
LocalFileOffsetStore).

Both keep the latest offset per queue in memory (updated as batches are
consumed) and persist every ``persist_consumer_offset_interval_ms`` and at
shutdown. The file is written crash-safe: a temporary file, fsync, rename
over the old one, fsync of the directory; a reader sees the old or the new
content, never a torn one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import orjson

from connector.errors import PyMQError
from connector.protocol.message import MessageQueue

__all__ = ["LocalFileOffsetStore", "OffsetStore", "RemoteOffsetStore"]

log = logging.getLogger(__name__)


class OffsetStore:
    """The in-memory table both kinds share."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        if offset < 0:
            return
        with self._lock:
            old = self._table.get(mq, -1)
            if not increase_only or offset > old:
                self._table[mq] = offset

    def get(self, mq: MessageQueue) -> int:
        """The offset in memory, -1 if none."""
        with self._lock:
            return self._table.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        with self._lock:
            self._table.pop(mq, None)

    def snapshot(self, mqs: Iterable[MessageQueue] | None = None) -> dict[MessageQueue, int]:
        with self._lock:
            if mqs is None:
                return dict(self._table)
            return {mq: self._table[mq] for mq in mqs if mq in self._table}

    def read(self, mq: MessageQueue) -> int:
        """The persisted offset (-1: none), now also in memory."""
        raise NotImplementedError

    def persist(self, mqs: Iterable[MessageQueue]) -> None:
        raise NotImplementedError


class RemoteOffsetStore(OffsetStore):
    """Offsets on the brokers: ``fetch(mq)`` and ``commit(mq, offset)`` do the IO."""

    def __init__(
        self, fetch: Callable[[MessageQueue], int], commit: Callable[[MessageQueue, int], None]
    ) -> None:
        super().__init__()
        self._fetch = fetch
        self._commit = commit
        self._persisted: dict[MessageQueue, int] = {}

    def read(self, mq: MessageQueue) -> int:
        offset = self._fetch(mq)
        if offset >= 0:
            self.update(mq, offset, increase_only=False)
        return offset

    def remove(self, mq: MessageQueue) -> None:
        super().remove(mq)
        self._persisted.pop(mq, None)  # taken again later: commit whatever it has then

    def persist(self, mqs: Iterable[MessageQueue]) -> None:
        for mq, offset in self.snapshot(mqs).items():
            if self._persisted.get(mq) == offset:
                continue
            try:
                self._commit(mq, offset)
                self._persisted[mq] = offset
            except PyMQError as exc:
                log.warning("committing offset %d of %s failed: %s", offset, mq, exc)


def _key(mq: MessageQueue) -> str:
    return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"


class LocalFileOffsetStore(OffsetStore):
    """Offsets in ``path`` (JSON ``{"offsetTable": {"topic@broker@queue": offset}}``)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self._file_lock = threading.Lock()
        self._loaded = self._load()

    def _load(self) -> dict[str, int]:
        try:
            raw = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("offset file %s unreadable (%s): starting without it", self.path, exc)
            return {}
        table = raw.get("offsetTable", {}) if isinstance(raw, dict) else {}
        return {str(k): int(v) for k, v in table.items()}

    def read(self, mq: MessageQueue) -> int:
        offset = self._loaded.get(_key(mq), -1)
        if offset >= 0:
            self.update(mq, offset, increase_only=False)
        return offset

    def persist(self, mqs: Iterable[MessageQueue]) -> None:
        with self._file_lock:
            table = dict(self._loaded)
            table.update({_key(mq): off for mq, off in self.snapshot(mqs).items()})
            if table == self._loaded and self.path.exists():
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            data = orjson.dumps({"offsetTable": table}, option=orjson.OPT_SORT_KEYS)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            with contextlib.suppress(OSError):  # not every platform opens directories
                fd = os.open(self.path.parent, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            self._loaded = table
