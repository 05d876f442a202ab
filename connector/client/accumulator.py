"""Auto-batching: single sends gathered into batch requests (RocketMQ 5's ProduceAccumulator).

``send_async`` (always) and ``send`` (unless ``Producer(auto_batch=False)``)
of a plain message (no delay level, no sharding key, no timeout of its own,
a body small enough not to be compressed) do not make a request each: the
message, checked in the caller's thread, joins the open batch of its topic
(and queue, if the caller named one; sync and async sends apart, as they
retry differently). A message of only a body and tags is encoded with its
batch (in compiled code from 32 messages up); one with keys or properties
is encoded by its caller. A batch goes out on the full send path (queue
selection, retries, fault avoidance) as one request, and each message gets
a ``SendResult`` of its own: its msgId, its offset msgId, its queue offset.

When a batch goes out differs from RocketMQ, which holds every message for
``batch_max_delay_ms``: here a batch goes as soon as the wire of its key is
free (fewer than ``IN_FLIGHT_PER_KEY`` batches of the key on it), so a lone
sender waits for no timer. Who starts it depends on who waits:

- ``send_async``: the producer's sender thread (as Kafka's with ``linger.ms=0``).
  The caller only marks the batch due and wakes that thread, which needs the
  GIL to run: it gets it when the caller pauses (sleeps, blocks, waits for a
  result) or after Python's switch interval, so the messages of a burst
  (``send_async`` called ten times in a row) go as one request instead of the
  first alone and the rest behind its round trip. A lone ``send_async`` pays
  one thread wake-up for it (~0.05 ms here).
- ``send``: the caller, who waits for the answer anyway. A sync ``send`` that
  finds its key's wire idle does not even enter a batch: it goes out alone
  and its caller reads the answer itself (``enter_direct``), as without
  auto-batching; it counts as on the wire, so sends of other threads
  meanwhile gather behind it.

While the wire is busy messages gather, until a batch of theirs comes back
(like the broker's group commit, the batch is as big as the load makes it),
``batch_max_bytes`` are gathered, or the first has waited
``batch_max_delay_ms``. Past ``total_batch_max_bytes`` held, messages are
sent alone, as RocketMQ does.

Sending never blocks the caller on the network: a request is started (remoting
carries many on one connection) and the answer arrives on the connection's
reader thread, which completes the batch's futures (so a ``send_async``
callback runs there: keep it short) and starts the batch that gathered
meanwhile. Two batches a key in flight keep a message from waiting a whole
round trip under light load; the second goes only while the first holds fewer
than ``SECOND_BELOW_MSGS`` messages. Under load (many threads sending, a big
batch on the wire) messages gather behind the batch on the wire instead of
going out a few at a time beside it: fewer, bigger requests, each of which
costs the brokers (and a slave) the same whatever its size.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import InvalidStateError
from typing import Protocol

from connector.client.futures import settle_batch
from connector.client.results import SendResult
from connector.errors import PyMQError
from connector.protocol.message import Message, MessageQueue

__all__ = [
    "IN_FLIGHT_PER_KEY",
    "BatchKey",
    "Gathered",
    "ProduceAccumulator",
    "SyncWaiter",
    "Waiter",
    "split_batch_result",
    "wake_in_chain",
]

# batches of one key on the wire at once before messages of that key gather
IN_FLIGHT_PER_KEY = 2
# ... the second only while those on the wire hold fewer messages than this: under load
# (a big batch in flight) messages gather behind it, not go out a few at a time
SECOND_BELOW_MSGS = 4


class Waiter(Protocol):
    """Who waits for one message of a batch: a ``SendFuture`` (``send_async``) or a
    ``SyncWaiter`` (``send``)."""

    def set_result(self, result: SendResult) -> None: ...

    def set_exception(self, exception: BaseException) -> None: ...


class SyncWaiter:
    """A sync send's wait for its batch: one lock, released when the answer is in
    (a ``Future`` costs a condition, a lock and a callback list more).

    The callers of one batch are woken in a chain (``wake_in_chain``): the reader
    thread gives each its place in the batch's result and wakes the first only;
    each caller, once running, wakes the next before anything else. Woken all at
    once by the reader thread (which holds the GIL meanwhile), they would wake
    into a held GIL and sleep again on it: two context switches a message instead
    of one. With 64 threads sending sync this took the client's CPU from 36-50 to
    29-32 us a message and its throughput up by 10-40 % (alternating runs). A
    caller's own ``SendResult`` is made in its own thread, not the reader's.

    A caller that stops waiting (its time is up, or it is interrupted) marks
    itself abandoned: a waker skips it, and if its answer was in already it wakes
    the next itself, so the chain never stops at a caller who left.
    """

    __slots__ = ("_abandoned", "_batch", "_done", "_index", "error", "next")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self._batch: SendResult | None = None  # the batch's result; ours is its _index-th
        self._index = -1  # -1: the batch's result is ours (a batch of one, or set_result)
        self.error: BaseException | None = None
        self.next: SyncWaiter | None = None  # woken by this one, in a chain
        self._abandoned = False

    def set_result(self, result: SendResult) -> None:
        self._batch = result
        with contextlib.suppress(RuntimeError):  # woken already
            self._done.release()

    def set_exception(self, exception: BaseException) -> None:
        self.error = exception
        with contextlib.suppress(RuntimeError):  # woken already
            self._done.release()

    @property
    def result(self) -> SendResult | None:
        batch = self._batch
        if batch is None or self._index < 0:
            return batch
        return batch.one(self._index)

    def wait(self, timeout_s: float) -> SendResult | None:
        """The result, None if none came within ``timeout_s``; raises the batch's error."""
        try:
            woken = self._done.acquire(timeout=timeout_s)
        except BaseException:  # interrupted: whoever comes after still gets woken
            self._abandon()
            raise
        if not woken and not self._abandon():
            return None
        if woken:
            _wake_first(self.next)
        if self.error is not None:
            raise self.error
        return self.result

    def _abandon(self) -> bool:
        """No longer waiting. Whether the answer was in already: then the chain may be
        on its way here and would skip this waiter, so it wakes the next itself.
        (Under the GIL a waker either sees the mark, or wakes this one before it.)"""
        self._abandoned = True
        if self._batch is None and self.error is None:
            return False
        _wake_first(self.next)
        return True


def _wake_first(waiter: SyncWaiter | None) -> None:
    """Wake ``waiter``, or the first after it in its chain that still waits."""
    while waiter is not None:
        if not waiter._abandoned:
            with contextlib.suppress(RuntimeError):  # it woke the next itself already
                waiter._done.release()
            return
        waiter = waiter.next


def wake_in_chain(waiters: list[SyncWaiter], result: SendResult) -> None:
    """Every caller of a batch done with its message's result, woken in a chain (see
    ``SyncWaiter``): the results are all in before the first is woken."""
    single = len(waiters) == 1
    for index, waiter in enumerate(waiters):
        waiter._batch, waiter._index = result, -1 if single else index
    for before, after in itertools.pairwise(waiters):
        before.next = after
    _wake_first(waiters[0])


class Gathered:
    """The messages of one batch, who waits for each, and the encoding of those the
    caller encoded already (None for a plain message: encoded with the batch)."""

    __slots__ = ("deadline", "encoded", "msgs", "nbytes", "waiters")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.msgs: list[Message] = []
        self.waiters: list[Waiter] = []
        self.encoded: list[object | None] = []
        self.nbytes = 0


# topic, the queue the caller named (or None: the send path picks), async or sync
BatchKey = tuple[str, MessageQueue | None, bool]
Done = Callable[[SendResult | None, BaseException | None], None]
# starts sending one gathered batch under its key; ``done`` runs once with its outcome
BatchSender = Callable[[BatchKey, Gathered, Done], None]


class ProduceAccumulator:
    """Open batches by key and the batches of each key in flight.

    Nothing here blocks on the network: ``send`` starts a request and returns,
    and the answer (on the connection's reader thread) completes the batch's
    waiters and starts the batch that gathered behind it. One thread of its own
    (the sender) starts the batches due: those of ``send_async`` on a free wire
    (due at once) and those whose first message waited ``max_delay_s``.
    """

    def __init__(
        self,
        send: BatchSender,
        *,
        max_delay_ms: int,
        max_bytes: int,
        total_max_bytes: int,
        name: str,
        on_settled: Callable[[BatchKey, int], None] | None = None,
    ) -> None:
        self._send = send
        self._on_settled = on_settled  # after a batch's waiters were told: its size
        self.max_delay_s = max_delay_ms / 1000
        self.max_bytes = max_bytes
        self.total_max_bytes = total_max_bytes
        # held with `with self._lock` (a C call; a Condition's __enter__ is Python), waited
        # on and notified through self._changed
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._open: dict[BatchKey, Gathered] = {}
        # the sizes of the batches of each key on the wire (a direct send: 1)
        self._in_flight: dict[BatchKey, list[int]] = {}
        self._held = 0  # request bytes gathered or on the wire
        self._unsettled = 0  # batches taken whose waiters are not all told yet
        self._closed = False
        self._sender = threading.Thread(target=self._send_due, name=f"pymq-batch-sender-{name}")
        self._sender.daemon = True
        self._sender.start()

    def add(
        self, key: BatchKey, msg: Message, nbytes: int, waiter: Waiter, encoded: object = None
    ) -> bool:
        """Put ``msg`` (about ``nbytes`` in the request; ``encoded`` if the caller has
        encoded it) in the open batch of ``key``; ``waiter`` gets its result. False when
        ``total_max_bytes`` are held already: the caller sends it alone. A full batch,
        and a sync one that can go at once, are started by this thread; an async one
        that can go at once is left to the sender thread."""
        ready: list[Gathered] = []
        with self._lock:
            if self._closed:
                raise PyMQError("this producer was shut down")
            if self._held + nbytes > self.total_max_bytes:
                return False
            self._held += nbytes
            batch = self._open.get(key)
            if batch is not None and batch.nbytes + nbytes > self.max_bytes:
                ready.append(self._take(key, batch))  # full: it goes now, this one starts the next
                batch = None
            if batch is None:
                batch = self._open[key] = Gathered(time.monotonic() + self.max_delay_s)
                if not self._wire_free(key):
                    self._changed.notify()  # a new deadline for the sender thread
            batch.msgs.append(msg)
            batch.waiters.append(waiter)
            batch.encoded.append(encoded)
            batch.nbytes += nbytes
            if batch.nbytes >= self.max_bytes:
                ready.append(self._take(key, batch))
            elif self._wire_free(key):
                if not key[2]:  # sync: its caller starts it and waits anyway
                    ready.append(self._take(key, batch))
                elif batch.deadline:  # async: due now, started by the sender thread
                    batch.deadline = 0.0
                    self._changed.notify()
        for gathered in ready:
            self._start(key, gathered)
        return True

    def enter_direct(self, key: BatchKey) -> bool:
        """Whether a sync send of ``key`` may go out alone, by its caller (who then reads
        its own answer: no thread hop), because the wire of ``key`` is not busy: fewer
        than ``IN_FLIGHT_PER_KEY`` requests on it and nothing gathered. Counted in
        flight until ``leave_direct``, so sends meanwhile gather behind it."""
        with self._lock:
            if self._closed:
                raise PyMQError("this producer was shut down")
            if key in self._open or not self._wire_free(key):
                return False
            self._in_flight.setdefault(key, []).append(1)
            return True

    def leave_direct(self, key: BatchKey) -> None:
        """A direct send of ``key`` ended (answered or failed): the batch that gathered
        behind it, if any, goes now."""
        with self._lock:
            self._landed(key, 1)
            waiting = self._open.get(key)
            following = self._take(key, waiting) if waiting is not None else None
        if following is not None:
            self._start(key, following)

    def close(self, timeout_s: float = 30.0) -> None:
        """Send what is gathered and wait (bounded) until every batch is answered."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ready = [(key, self._take(key, batch)) for key, batch in list(self._open.items())]
            self._changed.notify_all()
        for key, batch in ready:
            self._start(key, batch)
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._unsettled and (left := deadline - time.monotonic()) > 0:
                self._changed.wait(left)
        self._sender.join(5)

    # -- under the lock ----------------------------------------------------------------

    def _wire_free(self, key: BatchKey) -> bool:
        """Whether a batch of ``key`` may go now: nothing of it on the wire, or fewer
        than ``IN_FLIGHT_PER_KEY`` batches holding fewer than ``SECOND_BELOW_MSGS``."""
        flying = self._in_flight.get(key)
        return not flying or (len(flying) < IN_FLIGHT_PER_KEY and sum(flying) < SECOND_BELOW_MSGS)

    def _take(self, key: BatchKey, batch: Gathered) -> Gathered:
        """``batch`` is no longer open and is in flight."""
        if self._open.get(key) is batch:
            del self._open[key]
        self._in_flight.setdefault(key, []).append(len(batch.msgs))
        self._unsettled += 1
        return batch

    def _landed(self, key: BatchKey, size: int) -> None:
        """A batch of ``size`` messages of ``key`` is off the wire (answered or failed)."""
        flying = self._in_flight[key]
        flying.remove(size)
        if not flying:
            del self._in_flight[key]

    # -- sending -----------------------------------------------------------------------

    def _start(self, key: BatchKey, batch: Gathered, *, caller: bool = True) -> None:
        """Send ``batch``; a failure to start it is every waiter's. A KeyboardInterrupt
        (or the like) is also raised to the ``caller``; the sender thread keeps going."""

        def done(result: SendResult | None, error: BaseException | None) -> None:
            self._finished(key, batch, result, error)

        try:
            self._send(key, batch, done)
        except BaseException as exc:  # every waiter of the batch gets it
            self._finished(key, batch, None, exc)
            if caller and not isinstance(exc, Exception):
                raise

    def _finished(
        self, key: BatchKey, batch: Gathered, result: SendResult | None, error: BaseException | None
    ) -> None:
        with self._lock:
            self._held -= batch.nbytes
            self._landed(key, len(batch.msgs))
            waiting = self._open.get(key)
            # taken before anyone is woken: the wire stays busy
            following = (
                self._take(key, waiting) if waiting is not None and self._wire_free(key) else None
            )
        if result is not None:
            try:  # a SendFuture's own result is made when first read, as a SyncWaiter's
                waiters = batch.waiters
                if all(type(w) is SyncWaiter for w in waiters):
                    wake_in_chain(waiters, result)  # type: ignore[arg-type]
                else:
                    settle_batch(waiters, result)
            except BaseException as exc:  # noqa: BLE001 - a defect: every waiter learns it
                error = exc
        if error is not None or result is None:
            err = error or PyMQError("the batch ended without a result")
            for waiter in batch.waiters:
                with contextlib.suppress(InvalidStateError):
                    waiter.set_exception(err)
        if self._on_settled is not None:
            self._on_settled(key, len(batch.waiters))
        with self._lock:
            self._unsettled -= 1
            if not self._unsettled:
                self._changed.notify_all()  # close() may be waiting
        if following is not None:
            self._start(key, following)

    def _send_due(self) -> None:
        """The sender thread: send batches due (async ones on a free wire at once, any
        other once its first message has waited ``max_delay_s`` behind a busy wire)."""
        while True:
            ready: list[tuple[BatchKey, Gathered]] = []
            with self._lock:
                if self._closed:
                    return
                now = time.monotonic()
                next_due: float | None = None
                for key, batch in list(self._open.items()):
                    if batch.deadline <= now:
                        ready.append((key, self._take(key, batch)))
                    elif next_due is None or batch.deadline < next_due:
                        next_due = batch.deadline
                if not ready:
                    self._changed.wait(None if next_due is None else next_due - now)
            for key, batch in ready:
                self._start(key, batch, caller=False)


def split_batch_result(result: SendResult, count: int) -> list[SendResult]:
    """One ``SendResult`` a message of a batch sent to one queue (consecutive offsets)."""
    if count == 1:
        return [result]
    return [result.one(i) for i in range(count)]
