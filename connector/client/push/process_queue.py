"""A push consumer's state for one owned queue (RocketMQ's ProcessQueue): the
messages pulled and not yet consumed, by queue offset, with their count and
bytes for flow control. Pure state; thread-safe.

Concurrent consumption removes a batch once consumed; the offset to commit
is then the smallest offset still held (nothing below it is pending), or
the next to pull when nothing is. Orderly consumption takes batches in
offset order into a "consuming" set and commits past them at SUCCESS, or
puts them back at SUSPEND.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from itertools import repeat, starmap
from operator import attrgetter

from connector.protocol.message import MessageExt

__all__ = ["ProcessQueue"]

_body = attrgetter("body")


class ProcessQueue:
    """``_order`` holds the offsets put, ascending (pulls of a queue come in order;
    ``put_back`` puts a batch back in front), some no longer held: the smallest
    offset held is found by dropping those from its front, amortised O(1) (a
    dict's first key is not: iterating a dict walks over the slots of every key
    deleted since it last grew, and consumed messages are deleted from the
    front; with 200,000 held that cost 280 us a batch)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._msgs: dict[int, MessageExt] = {}  # queue offset -> message, not yet consumed
        self._order: deque[int] = deque()  # offsets put, ascending (see the class)
        self._consuming: dict[int, MessageExt] = {}  # orderly: taken, not yet committed
        self.count = 0
        self.bytes = 0
        self.max_offset = -1  # the highest offset ever put
        self.next_offset = -1  # where the next pull starts (past messages filtered out)
        self.dropped = False  # given up (rebalance, shutdown): pull and consume no more
        self.locked = False  # orderly: the broker's lock is held
        self.last_lock_ms = 0.0
        self.in_flight = 0  # batches in the listener now
        self.consume_lock = threading.Lock()  # orderly: one thread a queue at a time
        # concurrent: queue offset -> when its listener call started (monotonic s); set
        # by the consume thread without the lock (one dict store), dropped by ``remove``
        self.started: dict[int, float] = {}
        self.parked_offset: int | None = None  # a pull held back by flow control, from here
        self.park_timer = False  # the parked pull's fallback timer is set
        self.pull_batch: int | None = None  # the next pull's page (None: not pulled yet)
        self._idle = threading.Condition(self._lock)

    def advance(self, next_offset: int) -> None:
        """A pull answered: the queue is read up to ``next_offset`` (what it skipped,
        messages of other tags, needs no consuming)."""
        with self._lock:
            self.next_offset = max(self.next_offset, next_offset)

    def put(self, msgs: Sequence[MessageExt], offsets: Sequence[int] | None = None) -> None:
        """Hold ``msgs`` (a pull answer's, ascending); ``offsets``: their queue offsets,
        if the caller has them in bulk (``connector.protocol.pulled.queue_offsets``)."""
        if offsets is None:
            offsets = [m.queue_offset for m in msgs]
        if not offsets:
            return
        with self._lock:
            if offsets[0] > self.max_offset:  # past all held (and consuming): in bulk
                self._msgs.update(zip(offsets, msgs, strict=True))
                self._order.extend(offsets)
                self.count += len(offsets)
                self.bytes += sum(map(len, map(_body, msgs)))
                self.max_offset = max(self.max_offset, offsets[-1])
                return
            self._put_each(msgs, offsets)

    def _put_each(self, msgs: Sequence[MessageExt], offsets: Sequence[int]) -> None:
        """``put`` of a pull from below the top held (an offset reset): rare."""
        held, consuming = self._msgs, self._consuming
        top = self.max_offset
        in_order = True
        for offset, m in zip(offsets, msgs, strict=True):
            if offset not in held and offset not in consuming:
                in_order = in_order and offset > top
                held[offset] = m
                self._order.append(offset)
                self.count += 1
                self.bytes += len(m.body)
            top = max(top, offset)
        self.max_offset = top
        if not in_order:
            self._msgs = dict(sorted(held.items()))
            self._order = deque(self._msgs)

    def _first(self) -> int:
        """The smallest offset held (under the lock; ``_msgs`` not empty)."""
        order, held = self._order, self._msgs
        while order[0] not in held:
            order.popleft()
        return order[0]

    def _forget(self, m: MessageExt) -> None:
        self.count -= 1
        self.bytes -= len(m.body)

    def remove(self, msgs: Sequence[MessageExt], offsets: Sequence[int] | None = None) -> int:
        """Consumed (or sent back): the offset to commit now, or -1 if none was held.
        ``offsets``: the messages' queue offsets, if the caller has them in bulk."""
        if offsets is None:
            offsets = [m.queue_offset for m in msgs]
        with self._lock:
            held = self._msgs
            before = len(held)
            gone = list(map(held.pop, offsets, repeat(None)))
            if before - len(held) < len(gone):  # some were not held (sent back already)
                gone = [m for m in gone if m is not None]
            self.count -= len(gone)
            self.bytes -= sum(map(len, map(_body, gone)))
            deque(map(self.started.pop, offsets, repeat(None)), maxlen=0)
            order, k = self._order, len(offsets)
            if (
                k > 1
                and offsets[-1] - offsets[0] == k - 1
                and len(order) >= k
                and order[0] == offsets[0]
                and order[k - 1] == offsets[-1]
            ):
                # k consecutive offsets at the front of the order (strictly ascending):
                # exactly its first k, gone in one C loop, not one by one in _first
                deque(starmap(order.popleft, repeat((), k)), maxlen=0)
            if self._msgs:
                return self._first()
            return max(self.next_offset, self.max_offset + 1 if self.max_offset >= 0 else -1)

    def oldest_started(self) -> tuple[MessageExt, float] | None:
        """Concurrent: the message of the smallest offset held, if its consumption has
        started, and when (``consume_timeout_minutes`` looks only at it, as RocketMQ's
        cleanExpireMsg: the one that holds the offset back)."""
        with self._lock:
            if not self._msgs:
                return None
            offset = self._first()
            since = self.started.get(offset)
            return None if since is None else (self._msgs[offset], since)

    def take_parked(self) -> int | None:
        """The parked pull's offset, once: whoever gets it sends that pull."""
        with self._lock:
            offset, self.parked_offset = self.parked_offset, None
            return offset

    def is_empty(self) -> bool:
        with self._lock:
            return not self._msgs and not self._consuming

    # -- orderly -----------------------------------------------------------------------

    def take(self, n: int) -> list[MessageExt]:
        """Orderly: the next ``n`` messages in offset order, moved to "consuming"."""
        with self._lock:
            out: list[MessageExt] = []
            order, held = self._order, self._msgs
            while order and len(out) < n:
                m = held.pop(order.popleft(), None)
                if m is not None:
                    self._consuming[m.queue_offset] = m
                    out.append(m)
            return out

    def commit(self) -> int:
        """Orderly SUCCESS: the taken batch done; the offset to commit (-1: none)."""
        with self._lock:
            if not self._consuming:
                return -1
            top = max(self._consuming)
            for m in self._consuming.values():
                self._forget(m)
            self._consuming.clear()
            return self._first() if self._msgs else max(top + 1, self.next_offset)

    def put_back(self) -> list[MessageExt]:
        """Orderly SUSPEND: the taken batch to consume again (its reconsume count up)."""
        with self._lock:
            back = sorted(self._consuming.values(), key=lambda m: m.queue_offset)
            for m in back:
                m.reconsume_times += 1
            # in front of the rest: the order of _msgs stays the order of offsets
            self._msgs = {**{m.queue_offset: m for m in back}, **self._msgs}
            self._order = deque(self._msgs)
            self._consuming.clear()
            return back

    # -- draining ----------------------------------------------------------------------

    def enter(self) -> None:
        with self._lock:
            self.in_flight += 1

    def leave(self) -> None:
        with self._lock:
            self.in_flight -= 1
            if self.in_flight == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait (bounded) until no batch of this queue is in the listener."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self.in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
            return True
