"""asyncio side of the store: SYNC_FLUSH's group commit on the broker's event loop.

``GroupAppender``: what the sends of one event-loop step write is made
durable together, at the end of that step:

* single messages put by many coroutines are appended as one group
  (``MessageStore.put_group_nowait``: one lock hold, one compiled layout
  pass), the write combining that LevelDB's and PostgreSQL's group commits do;
* those and every other append of the step that waits for the disk (a
  batch: ``durable``) share one fdatasync.

The loop does that fdatasync itself, as Redis does with ``appendfsync
always``: while it runs, the requests that arrive wait in their sockets and
make the next group. No thread hand-off: on this path a hand-off to the
group commit thread and the wake-up back cost more than the fdatasync
(measured: docs/benchmarks.md, durable produce). A disk that turns slow must
not stall the loop for long, so after an fdatasync slower than
``group_commit_on_loop_max_ms`` the group commit thread takes the groups for
``THREAD_COOL_DOWN_S``; a send it has not flushed within
``sync_flush_timeout_ms`` answers FLUSH_DISK_TIMEOUT (stored, not known
durable). ``group_commit_on_loop_max_ms = 0`` keeps every group on the
thread.

``FlushWaiter``: one asyncio future per flush future of the group commit
thread, shared by everyone waiting on it (one cross-thread wake-up a group).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future

from broker.store.config import FlushDiskType
from broker.store.inner import MessageInner
from broker.store.results import PutMessageResult
from broker.store.store import MessageStore

__all__ = ["THREAD_COOL_DOWN_S", "FlushWaiter", "GroupAppender"]

log = logging.getLogger(__name__)

# how long the group commit thread keeps the groups after a slow fdatasync on the loop
THREAD_COOL_DOWN_S = 10.0


class FlushWaiter:
    """Use from one event loop (the broker's)."""

    def __init__(self) -> None:
        self._shared: dict[int, asyncio.Future[bool]] = {}

    def wait(self, flushed: Future[bool]) -> asyncio.Future[bool]:
        """An awaitable for ``flushed``, shared with every other waiter of the same group."""
        key = id(flushed)
        fut = self._shared.get(key)
        if fut is None:
            fut = asyncio.wrap_future(flushed)
            self._shared[key] = fut
            fut.add_done_callback(lambda _f: self._shared.pop(key, None))
        return fut


_Waiting = list[tuple[asyncio.Future[PutMessageResult], PutMessageResult]]


class GroupAppender:
    """Group commit of one event-loop step (SYNC_FLUSH). Use from one event loop.

    ``await appender.put(msg)`` answers what ``put_message`` would: PUT_OK
    once the message is durable, FLUSH_DISK_TIMEOUT when it was not flushed
    within ``sync_flush_timeout_ms`` (the message is stored), or why it was
    refused (at once). ``await appender.durable(put)`` does the same for an
    append already made without a flush request (``request_flush=False``).
    """

    def __init__(
        self,
        store: MessageStore,
        *,
        max_group: int = 64,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.max_group = max_group
        self.clock = clock
        self._msgs: list[MessageInner] = []
        self._futs: list[asyncio.Future[PutMessageResult]] = []
        self._waiting: _Waiting = []  # appended, waiting for the step's flush
        self._end = 0  # where the log must be durable to for them
        self._scheduled = False
        self._thread_until = 0.0  # the thread flushes until then (``clock``)
        self.commits_on_loop = 0
        self.commits_on_thread = 0

    def put(self, msg: MessageInner) -> asyncio.Future[PutMessageResult]:
        fut: asyncio.Future[PutMessageResult] = self._schedule().create_future()
        self._msgs.append(msg)
        self._futs.append(fut)
        if len(self._msgs) >= self.max_group:
            self._append()
        return fut

    def durable(self, put: PutMessageResult) -> asyncio.Future[PutMessageResult]:
        """``put`` (an append made on this loop without a flush request) once durable."""
        fut: asyncio.Future[PutMessageResult] = self._schedule().create_future()
        if not put.ok or put.append is None:
            fut.set_result(put)
            return fut
        self._waiting.append((fut, put))
        self._end = max(self._end, put.append.end_offset)
        return fut

    def _schedule(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._commit)  # after the step's other callbacks
        return loop

    def _append(self) -> None:
        """The waiting single messages, appended as one group (not yet flushed)."""
        msgs, futs = self._msgs, self._futs
        if not msgs:
            return
        self._msgs, self._futs = [], []
        try:
            results, _ = self.store.put_group_nowait(msgs, request_flush=False)
        except Exception as exc:  # a store defect: fail these sends, keep the loop alive
            log.exception("group append of %d messages failed", len(msgs))
            for fut in futs:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for fut, res in zip(futs, results, strict=True):
            if res.ok and res.append is not None:
                self._waiting.append((fut, res))
                self._end = max(self._end, res.append.end_offset)
            elif not fut.done():
                fut.set_result(res)  # refused: nothing to wait for

    def _commit(self) -> None:
        self._scheduled = False
        self._append()
        waiting, end = self._waiting, self._end
        if not waiting:
            return
        self._waiting, self._end = [], 0
        store = self.store
        if store.config.flush_disk_type is not FlushDiskType.SYNC_FLUSH:
            _finish(waiting, True)  # appended is all ASYNC_FLUSH promises
            return
        timeout_s = store.config.sync_flush_timeout_ms / 1000
        limit_s = store.config.group_commit_on_loop_max_ms / 1000
        if limit_s > 0 and self.clock() >= self._thread_until:
            self.commits_on_loop += 1
            started = self.clock()
            try:
                ok = store.flush_here(end, len(waiting))
            except OSError:
                log.exception("group commit flush failed")
                ok = False
            took = self.clock() - started
            if took > limit_s:
                self._thread_until = self.clock() + THREAD_COOL_DOWN_S
                log.warning(
                    "an fdatasync took %.1f ms (group_commit_on_loop_max_ms %d): the group "
                    "commit thread flushes for the next %.0f s",
                    took * 1000, store.config.group_commit_on_loop_max_ms, THREAD_COOL_DOWN_S,
                )  # fmt: skip
            _finish(waiting, ok and took <= timeout_s)
            return
        flushed = store.request_flush(end, len(waiting))
        if flushed is None:  # the store is stopping
            _finish(waiting, False)
            return
        self.commits_on_thread += 1
        loop = asyncio.get_running_loop()
        timer = loop.call_later(timeout_s, _finish, waiting, False)

        def flushed_done(g: asyncio.Future[bool]) -> None:
            timer.cancel()
            _finish(waiting, not g.cancelled() and g.exception() is None and g.result())

        asyncio.wrap_future(flushed).add_done_callback(flushed_done)


def _finish(waiting: _Waiting, durable: bool) -> None:
    for fut, res in waiting:
        if not fut.done():
            fut.set_result(res if durable else res.flush_timed_out())
