"""Busy polling: the event loop keeps polling for a while after a request instead of
sleeping in the kernel at once.

A thread blocked in ``epoll_wait`` is woken by the kernel when bytes arrive. On a
virtual machine that wake-up (the idle vCPU halted, an interrupt, the scheduler,
caches gone cold meanwhile) costs tens of microseconds, more than a small request's
own handling here: measured on the 2-core dev VM, a trivial request's round trip
went from ~0.11 to ~0.055 ms once the broker kept polling. Linux offers the same
trade for sockets (``net.core.busy_poll``), and low-latency messaging systems make it
their idle strategy (spin, then sleep).

``BusyPoll.touch()`` is called when a connection receives bytes; for ``window_s``
after the last call the loop is given a callback to run on every iteration, so it
polls with a zero timeout instead of sleeping; once the window passes with nothing
received, the callback stops and the loop sleeps in the kernel as before. An idle
server costs nothing; a request costs at most ``window_s`` of extra CPU, which is
about what the wake-up it saves costs (spin for as long as blocking would cost:
at worst twice the CPU of the best choice made in hindsight).
"""

from __future__ import annotations

import asyncio
import os
import time

__all__ = ["BusyPoll"]

# between polls the scheduler may run any other thread waiting for this core (a client's,
# on a small machine) first: polling gives way to real work
_yield = getattr(os, "sched_yield", lambda: None)


class BusyPoll:
    """The poll window of one event loop; ``window_s`` 0 turns it off. Loop thread only."""

    def __init__(self, window_s: float) -> None:
        if window_s < 0:
            raise ValueError("the busy poll window must not be negative")
        self.window_s = window_s
        self.spinning = False
        self.polls = 0  # loop iterations spent polling, for tests and curiosity
        self._until = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None

    def touch(self) -> None:
        """Something arrived: poll for another window from now."""
        if self.window_s <= 0:
            return
        self._until = time.monotonic() + self.window_s
        if not self.spinning:
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self.spinning = True
            self._loop.call_soon(self._spin)

    def _spin(self) -> None:
        # a ready callback makes the loop's next poll a zero-timeout one
        self.polls += 1
        if time.monotonic() < self._until:
            assert self._loop is not None
            _yield()
            self._loop.call_soon(self._spin)
        else:
            self.spinning = False
