"""SendFuture behaves as a concurrent.futures.Future for everything that takes one."""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import threading

import pytest

from connector.client.futures import SendFuture, settle_batch
from connector.client.results import SendResult
from connector.protocol.message import MessageQueue
from connector.protocol.status import SendStatus

QUEUE = MessageQueue("T", "broker-a", 1)


def batch_result(ids: list[str], first: int = 10) -> SendResult:
    offsets = tuple(f"OFF-{i}" for i in ids)
    return SendResult.of_batch(SendStatus.SEND_OK, QUEUE, first, ids, lambda: offsets)


def test_a_batch_settles_each_future_with_its_own_result() -> None:
    futures = [SendFuture() for _ in range(3)]
    plain: cf.Future[SendResult] = cf.Future()  # any waiter with set_result works too
    settle_batch([*futures, plain], batch_result(["a", "b", "c", "d"]))
    got = [f.result(0) for f in [*futures, plain]]
    assert [(r.msg_id, r.offset_msg_id, r.queue_offset) for r in got] == [
        ("a", "OFF-a", 10),
        ("b", "OFF-b", 11),
        ("c", "OFF-c", 12),
        ("d", "OFF-d", 13),
    ]
    assert futures[1].result() is futures[1].result()  # made once, when first read
    assert all(f.done() and not f.cancelled() and f.exception() is None for f in futures)


def test_a_batch_of_one_hands_its_result_over_as_it_is() -> None:
    future = SendFuture()
    result = batch_result(["only"])
    settle_batch([future], result)
    assert future.result() is result


def test_waiting_threads_wake_when_the_result_comes() -> None:
    future = SendFuture()
    got: list[SendResult] = []
    waiter = threading.Thread(target=lambda: got.append(future.result(10)))
    waiter.start()
    done, _ = cf.wait([future], timeout=0.05)
    assert not done
    future.set_result(batch_result(["x"]))
    waiter.join(10)
    assert got and got[0].msg_id == "x"
    assert cf.wait([future], timeout=1).done == {future}


def test_wait_as_completed_and_callbacks_see_a_pending_future_finish() -> None:
    futures = [SendFuture() for _ in range(3)]
    seen: list[SendFuture] = []
    futures[0].add_done_callback(seen.append)

    def settle() -> None:
        settle_batch(futures[:2], batch_result(["p", "q"]))
        futures[2].set_exception(RuntimeError("broker down"))

    timer = threading.Timer(0.05, settle)
    timer.start()
    finished = list(cf.as_completed(futures, timeout=10))
    timer.join()
    assert set(finished) == set(futures)
    assert seen == [futures[0]]
    with pytest.raises(RuntimeError, match="broker down"):
        futures[2].result(0)
    late: list[SendFuture] = []
    futures[1].add_done_callback(late.append)  # already done: runs at once
    assert late == [futures[1]]


def test_timeouts_cancel_and_a_second_settle() -> None:
    future = SendFuture()
    with pytest.raises(cf.TimeoutError):
        future.result(0.01)
    assert future.cancel() and future.cancelled() and future.done()
    with pytest.raises(cf.CancelledError):
        future.result(0)
    settle_batch([future], batch_result(["late"]))  # a cancelled future keeps its state
    assert future.cancelled()
    done = SendFuture()
    done.set_result(batch_result(["once"]))
    assert not done.cancel()
    with pytest.raises(cf.InvalidStateError):
        done.set_result(batch_result(["twice"]))


def test_asyncio_can_await_it() -> None:
    future = SendFuture()

    async def main() -> str:
        loop = asyncio.get_running_loop()
        loop.call_later(0.01, future.set_result, batch_result(["async"]))
        result: SendResult = await asyncio.wrap_future(future)
        return result.msg_id

    assert asyncio.run(main()) == "async"


def test_a_callback_alone_costs_no_condition() -> None:
    """Only a waiter needs the condition; a future watched by callbacks never makes one."""
    futures = [SendFuture() for _ in range(2)]
    seen: list[SendFuture] = []
    for f in futures:
        f.add_done_callback(seen.append)
    settle_batch(futures, batch_result(["a", "b"]))
    assert seen == futures
    assert all(f._cond is None for f in futures)
    assert futures[1].result(0).msg_id == "b"
