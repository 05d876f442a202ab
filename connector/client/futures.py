"""``SendFuture``: the future ``Producer.send_async`` returns, cheap enough for one per message.

A ``concurrent.futures.Future`` builds a ``Condition`` (and with it an
``RLock`` and a waiter list) when it is made: about a quarter of the
client's CPU for a message sent with ``send_async``. A ``SendFuture`` is a
``Future`` (``concurrent.futures.wait``, ``as_completed`` and
``asyncio.wrap_future`` take it) whose state is guarded by one lock shared
by all of them, held for a few attribute writes; its ``Condition`` is made
only if someone waits on it while it is pending.

A future settled with a batch's result (``settle_batch``) holds that result
and its index; its own ``SendResult`` is made when first read, so a caller
that only counts successes does not pay for one a message.

A future is left out of the cyclic garbage collector's lists while it holds
only plain values and results (``connector.protocol.untracked``), and put back
before it stores anything that could refer to it: a callback, a waiter, a
condition, an exception. An attribute of its own set on it by an application
is not watched: one that makes a reference cycle keeps the future alive.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, InvalidStateError, TimeoutError
from concurrent.futures._base import (  # the state names Future's own methods compare with
    CANCELLED,
    CANCELLED_AND_NOTIFIED,
    FINISHED,
    PENDING,
    RUNNING,
)
from typing import Any

from connector.client.results import SendResult
from connector.protocol.untracked import track, untrack

__all__ = ["SendFuture", "settle_batch"]

# guards every SendFuture's state; held only for a few attribute reads and writes
_GUARD = threading.Lock()
_futures_log = logging.getLogger("concurrent.futures")  # where Future logs it
_ENDED = (CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED)


class SendFuture(Future):  # type: ignore[type-arg]  # Future[SendResult], not generic at runtime
    """A ``Future[SendResult]`` without a lock of its own until someone waits."""

    # Future.__init__ is not called: the attributes its methods use are made here, or
    # lazily (_condition, _waiters, _done_callbacks) by the properties below
    def __init__(self) -> None:
        self._state = PENDING
        self._value: Any = None  # the SendResult, or the batch's when _index >= 0
        self._index = -1
        self._exception: BaseException | None = None
        self._cond: threading.Condition | None = None
        self._extra: list[Any] | None = None  # [waiters, callbacks], made when first needed
        untrack(self)

    # -- what Future's own methods (and concurrent.futures.wait) read ---------------------

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _GUARD:
                cond = self._cond
                if cond is None:
                    track(self)
                    cond = self._cond = threading.Condition()
        return cond

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        waiters: list[Any] = self._lists()[0]
        return waiters

    @property
    def _done_callbacks(self) -> list[Any]:
        callbacks: list[Any] = self._lists()[1]
        return callbacks

    @property
    def _result(self) -> SendResult | None:  # type: ignore[override]
        return self._get() if self._state == FINISHED and self._exception is None else None

    def _lists(self) -> list[Any]:
        extra = self._extra
        if extra is None:
            with _GUARD:
                extra = self._extra
                if extra is None:
                    track(self)  # waiters and callbacks may refer to the future
                    extra = self._extra = [[], []]
        return extra

    def _get(self) -> SendResult:
        if self._index >= 0:
            self._value = self._value.one(self._index)
            self._index = -1
        return self._value  # type: ignore[no-any-return]

    # -- the Future API ------------------------------------------------------------------

    def done(self) -> bool:
        return self._state in _ENDED

    def cancelled(self) -> bool:
        return self._state in (CANCELLED, CANCELLED_AND_NOTIFIED)

    def running(self) -> bool:
        return self._state == RUNNING

    def cancel(self) -> bool:
        with _GUARD:
            if self._state in (RUNNING, FINISHED):
                return False
            if self._state in (CANCELLED, CANCELLED_AND_NOTIFIED):
                return True
            # nothing runs it: waiters of concurrent.futures.wait() learn it at once
            self._state = CANCELLED_AND_NOTIFIED
        self._ended(cancelled=True)
        return True

    def result(self, timeout: float | None = None) -> SendResult:
        if self._state != FINISHED:
            self._wait(timeout)
        if self._exception is not None:
            raise self._exception
        return self._get()

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state != FINISHED:
            self._wait(timeout)
        return self._exception

    def add_done_callback(self, fn: Callable[[Future[SendResult]], object]) -> None:
        with _GUARD:
            if self._state not in _ENDED:
                if self._extra is None:
                    track(self)
                    self._extra = [[], []]
                self._extra[1].append(fn)
                return
        _call(fn, self)

    def set_result(self, result: SendResult) -> None:
        self._settle(result, -1, None)

    def set_exception(self, exception: BaseException | None) -> None:
        self._settle(None, -1, exception)

    # -- settling ------------------------------------------------------------------------

    def _settle(self, value: Any, index: int, exc: BaseException | None) -> None:
        with _GUARD:
            if self._state in _ENDED:
                raise InvalidStateError(f"{self._state}: {self!r}")
            if exc is not None or type(value) is not SendResult:
                track(self)  # a traceback's frames (or whatever was given) may refer to it
            self._value, self._index, self._exception = value, index, exc
            self._state = FINISHED
            watched = self._cond is not None or self._extra is not None
        if watched:
            self._ended(cancelled=False)

    def _ended(self, *, cancelled: bool) -> None:
        """Wake whoever waits and run the callbacks (the state is final already).

        Waiters (``result()``, ``concurrent.futures.wait``) made the condition before
        they looked at the state, so a future without one has nobody to wake; its
        callbacks alone cost no condition."""
        cond = self._cond
        if cond is not None:
            with cond:  # concurrent.futures.wait installs its waiters holding it
                extra = self._extra
                for waiter in extra[0] if extra is not None else ():
                    if cancelled:
                        waiter.add_cancelled(self)
                    elif self._exception is not None:
                        waiter.add_exception(self)
                    else:
                        waiter.add_result(self)
                cond.notify_all()
        extra = self._extra
        if extra is not None:
            for fn in list(extra[1]):
                _call(fn, self)

    def _wait(self, timeout: float | None) -> None:
        cond = self._condition  # from now on _settle sees it and notifies
        with cond:
            cond.wait_for(lambda: self._state in _ENDED, timeout)
            state = self._state
        if state in (CANCELLED, CANCELLED_AND_NOTIFIED):
            raise CancelledError()
        if state != FINISHED:
            raise TimeoutError()

    def __repr__(self) -> str:
        return f"<SendFuture at {id(self):#x} state={self._state.lower()}>"


def settle_batch(waiters: Sequence[Any], result: SendResult) -> None:
    """Every waiter of a batch (in the batch's order) done with its message's result:
    ``SendFuture``s in one lock round (woken only if someone watches them), others
    (anything with ``set_result``) each with a ``SendResult`` of its own."""
    watched: list[SendFuture] = []
    others: list[tuple[int, Any]] = []
    single = len(waiters) == 1  # its result is the batch's
    with _GUARD:
        for index, future in enumerate(waiters):
            if type(future) is not SendFuture:
                others.append((index, future))
            elif future._state == PENDING:
                future._value, future._index = result, -1 if single else index
                future._state = FINISHED
                if future._cond is not None or future._extra is not None:
                    watched.append(future)
    for future in watched:
        future._ended(cancelled=False)
    for index, waiter in others:
        with contextlib.suppress(InvalidStateError):  # a Future its caller cancelled
            waiter.set_result(result if single else result.one(index))


def _call(fn: Callable[[Future[SendResult]], object], future: SendFuture) -> None:
    try:
        fn(future)
    except Exception:  # noqa: BLE001 - as Future does: a callback error is logged, not raised
        _futures_log.exception("exception calling callback for %r", future)
