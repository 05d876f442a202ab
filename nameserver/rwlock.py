"""A writer-preferring read/write lock for the route tables.

Many readers hold it together; a writer holds it alone. Once a writer waits,
new readers queue behind it, so a steady stream of route lookups cannot
starve broker registrations. Not reentrant: a thread holding the read lock
must not take it again while a writer may be waiting.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RWLock"]


class RWLock:
    """Readers concurrent, writers exclusive, waiting writers go first."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    def acquire_read(self, timeout: float | None = None) -> bool:
        """Take a shared hold; False if ``timeout`` (seconds) passed first."""
        with self._cond:
            ok = self._cond.wait_for(
                lambda: not self._writer and self._writers_waiting == 0, timeout
            )
            if ok:
                self._readers += 1
            return ok

    def release_read(self) -> None:
        with self._cond:
            if self._readers <= 0:
                raise RuntimeError("release_read without a read hold")
            self._readers -= 1
            if self._readers == 0:
                self._cond.notify_all()

    def acquire_write(self, timeout: float | None = None) -> bool:
        """Take the exclusive hold; False if ``timeout`` (seconds) passed first."""
        with self._cond:
            self._writers_waiting += 1
            try:
                ok = self._cond.wait_for(lambda: not self._writer and self._readers == 0, timeout)
            finally:
                self._writers_waiting -= 1
            if ok:
                self._writer = True
            else:
                # readers held back by this writer may go now
                self._cond.notify_all()
            return ok

    def release_write(self) -> None:
        with self._cond:
            if not self._writer:
                raise RuntimeError("release_write without the write hold")
            self._writer = False
            self._cond.notify_all()

    @contextmanager
    def read(self) -> Iterator[None]:
        """``with lock.read():`` — a shared hold for the block."""
        self.acquire_read()
        try:
            yield
        finally:
            self.release_read()

    @contextmanager
    def write(self) -> Iterator[None]:
        """``with lock.write():`` — the exclusive hold for the block."""
        self.acquire_write()
        try:
            yield
        finally:
            self.release_write()
