"""The asynchronous send driver: the send path of ``Producer._send`` without a thread
waiting. Each attempt is a request in flight on the broker's connection whose
answer (or timeout) decides, on the connection's reader thread; a retry runs on
the producer's pool, as it may look a route up (blocking), which must not hold a
reader thread. ``done(result, error)`` runs once per send.

``Slots`` counts the sends in flight (``client_async_semaphore_value``).
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor

from connector.client.accumulator import Done
from connector.client.encoding import Encoded
from connector.client.latency import split_send_timeout
from connector.client.results import SendContext, SendResult
from connector.client.rpc import Rpc
from connector.client.send_policy import SendPolicy
from connector.client.send_request import SendRequests
from connector.errors import PyMQError, RemotingError, RemotingTimeoutError
from connector.protocol.message import Message, MessageQueue
from connector.protocol.remoting import RemotingCommand

__all__ = ["AsyncSender", "Slots", "run_callback", "settle"]

log = logging.getLogger(__name__)


class AsyncSender:
    def __init__(
        self,
        policy: SendPolicy,
        requests: SendRequests,
        rpc: Rpc,
        executor: Callable[[], ThreadPoolExecutor | None],
        send_msg_timeout_ms: int,
    ) -> None:
        self.policy = policy
        self.requests = requests
        self.rpc = rpc
        self._executor = executor
        self.send_msg_timeout_ms = send_msg_timeout_ms

    def send(
        self,
        encoded: Encoded,
        msg: Message | list[Message],
        retries: int,
        done: Done,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
    ) -> None:
        deadline = time.monotonic() + self.send_msg_timeout_ms / 1000
        state = _AsyncSend(encoded, msg, 1 + retries, deadline, queue, sharding_key, done)
        self._attempt(state)

    def _attempt(self, st: _AsyncSend) -> None:
        policy = self.policy
        topic = st.encoded.topic
        while st.attempt < st.attempts:
            remaining_ms = (st.deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                break
            attempt = st.attempt
            st.attempt += 1
            try:
                mq, addr = policy.target(topic, st.last_broker, st.queue, st.sharding_key)
            except PyMQError as exc:
                st.done(None, exc)
                return
            if addr is None:
                st.last_error, st.last_broker = policy.no_master(mq), mq.broker_name
                continue
            ctx = policy.begin(st.msg, mq, addr, attempt)
            timeout_s = split_send_timeout(remaining_ms, st.attempts - attempt) / 1000
            t0 = time.monotonic()

            def answered(
                resp: RemotingCommand | None,
                err: BaseException | None,
                mq: MessageQueue = mq,
                addr: str = addr,
                ctx: SendContext = ctx,
                t0: float = t0,
            ) -> None:
                self._answered(st, mq, addr, ctx, t0, resp, err)

            try:
                conn = self.rpc.client.connection(addr)
                conn.invoke_async(self.requests.command(mq, st.encoded), answered, timeout_s)
            except PyMQError as exc:
                if self._failed(st, mq, ctx, t0, exc):
                    continue
                return
            return
        st.done(None, st.last_error or timed_out(topic, self.send_msg_timeout_ms))

    def _answered(
        self,
        st: _AsyncSend,
        mq: MessageQueue,
        addr: str,
        ctx: SendContext,
        t0: float,
        resp: RemotingCommand | None,
        err: BaseException | None,
    ) -> None:
        """A send's answer, on the connection's reader thread (or the timeout's)."""
        result: SendResult | None = None
        if resp is not None:
            try:
                result = self.requests.result(addr, mq, st.encoded, resp)
            except PyMQError as exc:
                err = exc
            except Exception as exc:  # noqa: BLE001 - a defect: the sender learns it
                st.done(None, exc)
                return
        if result is None:
            failure = err if isinstance(err, PyMQError) else RemotingError(str(err))
            if self._failed(st, mq, ctx, t0, failure):
                self._retry(st, failure)
            return
        self.policy.ended(ctx, t0, result, None)
        if self.policy.goes_elsewhere(result, st.attempt < st.attempts):
            st.last_broker = mq.broker_name
            self._retry(st, None)
            return
        st.done(result, None)

    def _failed(
        self, st: _AsyncSend, mq: MessageQueue, ctx: SendContext, t0: float, exc: PyMQError
    ) -> bool:
        """Record a failed attempt; True if another may follow, else ``done`` was called."""
        self.policy.ended(ctx, t0, None, exc)
        if not self.policy.may_retry(exc) or st.attempt >= st.attempts:
            st.done(None, exc)
            return False
        log.debug("send attempt %d to %s failed: %s", st.attempt, mq.broker_name, exc)
        st.last_error, st.last_broker = exc, mq.broker_name
        return True

    def _retry(self, st: _AsyncSend, exc: PyMQError | None) -> None:
        """The next attempt, on the producer's pool (see the module)."""

        def run() -> None:
            if exc is not None and exc.invalid_metadata:
                self.policy.refresh_route(st.encoded.topic)
            self._attempt(st)

        executor = self._executor()
        try:
            if executor is None:
                raise RuntimeError("shut down")
            executor.submit(run)
        except RuntimeError:  # shut down: the send ends with its last error
            st.done(None, st.last_error or PyMQError("this producer was shut down"))


class Slots:
    """``client_async_semaphore_value``: async sends in flight, counted. A free slot
    is a token in a deque (its pop and extend are atomic, no lock to take); a sender
    waits on the condition only when all are taken."""

    __slots__ = ("_cond", "_tokens", "_waiting", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._tokens = collections.deque(itertools.repeat(None, limit))
        self._cond = threading.Condition(threading.Lock())
        self._waiting = 0

    def acquire(self, timeout: float) -> bool:
        try:
            self._tokens.pop()
            return True
        except IndexError:
            pass
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    try:
                        self._tokens.pop()
                        return True
                    except IndexError:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return False
                        self._cond.wait(left)
            finally:
                self._waiting -= 1

    def release(self, count: int) -> None:
        self._tokens.extend(itertools.repeat(None, count))
        if self._waiting:  # a waiter counted itself before its last look at the tokens
            with self._cond:
                self._cond.notify(count)


class _AsyncSend:
    """One asynchronous send across its attempts."""

    __slots__ = (
        "attempt", "attempts", "deadline", "done", "encoded", "last_broker", "last_error",
        "msg", "queue", "sharding_key",
    )  # fmt: skip

    def __init__(
        self,
        encoded: Encoded,
        msg: Message | list[Message],
        attempts: int,
        deadline: float,
        queue: MessageQueue | None,
        sharding_key: str | None,
        done: Done,
    ) -> None:
        self.encoded = encoded
        self.msg = msg
        self.attempts = attempts
        self.attempt = 0
        self.deadline = deadline
        self.queue = queue
        self.sharding_key = sharding_key
        self.done = _once(done)
        self.last_broker: str | None = None
        self.last_error: PyMQError | None = None


def _once(done: Done) -> Done:
    fired = threading.Lock()

    def call(result: SendResult | None, error: BaseException | None) -> None:
        if fired.acquire(blocking=False):
            done(result, error)

    return call


def settle(future: Future[SendResult], slots: Slots) -> Done:
    """A send's end into its future, its slot given back."""

    def done(result: SendResult | None, error: BaseException | None) -> None:
        slots.release(1)
        with contextlib.suppress(InvalidStateError):  # cancelled by its caller
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]

    return done


def timed_out(topic: str, budget_ms: int) -> RemotingTimeoutError:
    return RemotingTimeoutError(
        f"send to {topic} timed out after {budget_ms} ms (send_msg_timeout_ms)"
    )


def run_callback(
    callback: Callable[[SendResult | None, BaseException | None], None],
    future: Future[SendResult],
) -> None:
    exc = future.exception()
    try:
        callback(None if exc else future.result(), exc)
    except Exception:  # the caller's callback: log, never kill the worker
        log.exception("send_async callback failed")
