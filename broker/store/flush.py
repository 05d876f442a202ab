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
    """Group commit for SYNC_FLUSH."""

    def __init__(
        self,
        flush: Callable[[int], int],
        *,
        on_flush: Callable[[float], None] | None = None,
    ) -> None:
        self._flush = flush
        self._on_flush = on_flush
        self._cond = threading.Condition()
        self._requests: list[tuple[int, Future[bool]]] = []
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="GroupCommitService", daemon=True)
        self.groups = 0
        self.requests_served = 0

    def start(self) -> None:
        self._thread.start()

    def submit(self, end_offset: int) -> Future[bool]:
        """A future set to True once the log is durable up to ``end_offset``."""
        fut: Future[bool] = Future()
        with self._cond:
            if self._stopping:
                fut.set_result(False)
                return fut
            self._requests.append((end_offset, fut))
            self._cond.notify()
        return fut

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._requests and not self._stopping:
                    self._cond.wait()
                batch, self._requests = self._requests, []
                stopping = self._stopping
            if batch:
                self._commit(batch)
            elif stopping:
                return

    def _commit(self, batch: list[tuple[int, Future[bool]]]) -> None:
        started = time.monotonic()
        try:
            flushed = self._flush(0)
        except OSError:
            log.exception("group commit flush failed")
            for _, fut in batch:
                fut.set_result(False)
            return
        if self._on_flush is not None:
            self._on_flush(time.monotonic() - started)
        self.groups += 1
        self.requests_served += len(batch)
        late: list[tuple[int, Future[bool]]] = []
        for end, fut in batch:
            if end <= flushed:
                fut.set_result(True)
            else:
                late.append((end, fut))
        if late:  # appended after the flush started: serve them in the next group
            with self._cond:
                self._requests[:0] = late
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join()
