"""asyncio side of SYNC_FLUSH: many coroutines, one wake-up per group commit.

The group commit service hands every request of a group the same
``concurrent.futures.Future``. ``FlushWaiter`` wraps each such future into
one asyncio future for the loop, so a group of N waiting sends costs one
cross-thread wake-up, not N.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

__all__ = ["FlushWaiter"]


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
