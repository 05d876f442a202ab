"""How a push consumer calls its listener: concurrently or orderly (RocketMQ's
ConsumeMessageConcurrentlyService / ConsumeMessageOrderlyService).

Concurrent: a fast listener (a batch within ``INLINE_BATCH_S`` on average,
by its times so far) is called on the connection's reader thread that
decoded the answer, right away: no thread hand-over, and a page read and
consumed on one thread costs less than on two (on a backlog with a no-op
listener, 40-60 % more messages a second). What is not done after
``INLINE_S`` goes to the pool, and a listener call that holds the reader
thread over ``connection.STALL_S`` has the reading taken over by a new
thread, so other answers on that connection (sends, heartbeats) are not
held up behind it. Any other answer is cut into a few tasks of the consume
pool, each a contiguous run of it, which calls the listener with batches of
``consume_message_batch_max_size`` one after the other. Either way what was
consumed is taken out of the process queue (and the offset moved) once every
``FLUSH_S`` and at the end: with a no-op listener called per message, that
bookkeeping done per batch (two locks, on a GIL shared with the
connection's reader thread) had cost more than the calls. A batch
answered ``RECONSUME_LATER`` (or whose listener raised) goes back to the
broker, message by message, with CONSUMER_SEND_MSG_BACK: the broker stores it
in ``%RETRY%group`` with delay level 3 + its reconsume count, or in
``%DLQ%group`` once that count reaches ``max_reconsume_times``. A message the
broker could not take back is consumed again here 5 s later. Broadcasting
drops failed batches (RocketMQ's rule: there is no group retry topic to send
them to).

Orderly: one task at a time per queue (the queue's ``consume_lock``),
taking batches in offset order while the broker's lock is valid;
``SUSPEND_CURRENT_QUEUE_A_MOMENT`` puts the batch back and pauses the queue
for ``suspend_current_queue_time_ms``; a batch suspended more than
``max_reconsume_times`` times goes to the DLQ, and the queue goes on.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from connector.client.push.pool import ConsumePool
from connector.client.push.process_queue import ProcessQueue
from connector.client.push.scheduler import Scheduler
from connector.client.push.status import ConsumeContext, ConsumeOrderlyStatus, ConsumeStatus
from connector.errors import PyMQError
from connector.protocol.message import MessageExt, MessageQueue
from connector.protocol.remoting import RequestCode

if TYPE_CHECKING:
    from connector.client.push.consumer import PushConsumer

__all__ = ["ConsumeService"]

log = logging.getLogger(__name__)
RECONSUME_LOCALLY_DELAY_S = 5.0
TASK_S = 0.001  # listener time a consume task is cut to hold, about
# a listener whose batches take under this on average is called on the connection's
# reader thread, for INLINE_S of an answer at most (the rest goes to the pool)
INLINE_BATCH_S = 0.001
INLINE_S = 0.01
# a run of this many batches moves the listener's average time a batch halfway to its own
ESTIMATE_BATCHES = 32
FLUSH_S = 0.001  # a task takes what it consumed out of its queue at least this often
EXPIRED_DELAY_LEVEL = 3  # a message over consume_timeout_minutes goes back with this
EXPIRED_PER_ROUND = 16  # RocketMQ's cleanExpireMsg looks at 16 at most per queue a round
DLQ_LEVEL = -1  # CONSUMER_SEND_MSG_BACK's delayLevel that sends straight to the DLQ


class ConsumeService:
    def __init__(self, consumer: PushConsumer, pool: ConsumePool, scheduler: Scheduler):
        self.consumer = consumer
        self.pool = pool
        self.scheduler = scheduler
        self.settings = consumer.settings
        # the listener's average time a batch (s): an estimate, updated by every consume
        # without a lock; None until the first is measured (then an answer is tried on
        # the reader thread, and the pool cuts as if a batch took TASK_S: a first slow
        # batch is not serialised)
        self._batch_s: float | None = None

    def submit(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        msgs: list[MessageExt],
        offsets: Sequence[int] | None = None,
        *,
        here: bool = False,
    ) -> bool:
        """Messages just put into ``pq`` (``offsets``: their queue offsets): to the listener.
        Whether a consume thread was woken for them.

        Concurrent: with ``here`` (the caller is the connection's reader thread that read
        them), a fast listener (its batches within ``INLINE_BATCH_S`` on average so far,
        or no average yet) is called on the calling thread, for ``INLINE_S`` of the
        answer at most. The rest is cut into tasks of whole batches, each a contiguous run
        of about ``TASK_S`` of listener time, no more tasks than idle consume threads, at
        least one; a slow listener runs side by side on every idle thread."""
        try:
            if self.settings.orderly:
                return self.pool.submit(self._orderly, mq, pq)
            if not msgs:
                return False
            if offsets is None:
                offsets = [m.queue_offset for m in msgs]
            n = self.settings.consume_message_batch_max_size
            batches = -(-len(msgs) // n)
            lo = 0
            batch_s = self._batch_s
            if here and (batch_s is None or batch_s <= INLINE_BATCH_S):
                lo = self._concurrently(mq, pq, msgs, offsets, 0, len(msgs), here=True)
                if lo >= len(msgs) or pq.dropped:
                    return False
                batches = -(-(len(msgs) - lo) // n)
                batch_s = self._batch_s
            work = int(batches * (batch_s or TASK_S) / TASK_S) + 1
            tasks = max(1, min(batches, self.pool.idle(), work))
            per_task = -(-batches // tasks) * n  # messages a task, whole batches
            return self.pool.submit_all(
                partial(self._concurrently, mq, pq, msgs, offsets, start, start + per_task)
                for start in range(lo, len(msgs), per_task)
            )
        except RuntimeError:  # the pool is shut down: the consumer is stopping
            return False

    def _later(self, delay_s: float, fn: Callable[..., object], *args: object) -> None:
        def go() -> None:
            with contextlib.suppress(RuntimeError):
                self.pool.submit(fn, *args)

        self.scheduler.call_later(delay_s, go)

    # -- concurrently ------------------------------------------------------------------

    def _concurrently(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        msgs: list[MessageExt],
        offsets: Sequence[int],
        lo: int,
        hi: int,
        *,
        here: bool = False,
    ) -> int:
        """``msgs[lo:hi]`` to the listener, batch after batch; where it stopped. ``here``:
        on a connection's reader thread, so no batch starts ``INLINE_S`` after the first,
        and a failed batch is sent back by a consume thread (its request would wait for
        this thread to read the answer). What is done is taken out of ``pq`` and its
        offset noted once every ``FLUSH_S`` and at the end (not a lock and a table update
        a batch: with a listener call a message, that bookkeeping cost more than the
        call); a failed batch at once."""
        pq.enter()  # before the dropped check: a queue given up waits for these batches
        i = lo
        try:
            n = self.settings.consume_message_batch_max_size
            listener, started, monotonic = self.consumer.listener, pq.started, time.monotonic
            success = ConsumeStatus.CONSUME_SUCCESS
            ctx = ConsumeContext(mq)
            hi = min(hi, len(msgs))
            t0 = flushed_at = monotonic()
            deadline = t0 + INLINE_S if here else math.inf
            done = i = lo
            # the loop below runs once a listener call (a message, by default): every
            # name it reads is a local, and a batch of one is made without a slice
            while i < hi:
                if pq.dropped:
                    break
                now = monotonic()
                if now > deadline:
                    break
                if now - flushed_at >= FLUSH_S and done < i:  # before the next call: a
                    self._done(mq, pq, msgs, offsets, done, i)  # slow one holds nothing done
                    done, flushed_at = i, now
                if n == 1:
                    j = i + 1
                    batch = [msgs[i]]
                    started[offsets[i]] = now
                else:
                    j = i + n if i + n < hi else hi
                    batch = msgs[i:j]
                    started.update(dict.fromkeys(offsets[i:j], now))
                try:
                    status = listener(batch, ctx)
                except Exception:
                    log.exception("the listener raised on %d message(s) of %s", len(batch), mq)
                    status = ConsumeStatus.RECONSUME_LATER
                if (
                    status is not success
                    and _concurrent_status(status) is ConsumeStatus.RECONSUME_LATER
                ):
                    self._done(mq, pq, msgs, offsets, done, i)
                    if here:
                        with contextlib.suppress(RuntimeError):  # shut down: stopping
                            self.pool.submit(self._failed, mq, pq, batch, offsets[i:j])
                    else:
                        self._failed(mq, pq, batch, offsets[i:j])
                    done = j
                i = j
            self._done(mq, pq, msgs, offsets, done, i)
            if i > lo:  # the average moves by how many batches this run measured
                batches = -(-(i - lo) // n)
                per_batch = (monotonic() - t0) / batches
                was = self._batch_s
                weight = batches / (batches + ESTIMATE_BATCHES)
                self._batch_s = per_batch if was is None else was + (per_batch - was) * weight
        finally:
            pq.leave()
        return i

    def _done(
        self,
        mq: MessageQueue,
        pq: ProcessQueue,
        msgs: list[MessageExt],
        offsets: Sequence[int],
        lo: int,
        hi: int,
    ) -> None:
        """``msgs[lo:hi]`` consumed: out of ``pq``, the offset to commit moves."""
        if lo >= hi:
            return
        self.consumer.offsets.update(mq, pq.remove(msgs[lo:hi], offsets[lo:hi]))
        if pq.parked_offset is not None:
            self.consumer.resume_pull(mq, pq)

    def _failed(
        self, mq: MessageQueue, pq: ProcessQueue, batch: list[MessageExt], offsets: Sequence[int]
    ) -> None:
        """A batch answered RECONSUME_LATER (or whose listener raised): sent back (the
        broker's retry topic holds it now), and what the broker did not take is
        consumed again here in ``RECONSUME_LOCALLY_DELAY_S``."""
        if not self.settings.clustering:
            log.warning("broadcasting: %d failed message(s) of %s dropped", len(batch), mq)
            self._done(mq, pq, batch, offsets, 0, len(batch))
            return
        kept = [k for k, m in enumerate(batch) if not self.send_back(mq, m, 0)]
        gone = set(kept)
        sent = [k for k in range(len(batch)) if k not in gone]
        self.consumer.offsets.update(
            mq, pq.remove([batch[k] for k in sent], [offsets[k] for k in sent])
        )
        if pq.parked_offset is not None:
            self.consumer.resume_pull(mq, pq)
        if kept:
            failed = [batch[k] for k in kept]
            for m in failed:
                m.reconsume_times += 1
            again = [offsets[k] for k in kept]
            self._later(
                RECONSUME_LOCALLY_DELAY_S, self._concurrently,
                mq, pq, failed, again, 0, len(failed),
            )  # fmt: skip

    def clean_expired(self, mq: MessageQueue, pq: ProcessQueue) -> int:
        """Concurrent (RocketMQ's cleanExpireMsg): while the message that holds ``pq``'s
        offset back has been in the listener longer than ``consume_timeout_minutes``,
        send it back (delay level 3: clustering; broadcasting drops it, as a failed
        batch) and take it out of ``pq``, so the offset moves; at most 16 a call.
        The listener call itself is not stopped (Python cannot); what it answers
        later changes nothing for that message. How many were sent back."""
        timeout_s = self.settings.consume_timeout_s
        cleaned = 0
        for _ in range(EXPIRED_PER_ROUND):
            if pq.dropped:
                break
            oldest = pq.oldest_started()
            if oldest is None or time.monotonic() - oldest[1] <= timeout_s:
                break
            msg = oldest[0]
            if self.settings.clustering:
                if not self.send_back(mq, msg, EXPIRED_DELAY_LEVEL):
                    break  # the broker did not take it: the next round tries again
                log.warning(
                    "%s offset %d in the listener over %g min: sent back",
                    mq, msg.queue_offset, self.settings.consume_timeout_minutes,
                )  # fmt: skip
            else:
                log.warning("broadcasting: %s offset %d timed out: dropped", mq, msg.queue_offset)
            self.consumer.offsets.update(mq, pq.remove([msg]))
            cleaned += 1
        return cleaned

    def send_back(self, mq: MessageQueue, msg: MessageExt, delay_level: int) -> bool:
        """CONSUMER_SEND_MSG_BACK to the broker that stores ``msg``; False if it failed."""
        consumer = self.consumer
        addr = consumer.brokers.master(mq.broker_name)
        if addr is None:
            return False
        ext = {
            "offset": str(msg.commit_log_offset),
            "group": consumer.group,
            "delayLevel": str(delay_level),
            "originMsgId": msg.msg_id,
            "originTopic": msg.topic,
            "unitMode": "false",
            "maxReconsumeTimes": str(self.settings.max_reconsume_times),
        }
        try:
            consumer.puller.rpc.call(
                addr, RequestCode.CONSUMER_SEND_MSG_BACK, ext,
                timeout_s=consumer.timeout_ms / 1000,
            )  # fmt: skip
        except PyMQError as exc:
            log.warning("sending %s back to %s failed: %s", msg.msg_id, addr, exc)
            return False
        return True

    # -- orderly -----------------------------------------------------------------------

    def _orderly(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        while True:
            if not pq.consume_lock.acquire(blocking=False):
                return  # another thread consumes this queue; it goes on until it is empty
            try:
                suspended = self._orderly_run(mq, pq)
            finally:
                pq.consume_lock.release()
            # messages that came while this thread was leaving: nobody else took them
            if suspended or pq.dropped or pq.is_empty() or not self.consumer.lock_valid(pq):
                return

    def _orderly_run(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Batches in order while the lock is valid; True if the queue was suspended."""
        s = self.settings
        while not pq.dropped and self.consumer.lock_valid(pq):
            pq.enter()
            try:
                msgs = pq.take(s.consume_message_batch_max_size)
                if not msgs:
                    return False
                ctx = ConsumeContext(mq, orderly=True)
                ctx.suspend_current_queue_time_ms = s.suspend_current_queue_time_ms
                try:
                    status = self.consumer.listener(msgs, ctx)
                except Exception:
                    log.exception("the orderly listener raised on %s", mq)
                    status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                if status in (ConsumeOrderlyStatus.SUCCESS, ConsumeOrderlyStatus.SUCCESS.value):
                    self.consumer.offsets.update(mq, pq.commit())
                    self.consumer.resume_pull(mq, pq)
                    continue
                back = pq.put_back()
                if max(m.reconsume_times for m in back) > s.max_reconsume_times and all(
                    self.send_back(mq, m, DLQ_LEVEL) for m in back
                ):
                    pq.take(len(back))  # in the DLQ now: past them
                    self.consumer.offsets.update(mq, pq.commit())
                    continue
                delay_s = ctx.suspend_current_queue_time_ms / 1000
                self._later(delay_s, self._orderly, mq, pq)
                return True
            finally:
                pq.leave()
        return False


def _concurrent_status(status: Any) -> ConsumeStatus:
    """A concurrent listener's answer as a ``ConsumeStatus`` (its value, a string, is
    taken too; anything else, None included, is RECONSUME_LATER)."""
    if isinstance(status, ConsumeStatus):
        return status
    if status == ConsumeStatus.CONSUME_SUCCESS.value:
        return ConsumeStatus.CONSUME_SUCCESS
    if status is not None:  # None (nothing returned) is RocketMQ's null: no warning
        log.warning("a listener answered %r: RECONSUME_LATER", status)
    return ConsumeStatus.RECONSUME_LATER
