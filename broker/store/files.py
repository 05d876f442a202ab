"""File naming and atomic writes: the one module that owns both.

Segment files are named by their 20-digit zero-padded start offset. Config
files are replaced atomically: write a temp file, fsync it, keep the previous
version as ``.bak``, rename the temp over the original, fsync the directory.
Writers of the same file take turns (one lock a path): two threads sharing the
temp name would otherwise rename it from under each other.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from pathlib import Path
from typing import Any

__all__ = ["atomic_write", "file_name", "load_json", "parse_file_name", "save_json"]

log = logging.getLogger(__name__)
_NAME_DIGITS = 20
# a lock lives while a writer holds it: paths of stores long gone leave nothing behind
_write_locks: weakref.WeakValueDictionary[Path, threading.Lock] = weakref.WeakValueDictionary()
_write_locks_guard = threading.Lock()


def file_name(offset: int) -> str:
    """``00000000001073741824`` for offset 1073741824."""
    return f"{offset:0{_NAME_DIGITS}d}"


def parse_file_name(name: str) -> int | None:
    """The start offset a segment name encodes, or None for other files."""
    if len(name) != _NAME_DIGITS or not name.isdigit():
        return None
    return int(name)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, keep_backup: bool = True) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old or the new file, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _write_lock(path):
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if keep_backup and path.exists():
            bak = path.with_name(path.name + ".bak")
            os.replace(path, bak)
        os.replace(tmp, path)
        fsync_dir(path.parent)


def _write_lock(path: Path) -> threading.Lock:
    key = path.absolute()
    with _write_locks_guard:
        lock = _write_locks.get(key)
        if lock is None:
            lock = _write_locks[key] = threading.Lock()
        return lock


def save_json(path: Path, value: Any) -> None:
    atomic_write(path, json.dumps(value, indent=1, sort_keys=True).encode("utf-8"))


def load_json(path: Path) -> Any | None:
    """Load ``path``, or its ``.bak`` when it is missing or unreadable; None if neither."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            return json.loads(candidate.read_bytes())
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            log.warning("config file %s is unreadable (%s); trying its backup", candidate, exc)
    return None
