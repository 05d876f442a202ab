"""Futures, results and pulled messages the cyclic collector skips, and tracks again
once a cycle is possible.

Each test that checks a cycle is collected fails if ``track`` is dropped from
the place it tests (an untracked object in a cycle is never collected).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from collections.abc import Callable, Iterator

import pytest

from connector.client.futures import SendFuture, settle_batch
from connector.client.results import SendResult
from connector.protocol.message import Message, MessageQueue
from connector.protocol.pulled import PulledMessage, decode_records
from connector.protocol.status import SendStatus
from connector.protocol.untracked import COMPILED, pulled_messages
from tests.support.records import sample

QUEUE = MessageQueue("T", "broker-a", 1)

# `pip install` builds the module wherever a C compiler is (this repo's test machines)
pytestmark = pytest.mark.skipif(not COMPILED, reason="pymq was installed without its C module")


def one_result(msg_id: str = "id") -> SendResult:
    offset_id = f"OFF-{msg_id}"
    return SendResult(SendStatus.SEND_OK, msg_id, offset_id, QUEUE, 7, (msg_id,), (offset_id,))


def batch_result(count: int) -> SendResult:
    ids = [f"m{i}" for i in range(count)]
    offsets = tuple(f"OFF-{i}" for i in ids)
    return SendResult.of_batch(SendStatus.SEND_OK, QUEUE, 10, ids, lambda: offsets)


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def referring_to(future: SendFuture) -> Callable[[object], object]:
    return lambda _: future


def collected(ref: weakref.ref[object]) -> bool:
    gc.collect()
    return ref() is None


def test_futures_and_their_results_stay_out_of_the_collectors_lists() -> None:
    futures = [SendFuture() for _ in range(3)]
    assert not any(gc.is_tracked(f) for f in futures)
    settle_batch(futures, batch_result(3))
    results = [f.result() for f in futures]
    assert [r.queue_offset for r in results] == [10, 11, 12]
    assert not any(gc.is_tracked(f) for f in futures)
    assert not any(gc.is_tracked(r) for r in results)
    assert not gc.is_tracked(one_result())  # a lone send's
    lone = SendFuture()
    lone.set_result(one_result())
    assert not gc.is_tracked(lone)


def test_a_batchs_own_result_stays_tracked() -> None:
    # it holds a callable (the offsets, made when first read): not known to be acyclic
    assert gc.is_tracked(batch_result(3))


def test_a_callback_that_refers_to_its_future_is_collected() -> None:
    future = SendFuture()
    future.add_done_callback(referring_to(future))  # a cycle
    assert gc.is_tracked(future)
    ref = weakref.ref(future)
    del future
    assert collected(ref)


def test_an_exception_whose_traceback_refers_to_its_future_is_collected() -> None:
    def fail(future: SendFuture) -> None:
        try:
            raise TimeoutError("no answer")
        except TimeoutError as exc:
            future.set_exception(exc)  # exc -> traceback -> this frame -> future

    future = SendFuture()
    fail(future)
    assert gc.is_tracked(future)
    ref = weakref.ref(future)
    del future
    assert collected(ref)


def test_anything_but_a_result_given_to_set_result_tracks_the_future() -> None:
    future = SendFuture()
    holder: list[object] = []
    future.set_result(holder)  # type: ignore[arg-type]  # Future's API takes any value
    holder.append(future)
    assert gc.is_tracked(future)
    ref = weakref.ref(future)
    del future, holder
    assert collected(ref)


def test_without_the_compiled_module_everything_stays_tracked() -> None:
    # what an install without a C compiler runs: the import fails, the functions do nothing
    code = (
        "import gc, sys\n"
        "sys.modules['connector.protocol._gctrack'] = None\n"
        "from connector.protocol import untracked\n"
        "from connector.client.futures import SendFuture, settle_batch\n"
        "from connector.client.results import SendResult\n"
        "from connector.protocol.message import MessageQueue\n"
        "from connector.protocol.status import SendStatus\n"
        "f = SendFuture()\n"
        "q = MessageQueue('T', 'b', 0)\n"
        "r = SendResult(SendStatus.SEND_OK, 'a', 'b', q, 3, ('a',), ('b',))\n"
        "settle_batch([f], r)\n"
        "assert f.result() is r\n"
        "from connector.protocol.pulled import decode_records\n"
        "messages = decode_records(bytes.fromhex(sys.argv[1]))\n"
        "assert ','.join(m.body.hex() for m in messages) == sys.argv[2]\n"
        "print(untracked.COMPILED, gc.is_tracked(f), gc.is_tracked(r),\n"
        "      all(gc.is_tracked(m) for m in messages))\n"
    )
    data = sample()
    bodies = ",".join(m.body.hex() for m in decode_records(data))
    out = subprocess.run(
        [sys.executable, "-c", code, data.hex(), bodies],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "True", "True"]


def test_pulled_messages_stay_out_until_their_reader_sets_an_attribute() -> None:
    messages = decode_records(sample())
    assert not any(gc.is_tracked(m) for m in messages)
    first = messages[0]
    assert (first.topic, first.tags, first.queue_offset) == ("T", "TagA", 1000)
    assert not gc.is_tracked(first)  # fields decoded on first read: plain values
    first.note = "seen"  # type: ignore[attr-defined]
    assert gc.is_tracked(first)


def test_a_pulled_message_that_refers_to_itself_is_collected() -> None:
    messages = decode_records(sample())
    msg = messages[1]
    msg.context = [msg]  # type: ignore[attr-defined]  # a reader's own cycle
    ref = weakref.ref(msg)
    del msg, messages
    assert collected(ref)


def test_pulled_messages_cuts_the_bodies_and_checks_its_arguments() -> None:
    data = b"0123456789"
    made = pulled_messages(PulledMessage, None, data, [0, 2, 5], [2, 5, 10], {1: b"inflated"})
    assert [(m._i, m.body) for m in made] == [(0, b"01"), (1, b"inflated"), (2, b"56789")]
    assert not any(gc.is_tracked(m) for m in made) or not COMPILED
    assert pulled_messages(PulledMessage, None, data, [], [], {}) == []
    with pytest.raises(TypeError):  # not a list
        pulled_messages(PulledMessage, None, data, (0,), [1], {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        pulled_messages("PulledMessage", None, data, [0], [1], {})  # type: ignore[arg-type]
    with pytest.raises((AttributeError, TypeError)):  # slots the class does not have
        pulled_messages(SendResult, None, data, [0], [1], {})
    with pytest.raises(ValueError):  # a different number of starts and ends
        pulled_messages(PulledMessage, None, data, [0, 1], [1], {})
    if COMPILED:  # the compiled one checks each slice against the bytes
        with pytest.raises(ValueError):
            pulled_messages(PulledMessage, None, data, [4], [11], {})
        with pytest.raises(ValueError):
            pulled_messages(PulledMessage, None, data, [5], [4], {})


def test_messages_stay_out_and_a_subclass_stays_tracked() -> None:
    msg = Message(topic="T", body=b"x", tags="A", keys="k1 k2", properties={"a": "b"})
    assert not gc.is_tracked(msg)
    msg.keys = ["k3"]
    msg.properties["c"] = "d"
    assert not gc.is_tracked(msg)

    class Annotated(Message):  # has a __dict__: may hold anything
        pass

    sub = Annotated(topic="T", body=b"x")
    assert gc.is_tracked(sub)
    sub.note = sub  # type: ignore[attr-defined]
    ref = weakref.ref(sub)
    del sub
    assert collected(ref)
