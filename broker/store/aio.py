"""asyncio side of the store: one wake-up per group commit, one append per loop step.

``FlushWaiter``: the group commit service hands every request of a group the
same ``concurrent.futures.Future``; the waiter wraps each such future into one
asyncio future for the loop, so a group of N waiting sends costs one
cross-thread wake-up, not N.

``GroupAppender``: single messages put by many coroutines during one step of
the event loop are appended together at the end of that step
(``MessageStore.put_group_nowait``: one lock hold, one compiled layout pass,
one flush request), then each caller gets its own result. This is how
concurrent single sends share the cost of a batch, the write combining that
LevelDB's and PostgreSQL's group commits do.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future

from broker.store.inner import MessageInner
from broker.store.results import PutMessageResult
from broker.store.store import MessageStore

__all__ = ["FlushWaiter", "GroupAppender"]

log = logging.getLogger(__name__)


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


class GroupAppender:
    """Combines the single-message appends of one event-loop step.

    ``await appender.put(msg)`` answers what ``put_message`` would: PUT_OK
    once the message is as durable as the flush mode promises,
    FLUSH_DISK_TIMEOUT when SYNC_FLUSH did not complete within
    ``sync_flush_timeout_ms`` (the message is stored), or why it was refused.
    Use from one event loop.
    """

    def __init__(
        self, store: MessageStore, waiter: FlushWaiter | None = None, *, max_group: int = 64
    ) -> None:
        self.store = store
        self.max_group = max_group
        self.waiter = waiter if waiter is not None else FlushWaiter()
        self._msgs: list[MessageInner] = []
        self._futs: list[asyncio.Future[PutMessageResult]] = []

    def put(self, msg: MessageInner) -> asyncio.Future[PutMessageResult]:
        loop = asyncio.get_running_loop()
        if not self._msgs:
            loop.call_soon(self._drain)
        fut: asyncio.Future[PutMessageResult] = loop.create_future()
        self._msgs.append(msg)
        self._futs.append(fut)
        if len(self._msgs) >= self.max_group:
            self._drain()
        return fut

    def _drain(self) -> None:
        msgs, futs = self._msgs, self._futs
        if not msgs:
            return
        self._msgs, self._futs = [], []
        try:
            results, flushed = self.store.put_group_nowait(msgs)
        except Exception as exc:  # a store defect: fail these sends, keep the loop alive
            log.exception("group append of %d messages failed", len(msgs))
            for fut in futs:
                if not fut.done():
                    fut.set_exception(exc)
            return
        if flushed is None:
            for fut, res in zip(futs, results, strict=True):
                if not fut.done():
                    fut.set_result(res)
            return
        loop = asyncio.get_running_loop()
        group = self.waiter.wait(flushed)
        timeout_s = self.store.config.sync_flush_timeout_ms / 1000

        def finish(ok: bool) -> None:
            for fut, res in zip(futs, results, strict=True):
                if not fut.done():
                    fut.set_result(res if ok or not res.ok else res.flush_timed_out())

        timer = loop.call_later(timeout_s, finish, False)

        def flushed_done(g: asyncio.Future[bool]) -> None:
            timer.cancel()
            finish(not g.cancelled() and g.exception() is None and g.result())

        group.add_done_callback(flushed_done)
