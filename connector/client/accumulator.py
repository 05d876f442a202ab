"""Auto-batching: single sends gathered into batch requests (RocketMQ 5's ProduceAccumulator).

With ``Producer(auto_batch=True)``, ``send`` and ``send_async`` of a plain
message (no delay level, no sharding key, no timeout of its own, a body
small enough not to be compressed) do not make a request each: the message,
already checked and encoded in the caller's thread, joins the open batch of
its topic (and queue, if the caller named one; sync and async sends apart,
as they retry differently). A batch goes out on the full send path (queue
selection, retries, fault avoidance) as one request, and each message gets
a ``SendResult`` of its own: its msgId, its offset msgId, its queue offset.

When a batch goes out differs from RocketMQ, which holds every message for
``batch_max_delay_ms``: here a batch goes at once while fewer than
``IN_FLIGHT_PER_KEY`` batches of its key are on the wire, so a lone sender
waits for nothing. Only while the wire is busy do messages gather, until a
batch of theirs comes back (like the broker's group commit, the batch is as
big as the load makes it), ``batch_max_bytes`` are gathered, or the first
has waited ``batch_max_delay_ms``. Past ``total_batch_max_bytes`` held,
messages are sent alone, as RocketMQ does.

A sync caller whose batch can go at once sends it from its own thread (a
lone sender makes no thread hop); every other batch is sent by the
accumulator's threads, which also complete the futures, so a
``send_async`` callback runs in one of them (keep it short). Two batches a
key in flight or one measured the same here (noise of +-40 %); two keeps a
message from waiting a whole round trip under light load.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

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
]

# batches of one key on the wire at once before messages of that key gather
IN_FLIGHT_PER_KEY = 2


class Waiter(Protocol):
    """Who waits for one message of a batch: a ``Future`` (``send_async``) or a
    ``SyncWaiter`` (``send``)."""

    def set_result(self, result: SendResult) -> None: ...

    def set_exception(self, exception: BaseException) -> None: ...


class SyncWaiter:
    """A sync send's wait for its batch: one lock, released when the answer is in
    (a ``Future`` costs a condition, a lock and a callback list more)."""

    __slots__ = ("_done", "error", "result")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self.result: SendResult | None = None
        self.error: BaseException | None = None

    def set_result(self, result: SendResult) -> None:
        self.result = result
        self._done.release()

    def set_exception(self, exception: BaseException) -> None:
        self.error = exception
        self._done.release()

    def wait(self, timeout_s: float) -> SendResult | None:
        """The result, None if none came within ``timeout_s``; raises the batch's error."""
        if not self._done.acquire(timeout=timeout_s):
            return None
        if self.error is not None:
            raise self.error
        return self.result


class Gathered:
    """The messages of one batch: request pieces, ids, record sizes and who waits."""

    __slots__ = ("deadline", "ids", "msgs", "nbytes", "parts", "sizes", "waiters")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.parts: list[bytes] = []
        self.ids: list[str] = []
        self.sizes: list[int] = []
        self.msgs: list[Message] = []
        self.waiters: list[Waiter] = []
        self.nbytes = 0


# topic, the queue the caller named (or None: the send path picks), async or sync
BatchKey = tuple[str, MessageQueue | None, bool]
# sends one gathered batch under its key; returns the batch's SendResult
BatchSender = Callable[[BatchKey, Gathered], SendResult]


class ProduceAccumulator:
    """Open batches by key, the batches of each key in flight, and the threads that send."""

    def __init__(
        self,
        send: BatchSender,
        *,
        max_delay_ms: int,
        max_bytes: int,
        total_max_bytes: int,
        workers: int,
        name: str,
    ) -> None:
        self._send = send
        self.max_delay_s = max_delay_ms / 1000
        self.max_bytes = max_bytes
        self.total_max_bytes = total_max_bytes
        self._lock = threading.Condition(threading.Lock())
        self._open: dict[BatchKey, Gathered] = {}
        self._in_flight: dict[BatchKey, int] = {}
        self._held = 0  # request bytes gathered or on the wire
        self._closed = False
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"pymq-batch-{name}")
        self._timer = threading.Thread(target=self._expire, name=f"pymq-batch-timer-{name}")
        self._timer.daemon = True
        self._timer.start()

    def add(
        self,
        key: BatchKey,
        data: bytes,
        msg_id: str,
        size: int,
        msg: Message,
        waiter: Waiter,
        *,
        caller_sends: bool = False,
    ) -> bool:
        """Put ``msg`` (encoded as ``data``) in the open batch of ``key``; ``waiter``
        gets its result. False when ``total_max_bytes`` are held already: the caller
        sends it alone. With ``caller_sends``, a batch that can go at once is sent
        by this thread before ``add`` returns (a lone sync send makes no thread hop).
        """
        n = len(data)
        with self._lock:
            if self._closed:
                raise PyMQError("this producer was shut down")
            if self._held + n > self.total_max_bytes:
                return False
            self._held += n
            batch = self._open.get(key)
            if batch is not None and batch.nbytes + n > self.max_bytes:
                self._dispatch(key, batch)  # full: it goes now, this one starts the next
                batch = None
            if batch is None:
                batch = self._open[key] = Gathered(time.monotonic() + self.max_delay_s)
                if self._in_flight.get(key, 0) >= IN_FLIGHT_PER_KEY:
                    self._lock.notify()  # a new deadline for the timer
            batch.parts.append(data)
            batch.ids.append(msg_id)
            batch.sizes.append(size)
            batch.msgs.append(msg)
            batch.waiters.append(waiter)
            batch.nbytes += n
            mine = None
            if self._in_flight.get(key, 0) < IN_FLIGHT_PER_KEY or batch.nbytes >= self.max_bytes:
                if caller_sends:
                    mine = self._take(key, batch)
                else:
                    self._dispatch(key, batch)
        if mine is not None:
            self._run(key, mine, go_on=False)
        return True

    def close(self) -> None:
        """Send what is gathered, wait for every batch to be answered, stop the threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for key, batch in list(self._open.items()):
                self._dispatch(key, batch)
            self._lock.notify()
        self._pool.shutdown(wait=True)
        self._timer.join(5)

    # -- under the lock ----------------------------------------------------------------

    def _take(self, key: BatchKey, batch: Gathered) -> Gathered:
        """``batch`` is no longer open and is in flight."""
        if self._open.get(key) is batch:
            del self._open[key]
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        return batch

    def _dispatch(self, key: BatchKey, batch: Gathered) -> None:
        self._pool.submit(self._run, key, self._take(key, batch), go_on=True)

    # -- threads -----------------------------------------------------------------------

    def _run(self, key: BatchKey, batch: Gathered | None, *, go_on: bool) -> None:
        """Send ``batch``; then, with ``go_on``, the batches that gathered meanwhile,
        in this thread (otherwise the pool sends them)."""
        while batch is not None:
            results: list[SendResult] | None = None
            error: BaseException | None = None
            try:
                results = split_batch_result(self._send(key, batch), len(batch.ids))
            except BaseException as exc:  # noqa: BLE001 - every waiter of the batch gets it
                error = exc  # (a KeyboardInterrupt in a caller that sends is raised below)
            with self._lock:
                self._held -= batch.nbytes
                left = self._in_flight[key] - 1
                if left:
                    self._in_flight[key] = left
                else:
                    del self._in_flight[key]
                waiting = self._open.get(key)
                following = None
                if waiting is not None and left < IN_FLIGHT_PER_KEY:
                    # taken before anyone is woken: the wire stays busy
                    if go_on:
                        following = self._take(key, waiting)
                    else:
                        self._dispatch(key, waiting)
            if results is not None:
                for waiter, result in zip(batch.waiters, results, strict=True):
                    waiter.set_result(result)
            else:
                assert error is not None
                for waiter in batch.waiters:
                    waiter.set_exception(error)
                if not isinstance(error, Exception):
                    if following is not None:  # not sent here: the pool takes it
                        self._pool.submit(self._run, key, following, go_on=True)
                    raise error
            batch = following

    def _expire(self) -> None:
        """Send batches whose first message has waited ``max_delay_s`` behind a busy wire."""
        with self._lock:
            while not self._closed:
                now = time.monotonic()
                next_due: float | None = None
                for key, batch in list(self._open.items()):
                    if batch.deadline <= now:
                        self._dispatch(key, batch)
                    elif next_due is None or batch.deadline < next_due:
                        next_due = batch.deadline
                self._lock.wait(None if next_due is None else next_due - now)


def split_batch_result(result: SendResult, count: int) -> list[SendResult]:
    """One ``SendResult`` a message of a batch sent to one queue (consecutive offsets)."""
    if count == 1:
        return [result]
    ids, offset_ids = result.msg_ids, result.offset_msg_ids
    status, queue, first = result.status, result.queue, result.queue_offset
    return [
        SendResult(status, ids[i], offset_ids[i], queue, first + i, (ids[i],), (offset_ids[i],))
        for i in range(count)
    ]
