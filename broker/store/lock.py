"""The store's lock: one process owns a store directory at a time (RocketMQ's ``lock``
file). The lock is an ``flock`` on ``<store>/lock``, which the kernel releases when
the holder exits, even killed; the file holds the holder's pid so a refused process
can name it. A second broker on a live store is refused before it reads or writes
anything else there (today it would recover the live files and, on stopping,
delete the live broker's ``abort`` file).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from connector.errors import StoreLockedError

__all__ = ["StoreLock"]

LOCK_FILE = "lock"


class StoreLock:
    def __init__(self, store_dir: Path) -> None:
        self.path = Path(store_dir) / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock (creating the store directory if new), or StoreLockedError."""
        if self._fd is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise StoreLockedError(
                f"store {self.path.parent} is in use by {who} (it holds {self.path})", pid=holder
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    @staticmethod
    def _holder(fd: int) -> int:
        raw = os.pread(fd, 32, 0).strip()
        return int(raw) if raw.isdigit() else 0

    def release(self) -> None:
        """Let go (the file stays: removing it would race with a process locking it)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
