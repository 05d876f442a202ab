"""PullRequestHoldService on a real event loop: who is answered, when, and only once."""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from broker.longpoll import HeldPull, PullRequestHoldService

T = TypeVar("T")


def run(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(asyncio.wait_for(main(), 10))


def test_a_held_pull_is_answered_inside_the_notify_of_its_append() -> None:
    async def main() -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
        hold = PullRequestHoldService(asyncio.get_running_loop())
        calls: list[tuple[str, bool]] = []
        hold.hold("T", 0, 5, 10.0, lambda: 5, lambda ok: calls.append(("q0", ok)))
        hold.hold("T", 1, 5, 10.0, lambda: 5, lambda ok: calls.append(("q1", ok)))
        hold.notify("T", 0, 5)  # not past its offset: still held
        assert calls == []
        hold.notify("T", 0, 6)
        within_notify = list(calls)  # no loop step ran since: answered inside the notify
        hold.wake_all()  # the other queue's, on shutdown
        return within_notify, calls

    assert run(main) == ([("q0", True)], [("q0", True), ("q1", True)])


def test_a_held_pull_times_out_once_and_a_later_append_does_not_call_it_again() -> None:
    async def main() -> list[bool]:
        hold = PullRequestHoldService(asyncio.get_running_loop())
        calls: list[bool] = []
        hold.hold("T", 0, 0, 0.05, lambda: 0, calls.append)
        await asyncio.sleep(0.3)
        hold.notify("T", 0, 1)
        return calls

    assert run(main) == [False]


def test_an_append_already_there_answers_at_once() -> None:
    async def main() -> tuple[list[bool], bool]:
        hold = PullRequestHoldService(asyncio.get_running_loop())
        calls: list[bool] = []
        held = hold.hold("T", 0, 3, 10.0, lambda: 4, calls.append)  # landed meanwhile
        return calls, held.done

    assert run(main) == ([True], True)


def test_a_cancelled_pull_is_never_answered_and_is_forgotten() -> None:
    async def main() -> tuple[list[bool], bool]:
        hold = PullRequestHoldService(asyncio.get_running_loop())
        calls: list[bool] = []
        held = hold.hold("T", 0, 0, 0.05, lambda: 0, calls.append)
        held.cancel()  # its connection closed
        hold.notify("T", 0, 1)
        await asyncio.sleep(0.2)  # past its timeout too
        return calls, ("T", 0) in hold._waiters

    assert run(main) == ([], False)


def test_an_append_on_another_thread_answers_on_the_loop() -> None:
    async def main() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        hold = PullRequestHoldService(loop)
        answered = asyncio.Event()
        where: list[bool] = []

        def on_done(ok: bool) -> None:
            where.append(threading.get_ident() == loop_thread)
            answered.set()

        loop_thread = threading.get_ident()
        hold.hold("T", 0, 0, 10.0, lambda: 0, on_done)
        await asyncio.to_thread(hold.notify, "T", 0, 1)
        await answered.wait()
        return where == [True], ("T", 0) in hold._waiters

    assert run(main) == (True, False)


def test_a_failing_answer_is_logged_and_the_others_are_still_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> list[bool]:
        hold = PullRequestHoldService(asyncio.get_running_loop())
        calls: list[bool] = []

        def broken(ok: bool) -> None:
            raise RuntimeError("a defect")

        hold.hold("T", 0, 0, 10.0, lambda: 0, broken)
        hold.hold("T", 0, 0, 10.0, lambda: 0, calls.append)
        hold.notify("T", 0, 1)  # the append that woke them does not see the error
        return calls

    with caplog.at_level(logging.ERROR, logger="broker.longpoll"):
        assert run(main) == [True]
    assert "held pull" in caplog.text


def test_wait_is_hold_as_a_coroutine_and_a_cancelled_wait_forgets_its_waiter() -> None:
    async def main() -> tuple[bool, bool, bool]:
        hold = PullRequestHoldService(asyncio.get_running_loop())
        waiting = asyncio.ensure_future(hold.wait("T", 0, 0, 10.0, lambda: 0))
        await asyncio.sleep(0)
        hold.notify("T", 0, 1)
        woke = await waiting
        timed_out = not await hold.wait("T", 0, 1, 0.05, lambda: 1)
        cancelled = asyncio.ensure_future(hold.wait("T", 0, 1, 10.0, lambda: 1))
        await asyncio.sleep(0)
        cancelled.cancel()
        await asyncio.sleep(0)
        return woke, timed_out, ("T", 0) in hold._waiters

    assert run(main) == (True, True, False)


def test_a_settled_held_pull_is_freed_without_the_cyclic_collector() -> None:
    """Answered, timed out or cancelled, a held pull leaves no reference cycle (the
    remoting edge's callback keeps its held pull, as ``PullHandlers._hold`` does):
    refcounting frees it, so no collection pauses the loop for it."""

    async def main() -> int:
        hold = PullRequestHoldService(asyncio.get_running_loop())
        expired = asyncio.Event()

        def held_by_its_callback(queue_id: int, timeout_s: float) -> None:
            owed: list[HeldPull] = []

            def on_done(ok: bool) -> None:
                if owed and not ok:
                    expired.set()

            owed.append(hold.hold("T", queue_id, 0, timeout_s, lambda: 0, on_done))

        held_by_its_callback(0, 10.0)
        hold.notify("T", 0, 1)  # answered
        held_by_its_callback(1, 0.01)
        await asyncio.wait_for(expired.wait(), 5)  # timed out
        held_by_its_callback(2, 10.0)
        hold._waiters[("T", 2)][0].cancel()  # its connection closed
        await asyncio.sleep(0)
        gc.collect()
        return sum(type(o) is HeldPull for o in gc.garbage)

    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what only the collector could free lands in gc.garbage
    try:
        assert run(main) == 0
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
