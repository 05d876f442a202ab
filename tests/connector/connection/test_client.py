"""The blocking remoting client against pymq's own asyncio RemotingServer, run in-process
on a loop thread and a real loopback socket: many requests in flight on one connection
answered out of order, timeouts, a server that hangs up, and requests from the server.
Every wait is bounded (events, futures and joins with timeouts), never a sleep."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from connector.client.connection import STALL_S, RemotingClient, RemotingConnection
from connector.errors import ConfigError, RemotingError, RemotingTimeoutError, TopicNotExistError
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.server.remoting import Channel, RemotingServer

T = TypeVar("T")

WAIT_S = 5.0  # the bound of every wait for something that should happen
LONG_S = 30.0  # a request timeout that must not be what ends a test

ECHO = 9001  # answers at once with the request's ext and body
GATHER = 9002  # answered only when ``n`` of them have come, last first
HOLD = 9003  # answered when the test releases its ``id``
ASK_BACK = 9004  # the server asks the client (code 40) and answers with the client's answer


class LoopServer:
    """A RemotingServer on a loop thread of its own, listening on 127.0.0.1:0."""

    def __init__(self, busy_poll_us: int = 0) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = RemotingServer(busy_poll_us=busy_poll_us)
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)
        self.gathered: list[tuple[RemotingCommand, asyncio.Future[RemotingCommand]]] = []
        self.gather_order: list[int] = []
        self.held: dict[str, tuple[RemotingCommand, asyncio.Future[RemotingCommand]]] = {}
        self.holding = threading.Condition()
        for code, handler in (
            (ECHO, self._echo),
            (GATHER, self._gather),
            (HOLD, self._hold),
            (ASK_BACK, self._ask_back),
        ):
            self.server.register(code, handler)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self.addr = f"127.0.0.1:{sock.getsockname()[1]}"
        self.thread.start()
        self.run(self.server.start(sock))

    # -- driving the loop from the test thread -----------------------------------------

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = WAIT_S) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def on_loop(self, fn: Callable[[], T], timeout_s: float = WAIT_S) -> T:
        async def call() -> T:
            return fn()

        return self.run(call(), timeout_s)

    def stop(self) -> None:
        if self.loop.is_running():
            self.run(self.server.stop(grace_s=0.5), timeout_s=WAIT_S + 1)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)
        assert not self.thread.is_alive()
        self.loop.close()

    # -- handlers (on the loop) --------------------------------------------------------

    def _echo(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(ext=request.ext, body=request.body)

    def _gather(self, _: Channel, request: RemotingCommand) -> asyncio.Future[RemotingCommand]:
        fut: asyncio.Future[RemotingCommand] = self.loop.create_future()
        self.gathered.append((request, fut))
        if len(self.gathered) == int(request.ext["n"]):
            # answer the last to come first: the answers leave in reverse order
            for req, f in reversed(self.gathered):
                self.gather_order.append(req.opaque)
                f.set_result(req.response(ext={"seq": req.ext["seq"]}, body=req.body))
        return fut

    def _hold(self, _: Channel, request: RemotingCommand) -> asyncio.Future[RemotingCommand]:
        fut: asyncio.Future[RemotingCommand] = self.loop.create_future()
        with self.holding:
            self.held[request.ext["id"]] = (request, fut)
            self.holding.notify_all()
        return fut

    async def _ask_back(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        question = RemotingCommand(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"}, request.body
        )
        answer = await channel.invoke(question, WAIT_S)
        return request.response(ext={"asked": str(answer.code)}, body=answer.body)

    # -- held requests -----------------------------------------------------------------

    def wait_held(self, *ids: str) -> None:
        with self.holding:
            assert self.holding.wait_for(lambda: all(i in self.held for i in ids), WAIT_S), (
                f"requests {ids} did not reach the server (held: {sorted(self.held)})"
            )

    def release(self, *ids: str) -> None:
        """Answer held requests, in this order, in one loop step."""

        def answer() -> None:
            for i in ids:
                req, fut = self.held[i]
                fut.set_result(req.response(ext={"id": i}, body=f"answer-{i}".encode()))

        self.on_loop(answer)

    def channels(self) -> list[Channel]:
        return self.on_loop(lambda: list(self.server.channels))

    def close_channels(self) -> None:
        def close() -> None:
            for ch in self.server.channels:
                ch.close()

        self.on_loop(close)


@pytest.fixture
def server() -> Iterator[LoopServer]:
    s = LoopServer()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(params=[0.0, 2.0], ids=["asleep", "busy-polling"])
def conn(server: LoopServer, request: pytest.FixtureRequest) -> Iterator[RemotingConnection]:
    # each test twice: a lone caller sleeping in recv at once, and one polling the socket
    # without blocking (for longer than any of these tests waits for an answer)
    c = RemotingConnection(server.addr, busy_poll_s=request.param)
    try:
        yield c
    finally:
        c.close()


def echo(conn: RemotingConnection, body: bytes, timeout_s: float = WAIT_S) -> RemotingCommand:
    resp = conn.invoke(RemotingCommand(ECHO, {"k": "v"}, body), timeout_s)
    assert resp.code == ResponseCode.SUCCESS and resp.body == body and resp.ext == {"k": "v"}
    return resp


# -- many requests in flight -------------------------------------------------------------------


N = 16


def test_sync_calls_answered_out_of_order_each_get_their_own(
    server: LoopServer, conn: RemotingConnection
) -> None:
    echo(conn, b"warm-up")  # the connection is up and served

    def call(i: int) -> tuple[int, RemotingCommand]:
        cmd = RemotingCommand(GATHER, {"n": str(N), "seq": str(i)}, f"body-{i}".encode())
        resp = conn.invoke(cmd, LONG_S)
        return cmd.opaque, resp

    with ThreadPoolExecutor(N) as pool:
        results = list(pool.map(call, range(N), timeout=WAIT_S * 2))

    assert len({opaque for opaque, _ in results}) == N  # one connection, distinct opaques
    for i, (opaque, resp) in enumerate(results):
        assert resp.opaque == opaque and resp.is_response
        assert resp.ext == {"seq": str(i)} and resp.body == f"body-{i}".encode()
    arrival = [req.opaque for req, _ in server.gathered]
    assert server.gather_order == arrival[::-1]  # really answered last-first
    assert len(server.channels()) == 1
    echo(conn, b"after")


def test_async_calls_answered_out_of_order_each_get_their_own(
    server: LoopServer, conn: RemotingConnection
) -> None:
    done = threading.Event()
    lock = threading.Lock()
    got: dict[int, tuple[RemotingCommand | None, BaseException | None]] = {}
    sent: dict[int, int] = {}

    def callback_for(i: int) -> Callable[[RemotingCommand | None, BaseException | None], None]:
        def callback(resp: RemotingCommand | None, error: BaseException | None) -> None:
            with lock:
                got[i] = (resp, error)
                if len(got) == N:
                    done.set()

        return callback

    for i in range(N):
        cmd = RemotingCommand(GATHER, {"n": str(N), "seq": str(i)}, f"async-{i}".encode())
        sent[i] = conn.invoke_async(cmd, callback_for(i))
    assert done.wait(WAIT_S), f"{len(got)} of {N} answers came"
    for i in range(N):
        resp, error = got[i]
        assert error is None and resp is not None
        assert resp.opaque == sent[i] and resp.ext == {"seq": str(i)}
        assert resp.body == f"async-{i}".encode()
    assert server.gather_order == [opaque for opaque in reversed(sent.values())]
    echo(conn, b"a sync call after async ones")


def wait_reader_gone(conn: RemotingConnection) -> threading.Thread:
    """The reader thread of ``conn`` ends on its own (bounded wait); it is returned."""
    reader = conn._reader
    assert reader is not None
    reader.join(WAIT_S)
    assert not reader.is_alive() and conn._reader is None
    return reader


def test_the_reader_thread_ends_when_no_callback_waits(
    server: LoopServer, conn: RemotingConnection
) -> None:
    """After async calls a sync caller reads its own answer again (no thread hop), but
    not while an async call is still waiting for its answer."""
    answered = threading.Event()
    conn.invoke_async(RemotingCommand(ECHO, {}, b"async"), lambda r, e: answered.set())
    assert answered.wait(WAIT_S)
    wait_reader_gone(conn)
    echo(conn, b"read by its caller")
    assert conn._reader is None

    got: list[RemotingCommand | None] = []
    held = threading.Event()
    conn.invoke_async(
        RemotingCommand(HOLD, {"id": "slow"}, b""), lambda r, e: (got.append(r), held.set())
    )
    reader = conn._reader
    assert reader is not None
    echo(conn, b"while one is held")  # answered by the reader, which stays for the held one
    assert not held.is_set() and reader.is_alive() and conn._reader is reader
    server.wait_held("slow")
    server.release("slow")
    assert held.wait(WAIT_S) and got[0] is not None and got[0].body == b"answer-slow"
    wait_reader_gone(conn)
    # and sync callers on many threads still each get their own, reader or not
    with ThreadPoolExecutor(8) as pool:
        bodies = [b"t%d" % i for i in range(64)]
        assert [r.body for r in pool.map(lambda b: echo(conn, b), bodies)] == bodies


def test_a_background_call_never_starts_the_reader_thread(
    server: LoopServer, conn: RemotingConnection
) -> None:
    """A heartbeat made while a sender waits on its answer: the sender (or the heartbeat)
    reads both answers; no reader thread starts, so the sender keeps reading its own
    answers after it (a started reader stays as long as requests are in flight)."""
    held = threading.Event()
    got: list[RemotingCommand] = []

    def hold() -> None:
        got.append(conn.invoke(RemotingCommand(HOLD, {"id": "sender"}, b""), WAIT_S))
        held.set()

    sender = threading.Thread(target=hold)
    sender.start()
    server.wait_held("sender")  # the sender is in recv, reading for everyone
    beat = threading.Thread(
        target=lambda: got.append(
            conn.invoke(RemotingCommand(ECHO, {}, b"beat"), WAIT_S, background=True)
        )
    )
    beat.start()
    beat.join(WAIT_S)  # answered: read by the sender for it
    assert not beat.is_alive() and got[0].body == b"beat"
    assert conn._reader is None
    server.release("sender")
    assert held.wait(WAIT_S) and got[1].body == b"answer-sender"
    sender.join(WAIT_S)
    assert conn._reader is None
    echo(conn, b"still read by its caller")
    assert conn._reader is None


def test_a_callback_that_holds_the_reader_does_not_hold_the_other_answers(
    server: LoopServer,
) -> None:
    """An async answer's callback that runs long (a push consumer's listener, a
    send_async callback) has the reading taken from it after STALL_S: a sync call and
    an async one on the same connection are answered meanwhile; the old reader ends
    once its callback returns, without reading again."""
    client = RemotingClient()
    try:
        conn = client.connection(server.addr)
        entered, release = threading.Event(), threading.Event()
        stuck: list[threading.Thread] = []

        def slow(resp: RemotingCommand | None, error: BaseException | None) -> None:
            stuck.append(threading.current_thread())
            entered.set()
            assert release.wait(LONG_S)

        conn.invoke_async(RemotingCommand(ECHO, {}, b"slow"), slow, LONG_S)
        assert entered.wait(WAIT_S)
        assert stuck[0].name.startswith("pymq-remoting-")  # the reader thread
        t0 = time.monotonic()
        echo(conn, b"while a callback holds the first reader", timeout_s=WAIT_S)
        waited = time.monotonic() - t0
        also = threading.Event()
        conn.invoke_async(RemotingCommand(ECHO, {}, b"async"), lambda r, e: also.set(), LONG_S)
        assert also.wait(WAIT_S)
        assert not release.is_set() and stuck[0].is_alive()  # still in its callback
        assert conn._reader is not stuck[0]
        assert STALL_S <= waited < STALL_S + 1.0, waited
        release.set()
        stuck[0].join(WAIT_S)
        assert not stuck[0].is_alive()
        echo(conn, b"one reader again")
        assert not conn.closed and len(server.channels()) == 1
    finally:
        client.close()


# -- timeouts ------------------------------------------------------------------------------------


def test_a_timeout_and_its_late_answer_do_not_harm_the_others(
    server: LoopServer, conn: RemotingConnection
) -> None:
    t0 = time.monotonic()
    with pytest.raises(RemotingTimeoutError):
        conn.invoke(RemotingCommand(HOLD, {"id": "late"}), 0.3)
    assert 0.25 <= time.monotonic() - t0 < 0.3 + WAIT_S
    server.wait_held("late")
    assert not conn.closed

    # another request in flight when the late answer comes: the late one goes first on the
    # wire, and must not be taken for it
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(conn.invoke, RemotingCommand(HOLD, {"id": "other"}), LONG_S)
        server.wait_held("other")
        server.release("late", "other")
        resp = other.result(WAIT_S)
    assert resp.ext == {"id": "other"} and resp.body == b"answer-other"
    assert not conn.closed
    echo(conn, b"still fine")


def test_an_async_timeout_and_its_late_answer(server: LoopServer) -> None:
    client = RemotingClient()
    try:
        conn = client.connection(server.addr)
        outcome: list[tuple[RemotingCommand | None, BaseException | None]] = []
        called = threading.Event()

        def callback(resp: RemotingCommand | None, error: BaseException | None) -> None:
            outcome.append((resp, error))
            called.set()

        t0 = time.monotonic()
        conn.invoke_async(RemotingCommand(HOLD, {"id": "slow"}), callback, timeout_s=0.2)
        assert called.wait(WAIT_S)
        assert time.monotonic() - t0 >= 0.15
        ((resp, error),) = outcome
        assert resp is None and isinstance(error, RemotingTimeoutError)

        server.wait_held("slow")
        called.clear()
        server.release("slow")  # the late answer: dropped, the callback does not run again
        echo(conn, b"after the late answer")  # read after it: the late one was seen and dropped
        assert not called.is_set() and len(outcome) == 1
        assert client.connection(server.addr) is conn and not conn.closed
    finally:
        client.close()


# -- the server hangs up ---------------------------------------------------------------------------


def test_server_closing_fails_calls_in_flight_promptly(
    server: LoopServer, conn: RemotingConnection
) -> None:
    ids = [f"sync-{i}" for i in range(4)]
    async_error: list[BaseException | None] = []
    async_done = threading.Event()

    def callback(resp: RemotingCommand | None, error: BaseException | None) -> None:
        async_error.append(error)
        async_done.set()

    def call(i: str) -> BaseException | None:
        try:
            conn.invoke(RemotingCommand(HOLD, {"id": i}), LONG_S)
        except RemotingError as exc:
            return exc
        return None

    with ThreadPoolExecutor(len(ids)) as pool:
        futures = [pool.submit(call, i) for i in ids]
        server.wait_held(*ids)
        # and one with a callback (it starts the connection's reader thread)
        conn.invoke_async(RemotingCommand(HOLD, {"id": "async"}), callback)
        server.wait_held("async")
        t0 = time.monotonic()
        server.close_channels()
        errors = [f.result(WAIT_S) for f in futures]
    assert async_done.wait(WAIT_S)
    assert time.monotonic() - t0 < WAIT_S  # promptly, not at the 30 s timeout
    for exc in [*errors, *async_error]:
        assert isinstance(exc, RemotingError) and not isinstance(exc, RemotingTimeoutError), exc
    assert conn.closed
    with pytest.raises(RemotingError):
        conn.invoke(RemotingCommand(ECHO), WAIT_S)


def test_a_lone_sync_caller_sees_the_close(server: LoopServer, conn: RemotingConnection) -> None:
    # no reader thread: the caller itself reads the socket and sees it end
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(conn.invoke, RemotingCommand(HOLD, {"id": "lone"}), LONG_S)
        server.wait_held("lone")
        server.close_channels()
        with pytest.raises(RemotingError) as info:
            fut.result(WAIT_S)
    assert not isinstance(info.value, RemotingTimeoutError)
    assert conn.closed


def test_the_client_pool_replaces_a_closed_connection(server: LoopServer) -> None:
    client = RemotingClient()
    try:
        first = client.connection(server.addr)
        echo(first, b"one")
        server.close_channels()
        with pytest.raises(RemotingError):
            first.invoke(RemotingCommand(ECHO), WAIT_S)
        second = client.connection(server.addr)
        assert second is not first
        echo(second, b"two")
    finally:
        client.close()


# -- requests from the server ----------------------------------------------------------------------


class Answering:
    """A client's ``on_request``: records what the server asks and answers it."""

    def __init__(self) -> None:
        self.asked: list[RemotingCommand] = []
        self.came = threading.Event()

    def __call__(self, conn: RemotingConnection, request: RemotingCommand) -> None:
        self.asked.append(request)
        self.came.set()
        if not request.is_oneway:
            conn.send_response(request.response(ext={"from": "client"}, body=b"re:" + request.body))


def test_server_request_reaches_on_request_and_its_answer_comes_back(server: LoopServer) -> None:
    handler = Answering()
    conn = RemotingConnection(server.addr, on_request=handler)
    try:
        echo(conn, b"hello")  # the server has the channel now
        (channel,) = server.channels()
        question = RemotingCommand(
            RequestCode.CHECK_TRANSACTION_STATE, {"msgId": "ABC", "n": "5"}, b"ping"
        )
        answer = server.run(channel.invoke(question, WAIT_S))
        assert answer.is_response and answer.opaque == question.opaque
        assert answer.ext == {"from": "client"} and answer.body == b"re:ping"
        (asked,) = handler.asked
        assert asked.code == RequestCode.CHECK_TRANSACTION_STATE
        assert asked.ext == {"msgId": "ABC", "n": "5"} and asked.body == b"ping"

        # a oneway request from the server gets to the client, which does not answer
        handler.came.clear()
        server.on_loop(lambda: channel.invoke_oneway(RemotingCommand(40, {"consumerGroup": "g"})))
        assert handler.came.wait(WAIT_S)
        assert handler.asked[-1].is_oneway and handler.asked[-1].code == 40
        echo(conn, b"still answered")
    finally:
        conn.close()


def test_server_asks_back_while_the_clients_request_is_in_flight(server: LoopServer) -> None:
    handler = Answering()
    conn = RemotingConnection(server.addr, on_request=handler)
    try:
        resp = conn.invoke(RemotingCommand(ASK_BACK, body=b"q"), WAIT_S)
        assert resp.code == ResponseCode.SUCCESS and resp.body == b"re:q"
        assert resp.ext == {"asked": str(int(ResponseCode.SUCCESS))}
        (asked,) = handler.asked
        assert asked.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
    finally:
        conn.close()


def test_server_request_to_a_client_that_does_not_answer_times_out(server: LoopServer) -> None:
    asked: list[RemotingCommand] = []
    conn = RemotingConnection(server.addr, on_request=lambda _c, cmd: asked.append(cmd))
    try:
        echo(conn, b"hello")
        (channel,) = server.channels()
        with pytest.raises(TimeoutError):
            server.run(channel.invoke(RemotingCommand(39), 0.2))
        assert [c.code for c in asked] == [39]
        echo(conn, b"the connection goes on")
    finally:
        conn.close()


# -- busy polling ------------------------------------------------------------------------------


def test_the_server_polls_for_its_window_after_a_request_then_sleeps() -> None:
    server = LoopServer(busy_poll_us=100_000)
    conn = RemotingConnection(server.addr)
    try:
        busy = server.server.busy_poll
        t0 = time.monotonic()
        echo(conn, b"x")
        assert server.on_loop(lambda: busy.spinning)  # still polling after the answer
        deadline = time.monotonic() + WAIT_S
        while server.on_loop(lambda: busy.spinning):
            assert time.monotonic() < deadline, "the loop never stopped polling"
            threading.Event().wait(0.01)
        assert time.monotonic() - t0 >= 0.09  # the whole window, from the request
        polls = server.on_loop(lambda: busy.polls)
        assert polls > 10  # iterations with a zero-timeout poll, not one sleep
        threading.Event().wait(0.1)  # the loop asleep now: no more polls
        assert server.on_loop(lambda: busy.polls) == polls
        echo(conn, b"y")  # and a new request polls again
        assert server.on_loop(lambda: busy.spinning)
    finally:
        conn.close()
        server.stop()


def test_without_a_window_the_server_never_polls(server: LoopServer) -> None:
    conn = RemotingConnection(server.addr)
    try:
        echo(conn, b"x")
        busy = server.server.busy_poll
        assert server.on_loop(lambda: (busy.spinning, busy.polls)) == (False, 0)
    finally:
        conn.close()


def test_a_long_poll_is_waited_for_asleep(server: LoopServer) -> None:
    """``busy_poll=False`` (a long poll, answered when a message comes): the caller sleeps
    in recv at once, even on a connection with a long polling window."""
    conn = RemotingConnection(server.addr, busy_poll_s=5.0)
    try:
        echo(conn, b"warm-up")

        def held() -> float:
            cpu = time.thread_time()
            resp = conn.invoke(RemotingCommand(HOLD, {"id": "poll"}), LONG_S, busy_poll=False)
            assert resp.body == b"answer-poll"
            return time.thread_time() - cpu

        with ThreadPoolExecutor(1) as pool:
            fut = pool.submit(held)
            server.wait_held("poll")
            threading.Event().wait(0.3)  # the wait whose cost is measured
            server.release("poll")
            cpu_s = fut.result(WAIT_S)
        assert cpu_s < 0.1, f"the caller spent {cpu_s:.3f} s of CPU waiting 0.3 s"
    finally:
        conn.close()


def test_a_timeout_shorter_than_the_polling_window_ends_the_call_on_time(
    server: LoopServer,
) -> None:
    conn = RemotingConnection(server.addr, busy_poll_s=5.0)
    try:
        t0 = time.monotonic()
        with pytest.raises(RemotingTimeoutError):
            conn.invoke(RemotingCommand(HOLD, {"id": "short"}), 0.3)
        # at most a read slice (50 ms) late, not the 5 s window
        assert 0.25 <= time.monotonic() - t0 < 1.0
    finally:
        conn.close()


def test_a_negative_busy_poll_window_is_refused() -> None:
    with pytest.raises(ConfigError):
        RemotingClient(busy_poll_us=-1)
    with pytest.raises(ValueError):
        RemotingServer(busy_poll_us=-1)


def test_handler_errors_are_answered_and_the_connection_goes_on(
    server: LoopServer, conn: RemotingConnection, caplog: pytest.LogCaptureFixture
) -> None:
    """A pymq error is answered with its response code and errorCode, a defect with
    SYSTEM_ERROR (logged), whether the handler raised or its future failed."""

    def refuse(_: Channel, request: RemotingCommand) -> RemotingCommand:
        raise TopicNotExistError("no topic here")

    def defect(_: Channel, request: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("a bug")

    async def refuse_later(_: Channel, request: RemotingCommand) -> RemotingCommand:
        raise TopicNotExistError("not here either")

    async def defect_later(_: Channel, request: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("a later bug")

    for code, handler in (
        (9101, refuse),
        (9102, defect),
        (9103, refuse_later),
        (9104, defect_later),
    ):
        server.server.register(code, handler)
    with caplog.at_level("ERROR", logger="connector.server.remoting"):
        answers = [conn.invoke(RemotingCommand(code), WAIT_S) for code in (9101, 9102, 9103, 9104)]
    assert [a.code for a in answers] == [
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SYSTEM_ERROR,
    ]
    assert answers[0].ext["errorCode"] == "TOPIC_NOT_EXIST" and answers[0].remark == "no topic here"
    assert answers[1].remark == "internal error" and "a bug" not in (answers[1].remark or "")
    assert "a bug" in caplog.text and "a later bug" in caplog.text
    echo(conn, b"still serving")
