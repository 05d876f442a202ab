"""Background flushers.

* ``FlushRealTimeService`` (ASYNC_FLUSH): every ``flush_interval_commit_log_ms``
  flush the CommitLog when at least ``flush_commit_log_least_pages`` pages are
  dirty, and fully at least every ``flush_commit_log_thorough_interval_ms``.
* ``GroupCommitService`` (SYNC_FLUSH): sends wait on a future; the service
  takes every waiting request at once, fdatasyncs once and completes them all
  (many waiters, one fsync). A waiter not served within
  ``sync_flush_timeout_ms`` answers FLUSH_DISK_TIMEOUT (decided by the caller).
* ``FlushConsumeQueueService``: flushes queues and index, then writes the
  checkpoint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

__all__ = ["FlushRealTimeService", "GroupCommitService", "PeriodicService"]

log = logging.getLogger(__name__)


class PeriodicService:
    """A daemon thread that calls ``work()`` every ``interval_ms`` until stopped."""

    def __init__(self, name: str, interval_ms: int, work: Callable[[], None]) -> None:
        self.name = name
        self.interval_s = interval_ms / 1000
        self._work = work
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._work()
            except Exception:
                log.exception("%s failed; will retry", self.name)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class FlushRealTimeService(PeriodicService):
    def __init__(
        self,
        flush: Callable[[int], int],
        *,
        interval_ms: int,
        least_pages: int,
        thorough_interval_ms: int,
        on_flush: Callable[[float], None] | None = None,
    ) -> None:
        super().__init__("FlushRealTimeService", interval_ms, self._flush_once)
        self._flush = flush
        self._least_pages = least_pages
        self._thorough_s = thorough_interval_ms / 1000
        self._last_thorough = time.monotonic()
        self._on_flush = on_flush

    def _flush_once(self) -> None:
        now = time.monotonic()
        least = self._least_pages
        if now - self._last_thorough >= self._thorough_s:
            least = 0
            self._last_thorough = now
        self._flush(least)
        if self._on_flush is not None:
            self._on_flush(time.monotonic() - now)


class GroupCommitService:
    """Group commit for SYNC_FLUSH.

    Every request that arrives while a flush runs joins the next group and
    shares its future: one fdatasync and one wake-up per group, however many
    writers wait on it.
    """

    def __init__(
        self,
        flush: Callable[[int], int],
        *,
        on_flush: Callable[[float], None] | None = None,
    ) -> None:
        self._flush = flush
        self._on_flush = on_flush
        self._cond = threading.Condition()
        self._next: Future[bool] | None = None
        self._next_end = 0
        self._flushed = 0
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="GroupCommitService", daemon=True)
        self.groups = 0
        self.requests_served = 0
        self._requests_in_next = 0

    def start(self) -> None:
        self._thread.start()

    def submit(self, end_offset: int, requests: int = 1) -> Future[bool]:
        """A future set to True once the log is durable up to ``end_offset``
        (``requests``: how many appends it covers, for the counts)."""
        with self._cond:
            if self._stopping:
                done: Future[bool] = Future()
                done.set_result(False)
                return done
            if self._next is None:
                self._next = Future()
            self._next_end = max(self._next_end, end_offset)
            self._requests_in_next += requests
            self._cond.notify()
            return self._next

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._next is None and not self._stopping:
                    self._cond.wait()
                group, self._next = self._next, None
                end, count = self._next_end, self._requests_in_next
                self._requests_in_next = 0
            if group is None:
                return  # stopping, nothing left to serve
            self._commit(group, end, count)

    def _commit(self, group: Future[bool], end: int, count: int) -> None:
        started = time.monotonic()
        try:
            flushed = self._flush(0)
        except OSError:
            log.exception("group commit flush failed")
            group.set_result(False)
            return
        if self._on_flush is not None:
            self._on_flush(time.monotonic() - started)
        self.groups += 1
        self.requests_served += count
        # the flush covers every byte appended before it started, which includes
        # every request of this group (each was appended before it was submitted)
        group.set_result(flushed >= end)

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
