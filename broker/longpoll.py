"""Long polling: a pull with nothing new waits until a message lands or time runs out.

RocketMQ's PullRequestHoldService, for asyncio. The store calls ``notify``
after every append, from whatever thread appended; when nobody waits on
that queue it costs one dict lookup. Waiters are woken on the event loop:
at once when the append ran on it (the usual case: a send handled on the
loop), else through ``call_soon_threadsafe``.

A held pull is a callback (``hold``), run inside the wake: the remoting edge
answers the pull right there, in the send's own loop step, before the send
is answered (measured on the end-to-end workload: the consumer's answer went
out ~0.1 ms after the send's, a loop step and a task later, when a held pull
was a coroutine resumed after the wake). ``wait`` is the same as a
coroutine, for the REST edge. A timer handles a waiter's timeout, not
``asyncio.wait_for``, whose wrapper costs steps of its own.

A settled held pull lets go of its timer and its callback. Kept, they made
two reference cycles a pull (it -> timer -> it; it -> the edge's callback ->
the list that keeps it), ~21 objects only the cyclic collector could free:
on the end-to-end workload (a held pull a message burst) the broker's
generation-1 collections ran about once a second for 0.2-2.1 ms each, the
event loop stopped meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import defaultdict
from collections.abc import Callable

__all__ = ["HeldPull", "PullRequestHoldService"]

log = logging.getLogger(__name__)

Key = tuple[str, int]


def _done_already(_arrived: bool) -> None:
    """A settled pull's ``on_done``: its own was called, or never will be."""


class HeldPull:
    """One waiting pull: ``on_done(True)`` once a message lands past ``offset``,
    ``on_done(False)`` when its time is up; called once, on the loop's thread."""

    __slots__ = ("done", "key", "offset", "on_done", "service", "timer")

    def __init__(
        self,
        service: PullRequestHoldService,
        key: Key,
        offset: int,
        on_done: Callable[[bool], None],
    ) -> None:
        self.service = service
        self.key = key
        self.offset = offset
        self.on_done = on_done
        self.done = False
        self.timer: asyncio.TimerHandle | None = None

    def fire(self, arrived: bool) -> None:
        if self.done:
            return
        on_done = self._settle()
        try:
            on_done(arrived)
        except Exception:  # a defect in a waiter must not fail the append that woke it
            log.exception("a held pull's answer failed")

    def cancel(self) -> None:
        """Forget it (its connection closed): ``on_done`` is never called."""
        if self.done:
            return
        self._settle()
        self.service.forget(self)

    def _settle(self) -> Callable[[bool], None]:
        """Done: the timer cancelled, and the references that would make cycles dropped
        (this -> timer -> this, and this -> on_done -> whoever keeps this), so a held
        pull is freed when its answer is written, not by the cyclic collector (see the
        module's docstring); ``on_done`` returned, to be called once."""
        self.done = True
        on_done, self.on_done = self.on_done, _done_already
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()
        return on_done

    def _expire(self) -> None:
        self.service.forget(self)
        self.fire(False)


class PullRequestHoldService:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._loop_thread = threading.get_ident()  # made on the loop's thread
        self._waiters: dict[Key, list[HeldPull]] = defaultdict(list)

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
        due = [h for h in waiters if h.offset < max_offset]
        if not due:
            return
        keep = [h for h in waiters if h.offset >= max_offset]
        if keep:
            self._waiters[key] = keep
        else:
            self._waiters.pop(key, None)
        for held in due:
            held.fire(True)

    def hold(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        timeout_s: float,
        max_offset: Callable[[], int],
        on_done: Callable[[bool], None],
    ) -> HeldPull:
        """Call ``on_done(True)`` once the queue's max offset passes ``offset`` (now, if
        it did already), ``on_done(False)`` after ``timeout_s``. Loop thread only.

        ``max_offset`` is read once the waiter is registered: an append that lands
        in between is then either seen here or notified.
        """
        key = (topic, queue_id)
        held = HeldPull(self, key, offset, on_done)
        self._waiters[key].append(held)
        if max_offset() > offset:
            self.forget(held)
            held.fire(True)
            return held
        held.timer = self.loop.call_later(timeout_s, held._expire)
        return held

    def forget(self, held: HeldPull) -> None:
        waiters = self._waiters.get(held.key)
        if waiters is None:
            return
        waiters[:] = [h for h in waiters if h is not held]
        if not waiters:
            self._waiters.pop(held.key, None)

    async def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float,
                   max_offset: Callable[[], int]) -> bool:  # fmt: skip
        """``hold`` as a coroutine: True once a message lands past ``offset``, False on
        timeout; a cancelled wait forgets its waiter."""
        fut: asyncio.Future[bool] = self.loop.create_future()

        def settle(arrived: bool) -> None:
            if not fut.done():
                fut.set_result(arrived)

        held = self.hold(topic, queue_id, offset, timeout_s, max_offset, settle)
        try:
            return await fut
        finally:
            held.cancel()

    def wake_all(self) -> None:
        """Answer every waiting pull now (on shutdown); loop thread only."""
        waiters, self._waiters = self._waiters, defaultdict(list)
        for held in [h for hs in waiters.values() for h in hs]:
            held.fire(True)
