"""ProduceAccumulator's own rules: when a batch goes, what it holds, who gets what.

The sender here is a function that records each batch and answers when the
test lets it: the rules under test are the accumulator's, and only a sender
the test controls can hold a batch "on the wire" at a chosen moment. The
send path itself is covered against real brokers in tests/connector/e2e.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest

from connector.client.accumulator import (
    IN_FLIGHT_PER_KEY,
    SECOND_BELOW_MSGS,
    BatchKey,
    Done,
    Gathered,
    ProduceAccumulator,
    SyncWaiter,
    split_batch_result,
    wake_in_chain,
)
from connector.client.futures import SendFuture
from connector.client.results import SendResult
from connector.errors import PyMQError, RemotingTimeoutError
from connector.protocol.message import Message, MessageQueue
from connector.protocol.status import SendStatus

KEY: BatchKey = ("T", None, True)  # send_async's: batches started by the sender thread
SYNC_KEY: BatchKey = ("T", None, False)  # send's: batches started by their caller
QUEUE = MessageQueue("T", "broker-a", 3)


class Wire:
    """A sender whose batches stay in flight until ``release`` answers them (or that
    answers at once, with ``hold=False``), as a connection's reader thread would."""

    def __init__(self, *, hold: bool = True) -> None:
        self.batches: list[list[str]] = []
        self.sent = threading.Semaphore(0)
        self.hold = hold
        self.fail: BaseException | None = None
        self.gate: threading.Event | None = None  # set: a call waits for it once sent
        self._lock = threading.Lock()
        self._pending: list[tuple[Gathered, Done]] = []
        self._credits = 0

    def __call__(self, key: BatchKey, batch: Gathered, done: Done) -> None:
        self.batches.append(ids_of(batch))
        self.sent.release()
        if self.gate is not None:
            assert self.gate.wait(10), "the test never opened the gate"
        with self._lock:
            now = not self.hold or self._credits > 0
            if now and self.hold:
                self._credits -= 1
            if not now:
                self._pending.append((batch, done))
        if now:
            self._answer(batch, done)

    def _answer(self, batch: Gathered, done: Done) -> None:
        if self.fail is not None:
            if not isinstance(self.fail, Exception):
                raise self.fail  # a KeyboardInterrupt in the thread that sends
            done(None, self.fail)
            return
        ids = ids_of(batch)
        offsets = tuple(f"OFF-{i}" for i in ids)
        done(SendResult.of_batch(SendStatus.SEND_OK, QUEUE, 100, ids, lambda: offsets), None)

    def wait_sent(self, count: int) -> None:
        for _ in range(count):
            assert self.sent.acquire(timeout=10), "a batch was never sent"

    def release(self, count: int = 1) -> None:
        """Answer the ``count`` oldest batches in flight (or the next ones sent)."""
        with self._lock:
            self._credits += count
        while True:
            with self._lock:
                if not self._pending or self._credits <= 0:
                    return
                self._credits -= 1
                batch, done = self._pending.pop(0)
            self._answer(batch, done)


def accumulator(wire: Wire, **kw: int) -> ProduceAccumulator:
    opts = {"max_delay_ms": 10_000, "max_bytes": 1 << 20, "total_max_bytes": 1 << 30}
    opts.update(kw)
    return ProduceAccumulator(wire, name="test", **opts)


def ids_of(batch: Gathered) -> list[str]:
    """The test's message ids: each message's body."""
    return [m.body.decode() for m in batch.msgs]


def add(acc: ProduceAccumulator, msg_id: str, size: int = 10, key: BatchKey = KEY) -> Future:
    future = SendFuture()
    assert acc.add(key, Message("T", msg_id.encode()), size, future)
    return future


def fill_wire(acc: ProduceAccumulator, wire: Wire) -> list[Future]:
    """``IN_FLIGHT_PER_KEY`` async batches of one message each on the wire of KEY,
    each sent (by the sender thread) before the next is added."""
    futures = []
    for i in range(IN_FLIGHT_PER_KEY):
        futures.append(add(acc, f"w{i}"))
        wire.wait_sent(1)
    return futures


def test_a_lone_message_goes_at_once_and_later_ones_gather_behind_it() -> None:
    wire = Wire()
    acc = accumulator(wire)  # max_delay_ms 10 s: a lone message waits for no timer
    try:
        first = fill_wire(acc, wire)
        assert wire.batches == [["w0"], ["w1"]]  # each went alone: the wire was free
        later = [add(acc, f"b{i}") for i in range(5)]
        assert not any(f.done() for f in first + later)
        wire.release(IN_FLIGHT_PER_KEY)
        wire.wait_sent(1)  # the five, as one batch, as soon as the wire freed up
        wire.release()
        results = [f.result(10) for f in first + later]
        assert wire.batches[-1] == [f"b{i}" for i in range(5)]
        assert [r.msg_id for r in results[-5:]] == [f"b{i}" for i in range(5)]
        # one result a message: its own ids and the consecutive queue offsets of its batch
        assert [r.queue_offset for r in results[-5:]] == [100, 101, 102, 103, 104]
        assert results[-1].offset_msg_id == "OFF-b4" and results[-1].msg_ids == ("b4",)
        assert all(r.queue == QUEUE and r.status is SendStatus.SEND_OK for r in results)
    finally:
        wire.hold = False
        wire.release(100)
        acc.close()


def test_a_big_batch_on_the_wire_holds_it_until_it_lands() -> None:
    """Light load, a second batch goes beside a small one; under load (a batch of
    ``SECOND_BELOW_MSGS`` or more on the wire) messages gather behind it instead."""
    assert IN_FLIGHT_PER_KEY == 2
    wire = Wire()
    size = SECOND_BELOW_MSGS + 1
    acc = accumulator(wire, max_bytes=10 * size)  # `size` messages of 10 bytes fill one
    try:
        small = [add(acc, f"a{i}", key=SYNC_KEY) for i in range(2)]  # each went alone
        big = [add(acc, f"b{i}", key=SYNC_KEY) for i in range(size)]  # full: went at once
        assert wire.batches == [["a0"], ["a1"], [f"b{i}" for i in range(size)]]
        wire.release(2)  # the small ones land: only the big one is on the wire
        assert [f.result(10).msg_id for f in small] == ["a0", "a1"]
        behind = add(acc, "c0", key=SYNC_KEY)
        assert len(wire.batches) == 3  # a sync batch starts in add() when it may go
        wire.release(1)  # the big one lands: the one behind it goes
        assert wire.batches[-1] == ["c0"]
        wire.release(1)
        assert behind.result(10).msg_id == "c0"
        assert [f.result(10).msg_id for f in big] == [f"b{i}" for i in range(size)]
    finally:
        wire.hold = False
        wire.release(100)
        acc.close()


def test_batch_max_bytes_closes_a_batch_and_keys_gather_apart() -> None:
    wire = Wire()
    acc = accumulator(wire, max_bytes=100)
    try:
        blocker = fill_wire(acc, wire)
        futures = [add(acc, f"m{i}", size=30) for i in range(7)]  # 3 fit in 100 bytes
        wire.wait_sent(2)  # two full batches went although the wire was busy
        assert wire.batches[-2:] == [["m0", "m1", "m2"], ["m3", "m4", "m5"]]
        other = add(acc, "o0", key=("T", QUEUE, True))  # another key: a wire of its own
        wire.wait_sent(1)
        assert wire.batches[-1] == ["o0"]
        wire.hold = False
        wire.release(100)
        for f in [*blocker, *futures, other]:
            assert f.result(10).status is SendStatus.SEND_OK
        assert ["m6"] in wire.batches
    finally:
        wire.hold = False
        wire.release(100)
        acc.close()


def test_a_batch_waits_at_most_batch_max_delay() -> None:
    wire = Wire()
    acc = accumulator(wire, max_delay_ms=50)
    try:
        fill_wire(acc, wire)
        late = add(acc, "late")
        wire.wait_sent(1)  # the timer sent it while the wire was still busy
        assert wire.batches[-1] == ["late"]
        wire.release(IN_FLIGHT_PER_KEY + 1)
        assert late.result(10).msg_id == "late"
    finally:
        wire.hold = False
        wire.release(100)
        acc.close()


def test_past_total_batch_max_bytes_the_caller_sends_alone() -> None:
    wire = Wire()
    acc = accumulator(wire, total_max_bytes=25)
    try:
        held = add(acc, "a", size=20)
        wire.wait_sent(1)
        refused: Future[SendResult] = Future()
        assert not acc.add(KEY, Message("T", b"b"), 10, refused)
        wire.release()
        held.result(10)
        again = add(acc, "c", size=20)  # the answer gave its bytes back
        wire.wait_sent(1)
        wire.release()
        assert again.result(10).msg_id == "c"
    finally:
        wire.hold = False
        wire.release(100)
        acc.close()


def test_every_waiter_of_a_failed_batch_gets_the_error() -> None:
    wire = Wire(hold=False)
    wire.fail = RemotingTimeoutError("the broker did not answer")
    acc = accumulator(wire)
    try:
        futures = [add(acc, f"f{i}") for i in range(4)]
        for f in futures:
            assert isinstance(f.exception(10), RemotingTimeoutError)
        waiter = SyncWaiter()
        assert acc.add(KEY, Message("T", b"s"), 1, waiter)
        with pytest.raises(RemotingTimeoutError, match="did not answer"):
            waiter.wait(10)
    finally:
        acc.close()


def test_a_caller_starts_its_own_batch_when_the_wire_is_free() -> None:
    wire = Wire(hold=False)
    acc = accumulator(wire)
    try:
        waiter = SyncWaiter()
        threads_before = threading.active_count()
        assert acc.add(SYNC_KEY, Message("T", b"s1"), 1, waiter)
        result = waiter.wait(0)  # answered before add returned: this thread sent it
        assert result is not None and result.msg_id == "s1"
        assert threading.active_count() == threads_before  # no thread was needed
    finally:
        acc.close()


def test_a_burst_of_async_sends_goes_as_one_batch() -> None:
    """Async messages added while the sender thread is busy (as while their caller holds
    the GIL) wait for it and go together, although the wire has room."""
    wire = Wire(hold=False)
    wire.gate = threading.Event()
    acc = accumulator(wire)
    try:
        first = add(acc, "a")
        wire.wait_sent(1)  # the sender thread is inside the wire's call, held at the gate
        burst = [add(acc, f"b{i}") for i in range(5)]
        wire.gate.set()
        assert [f.result(10).msg_id for f in burst] == [f"b{i}" for i in range(5)]
        assert first.result(10).msg_id == "a"
        assert wire.batches == [["a"], [f"b{i}" for i in range(5)]]
    finally:
        wire.gate = None
        acc.close()


def test_the_sender_thread_survives_a_keyboard_interrupt_from_a_send() -> None:
    wire = Wire(hold=False)
    wire.fail = KeyboardInterrupt()
    acc = accumulator(wire)
    try:
        assert isinstance(add(acc, "x").exception(10), KeyboardInterrupt)
        wire.fail = None
        assert add(acc, "y").result(10).msg_id == "y"  # the sender thread still sends
    finally:
        acc.close()


def test_close_sends_what_is_gathered_and_refuses_more() -> None:
    wire = Wire()
    acc = accumulator(wire)
    blocker = fill_wire(acc, wire)
    gathered = [add(acc, f"g{i}") for i in range(3)]
    wire.hold = False
    wire.release(100)
    acc.close()
    assert all(f.done() and f.result().status is SendStatus.SEND_OK for f in blocker + gathered)
    with pytest.raises(PyMQError, match="shut down"):
        add(acc, "too late")


def test_split_batch_result_of_one_message_is_the_result_itself() -> None:
    single = SendResult(SendStatus.SEND_OK, "id", "off", QUEUE, 7, ("id",), ("off",))
    assert split_batch_result(single, 1) == [single]
    batch = SendResult.of_batch(
        SendStatus.FLUSH_DISK_TIMEOUT, QUEUE, 7, ["a", "b"], lambda: ("x", "y")
    )
    parts = split_batch_result(batch, 2)
    assert [(p.msg_id, p.offset_msg_id, p.queue_offset) for p in parts] == [
        ("a", "x", 7),
        ("b", "y", 8),
    ]
    assert all(p.status is SendStatus.FLUSH_DISK_TIMEOUT for p in parts)  # status kept


def test_an_interrupted_caller_leaves_the_accumulator_usable() -> None:
    """A KeyboardInterrupt while a sync caller sends its own batch reaches that caller;
    its waiters get it too, and the key's wire is free again for the next send."""
    wire = Wire(hold=False)
    acc = accumulator(wire)
    try:
        wire.fail = KeyboardInterrupt()
        waiter = SyncWaiter()
        with pytest.raises(KeyboardInterrupt):
            acc.add(SYNC_KEY, Message("T", b"i1"), 1, waiter)
        with pytest.raises(KeyboardInterrupt):
            waiter.wait(0)
        wire.fail = None
        assert add(acc, "after").result(10).msg_id == "after"  # sent at once: nothing in flight
    finally:
        acc.close()


def batch_result(ids: list[str]) -> SendResult:
    offsets = tuple(f"OFF-{i}" for i in ids)
    return SendResult.of_batch(SendStatus.SEND_OK, QUEUE, 100, ids, lambda: offsets)


def test_the_callers_of_a_batch_are_woken_one_by_the_other() -> None:
    """The reader thread wakes the first caller only; each caller woken wakes the next."""
    waiters = [SyncWaiter() for _ in range(3)]
    wake_in_chain(waiters, batch_result(["a", "b", "c"]))
    assert [w._done.locked() for w in waiters] == [False, True, True]
    first = waiters[0].wait(10)
    assert first is not None and first.msg_id == "a"
    assert [w._done.locked() for w in waiters[1:]] == [False, True]
    results = [w.wait(10) for w in waiters[1:]]
    assert [(r.msg_id, r.queue_offset) for r in results if r is not None] == [
        ("b", 101),
        ("c", 102),
    ]


def test_a_caller_that_stopped_waiting_does_not_break_the_chain() -> None:
    """Whether it gave up before the answer came (skipped by the one before it) or
    after (then it wakes the next itself), the callers behind it are woken."""
    early, late = [SyncWaiter() for _ in range(3)], [SyncWaiter() for _ in range(3)]
    assert early[1].wait(0.001) is None  # gave up before the answer
    wake_in_chain(early, batch_result(["a", "b", "c"]))
    assert early[0].wait(10) is not None
    assert not early[2]._done.locked()  # woken by the first, past the one who left
    wake_in_chain(late, batch_result(["x", "y", "z"]))
    answer = late[1].wait(0)  # gives up as the answer is in: takes it, wakes the next
    assert answer is not None and answer.msg_id == "y"
    assert not late[2]._done.locked()
    assert [r.msg_id for r in (early[2].wait(10), late[0].wait(10), late[2].wait(10)) if r] == [
        "c",
        "x",
        "z",
    ]


class Interrupted:
    """A waiter's lock whose wait is interrupted (Ctrl-C in the main thread)."""

    def acquire(self, timeout: float = -1) -> bool:
        raise KeyboardInterrupt

    def release(self) -> None:
        pass


def test_an_interrupted_caller_passes_the_chain_on() -> None:
    waiters = [SyncWaiter() for _ in range(2)]
    wake_in_chain(waiters, batch_result(["a", "b"]))
    waiters[0]._done = Interrupted()  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        waiters[0].wait(10)
    assert not waiters[1]._done.locked()  # woken by the interrupted caller on its way out
    second = waiters[1].wait(10)
    assert second is not None and second.msg_id == "b"


def test_sync_callers_on_many_threads_each_get_their_own_result() -> None:
    """Eight threads' sync sends gathered behind a busy wire go as one batch; each
    caller gets its own message's result from the chain."""
    wire = Wire()
    acc = accumulator(wire)
    try:
        blockers = []
        for i in range(IN_FLIGHT_PER_KEY):  # sync batches started by their callers
            blocker = SyncWaiter()
            assert acc.add(SYNC_KEY, Message("T", f"w{i}".encode()), 1, blocker)
            blockers.append(blocker)
        wire.wait_sent(IN_FLIGHT_PER_KEY)
        got: dict[int, str] = {}
        added = threading.Semaphore(0)

        def send(i: int) -> None:
            waiter = SyncWaiter()
            assert acc.add(SYNC_KEY, Message("T", f"m{i}".encode()), 1, waiter)
            added.release()
            result = waiter.wait(10)
            got[i] = "none" if result is None else result.msg_id

        threads = [threading.Thread(target=send, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for _ in threads:
            assert added.acquire(timeout=10)
        wire.hold = False
        wire.release(100)
        for thread in threads:
            thread.join(10)
        assert got == {i: f"m{i}" for i in range(8)}
        assert sorted(wire.batches[-1]) == sorted(f"m{i}" for i in range(8))
        assert all(b.wait(10) is not None for b in blockers)
    finally:
        wire.hold = False
        wire.release(100)
        acc.close()
