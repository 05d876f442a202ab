"""The NameServer's KV config (RocketMQ's ``KVConfigManager``): namespace -> key -> value.

Used for cluster-wide settings such as ordered-topic configs (namespace
``ORDER_TOPIC_CONFIG``). Every put or delete rewrites ``kvConfig.json``
atomically: a temp file in the same directory is written and fsynced, the
previous file is kept as ``.bak``, then the temp file is renamed over the
original. Startup reads the file, or its ``.bak`` when the file is missing or
garbage, and never fails on a bad file (it logs a warning and starts empty).

File format: ``{"config_table": {"<namespace>": {"<key>": "<value>"}}}``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from pathlib import Path

from connector.errors import ClientError, InvalidKeyError, KvConfigNotExistError

__all__ = ["MAX_VALUE_BYTES", "KvConfigManager", "validate_kv_name"]

log = logging.getLogger(__name__)

MAX_VALUE_BYTES = 64 * 1024
_NAME_RE = re.compile(r"^[A-Za-z0-9_.%|-]{1,255}$")


def validate_kv_name(kind: str, name: object) -> str:
    """Return ``name`` if it is a legal namespace/key, else raise InvalidKeyError."""
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidKeyError(f"kv {kind} {name!r} must be 1-255 chars of [A-Za-z0-9_.%|-]")
    return name


def _check_value(value: object) -> str:
    if not isinstance(value, str):
        raise ClientError("a kv value must be a string")
    size = len(value.encode("utf-8"))
    if size > MAX_VALUE_BYTES:
        raise ClientError(f"kv value of {size} bytes exceeds the limit of {MAX_VALUE_BYTES} bytes")
    return value


class KvConfigManager:
    """Thread-safe KV config, persisted to ``path`` (None: in memory only).

    Reads take a short lock and never wait for a disk write; writes are
    serialized so the file always holds the latest state in full.
    """

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._table_lock = threading.Lock()  # guards _table; held for dict work only
        self._write_lock = threading.Lock()  # serializes change + file write
        self._table: dict[str, dict[str, str]] = self._load() if path is not None else {}

    @property
    def path(self) -> Path | None:
        return self._path

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set ``namespace/key`` to ``value`` (at most 64 KiB of UTF-8) and persist."""
        validate_kv_name("namespace", namespace)
        validate_kv_name("key", key)
        _check_value(value)
        with self._write_lock:
            with self._table_lock:
                self._table.setdefault(namespace, {})[key] = value
                snapshot = self._dump()
            self._persist(snapshot)
        log.info("kv config put %s/%s", namespace, key)

    def delete(self, namespace: str, key: str) -> bool:
        """Remove ``namespace/key`` and persist; False if it did not exist."""
        validate_kv_name("namespace", namespace)
        validate_kv_name("key", key)
        with self._write_lock:
            with self._table_lock:
                entries = self._table.get(namespace)
                if entries is None or entries.pop(key, None) is None:
                    return False
                if not entries:
                    del self._table[namespace]
                snapshot = self._dump()
            self._persist(snapshot)
        log.info("kv config deleted %s/%s", namespace, key)
        return True

    def get(self, namespace: str, key: str) -> str:
        """The value of ``namespace/key``; KvConfigNotExistError (404) when unset."""
        validate_kv_name("namespace", namespace)
        validate_kv_name("key", key)
        value = self.find(namespace, key)
        if value is None:
            raise KvConfigNotExistError(f"no kv config {namespace}/{key}")
        return value

    def find(self, namespace: str, key: str) -> str | None:
        """The value of ``namespace/key`` or None (no name checks: a lookup never fails)."""
        with self._table_lock:
            return self._table.get(namespace, {}).get(key)

    def namespace(self, namespace: str) -> dict[str, str]:
        """A copy of every key/value of ``namespace`` (empty if unknown)."""
        validate_kv_name("namespace", namespace)
        with self._table_lock:
            return dict(self._table.get(namespace, {}))

    # -- persistence --------------------------------------------------------------------------

    def _dump(self) -> bytes:
        return json.dumps({"config_table": self._table}, indent=1, sort_keys=True).encode()

    def _persist(self, data: bytes) -> None:
        path = self._path
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            os.replace(path, path.with_name(path.name + ".bak"))
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _load(self) -> dict[str, dict[str, str]]:
        assert self._path is not None
        failed = False
        for candidate in (self._path, self._path.with_name(self._path.name + ".bak")):
            try:
                table = _parse_table(json.loads(candidate.read_bytes()))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                log.warning("kv config file %s is unreadable (%s)", candidate, exc)
                failed = True
                continue
            if failed:
                log.warning("kv config loaded from the backup %s", candidate)
            return table
        if failed:
            log.warning("no readable kv config at %s; starting empty", self._path)
        return {}


def _parse_table(raw: object) -> dict[str, dict[str, str]]:
    """The table of a loaded file, or ValueError if the shape or a name is wrong."""
    table = raw.get("config_table") if isinstance(raw, dict) else None
    if not isinstance(table, dict):
        raise ValueError("no config_table object")
    out: dict[str, dict[str, str]] = {}
    for namespace, entries in table.items():
        if not isinstance(entries, dict):
            raise ValueError(f"namespace {namespace!r} is not an object")
        validate_kv_name("namespace", namespace)
        for key, value in entries.items():
            validate_kv_name("key", key)
            if not isinstance(value, str):
                raise ValueError(f"value of {namespace}/{key} is not a string")
        if entries:
            out[namespace] = dict(entries)
    return out
