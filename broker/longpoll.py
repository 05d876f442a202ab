"""Long polling: a pull with nothing new waits until a message lands or time runs out.

RocketMQ's PullRequestHoldService, for asyncio. The store calls ``notify``
after every append, from whatever thread appended; when nobody waits on
that queue it costs one dict lookup. Waiters are woken on the event loop:
at once when the append ran on it (the usual case: a send handled on the
loop), else through ``call_soon_threadsafe``. A waiter's pull resumes in
the loop's next step after the wake (a timer handles its timeout, not
``asyncio.wait_for``, whose wrapper costs steps of its own).
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Callable

__all__ = ["PullRequestHoldService"]

Key = tuple[str, int]


class PullRequestHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._loop_thread = threading.get_ident()  # made on the loop's thread
        self._waiters: dict[Key, list[tuple[int, asyncio.Future[bool]]]] = defaultdict(list)

    def notify(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Store arrival listener: any thread."""
        if (topic, queue_id) not in self._waiters:
            return
        if threading.get_ident() == self._loop_thread:
            self._wake((topic, queue_id), max_offset)
        else:
            self.loop.call_soon_threadsafe(self._wake, (topic, queue_id), max_offset)

    def _wake(self, key: Key, max_offset: int) -> None:
        waiters = self._waiters.get(key)
        if not waiters:
            return
        keep = []
        for offset, fut in waiters:
            if offset < max_offset:
                if not fut.done():
                    fut.set_result(True)
            elif not fut.done():
                keep.append((offset, fut))
        if keep:
            self._waiters[key] = keep
        else:
            self._waiters.pop(key, None)

    async def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float,
                   max_offset: Callable[[], int]) -> bool:  # fmt: skip
        """Wait until the queue's max offset passes ``offset``; False on timeout.

        ``max_offset`` is read once the waiter is registered: an append that
        lands in between is then either seen here or notified.
        """
        key = (topic, queue_id)
        fut: asyncio.Future[bool] = self.loop.create_future()
        self._waiters[key].append((offset, fut))
        if max_offset() > offset:
            fut.set_result(True)
        timer = self.loop.call_later(timeout_s, _expire, fut)
        try:
            return await fut
        finally:
            timer.cancel()
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters[:] = [w for w in waiters if w[1] is not fut]
                if not waiters:
                    self._waiters.pop(key, None)

    def wake_all(self) -> None:
        """Answer every waiting pull now (on shutdown); loop thread only."""
        for waiters in self._waiters.values():
            for _, fut in waiters:
                if not fut.done():
                    fut.set_result(True)
        self._waiters.clear()


def _expire(fut: asyncio.Future[bool]) -> None:
    """A waiter's time is up: nothing arrived (unless a wake came first)."""
    if not fut.done():
        fut.set_result(False)
