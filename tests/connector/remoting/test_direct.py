"""Direct routes: answered by the protocol, in order, with HTTP/1.1's connection rules.

A real uvicorn server on loopback with a test router; raw sockets send exactly
the bytes under test (pipelining, chunked bodies, ``Connection: close``).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI, Request, Response
from threaded_uvicorn import uvicorn_thread

from connector.edge.direct import DirectRequest, Reply, direct_protocol

TEXT = b"text/plain"


class Route:
    """Echoes the body; ``delay_s`` answers through a future, ``fail`` with an error."""

    max_body_bytes = 1024

    def __init__(self, *, delay_s: float | None = None, fail: bool = False) -> None:
        self.delay_s = delay_s
        self.fail = fail
        self.on_reply: Callable[[], None] | None = None
        self.called = threading.Event()

    def __call__(self, request: DirectRequest) -> Reply | asyncio.Future[Reply]:
        self.called.set()
        reply = Reply(
            200,
            TEXT,
            b"direct:" + request.body,
            ((b"x-query", request.query), (b"x-path", request.path.encode())),
        )
        if self.delay_s is None:
            return reply
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reply] = loop.create_future()
        if self.fail:
            loop.call_later(self.delay_s, future.set_exception, RuntimeError("broken"))
        else:
            loop.call_later(self.delay_s, future.set_result, reply)
        if self.on_reply is not None:
            on_reply = self.on_reply
            future.add_done_callback(lambda _f: loop.call_soon(on_reply))  # after the writer's
        return future

    def too_large(self, size: int) -> Reply:
        return Reply(413, TEXT, b"too large: %d" % size)

    def settled(self, future: asyncio.Future[Reply]) -> Reply:
        exc = future.exception()
        return future.result() if exc is None else Reply(500, TEXT, str(exc).encode())


class Router:
    def __init__(self) -> None:
        self.routes = {
            "/echo": Route(),
            "/later": Route(delay_s=0.02),
            "/fails": Route(delay_s=0.0, fail=True),
            "/slow": Route(delay_s=0.5),
        }

    def route(self, method: str, path: str) -> Route | None:
        return self.routes.get(path) if method == "POST" else None


def app() -> FastAPI:
    api = FastAPI()

    @api.get("/health")
    def health() -> dict[str, bool]:
        return {"ok": True}

    @api.post("/{name}")  # the way a routed request goes when the protocol cannot take it
    async def echo(request: Request) -> Response:
        return Response(b"asgi:" + await request.body(), media_type="text/plain")

    return api


ROUTER = Router()


@pytest.fixture(scope="module")
def addr() -> Iterator[tuple[str, int]]:
    with uvicorn_thread(app(), direct_protocol(ROUTER)) as (_, port):
        yield ("127.0.0.1", port)


class Conn:
    """A raw client connection that reads responses one by one."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self.sock = socket.create_connection(addr, timeout=10)
        self.file = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self) -> tuple[int, dict[str, str], bytes]:
        status_line = self.file.readline()
        assert status_line.startswith(b"HTTP/1.1 "), status_line
        headers: dict[str, str] = {}
        while (line := self.file.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = self.file.read(int(headers.get("content-length", "0")))
        return int(status_line.split()[1]), headers, body

    def at_eof(self) -> bool:
        return self.file.read(1) == b""

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def post(path: str, body: bytes, *extra: str) -> bytes:
    head = [f"POST {path} HTTP/1.1", "host: t", f"content-length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@pytest.fixture
def conn(addr: tuple[str, int]) -> Iterator[Conn]:
    c = Conn(addr)
    yield c
    c.close()


def test_direct_replies_keep_the_connection_and_carry_headers(conn: Conn) -> None:
    for i in range(3):
        conn.send(post(f"/echo?n={i}", f"body{i}".encode()))
        status, headers, body = conn.response()
        assert (status, body) == (200, f"direct:body{i}".encode())
        assert headers["x-query"] == f"n={i}" and headers["x-path"] == "/echo"
        assert headers["content-type"] == "text/plain" and "connection" not in headers


def test_a_reply_that_comes_later_and_one_that_fails(conn: Conn) -> None:
    conn.send(post("/later", b"a"))
    assert conn.response()[::2] == (200, b"direct:a")
    conn.send(post("/fails", b"b"))
    assert conn.response()[::2] == (500, b"broken")
    conn.send(post("/echo", b"c"))  # the connection is still good
    assert conn.response()[::2] == (200, b"direct:c")


def test_pipelined_requests_are_answered_in_order(conn: Conn) -> None:
    # a late reply first: the requests behind it wait for it, whichever way they go
    conn.send(
        post("/later", b"1")
        + post("/echo", b"2")
        + b"GET /health HTTP/1.1\r\nhost: t\r\n\r\n"
        + post("/later", b"4")
        + post("/echo", b"5")
    )
    got = [conn.response() for _ in range(5)]
    bodies = [body for _, _, body in got]
    assert bodies[0] == b"direct:1"
    assert bodies[1] in (b"direct:2", b"asgi:2")  # behind an unfinished reply: the ASGI way
    assert bodies[2] == b'{"ok":true}'
    assert bodies[3].endswith(b":4") and bodies[4].endswith(b":5")
    assert all(status == 200 for status, _, _ in got)


def test_connection_close_and_http_1_0(addr: tuple[str, int]) -> None:
    c = Conn(addr)
    c.send(post("/echo", b"x", "connection: close"))
    status, headers, body = c.response()
    assert (status, body, headers["connection"]) == (200, b"direct:x", "close")
    assert c.at_eof()
    c.close()
    c = Conn(addr)
    c.send(b"POST /later HTTP/1.0\r\ncontent-length: 1\r\n\r\ny")
    status, headers, body = c.response()
    assert (status, body, headers["connection"]) == (200, b"direct:y", "close")
    assert c.at_eof()
    c.close()


def test_chunked_and_too_large_bodies(conn: Conn) -> None:
    conn.send(
        b"POST /echo HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"
    )
    assert conn.response()[::2] == (200, b"direct:abcdefg")
    conn.send(post("/echo", b"z" * 5000))
    assert conn.response()[::2] == (413, b"too large: 5000")
    conn.send(post("/echo", b"after"))  # the big body was read to its end
    assert conn.response()[::2] == (200, b"direct:after")


def test_expect_100_continue_is_answered_by_the_app(addr: tuple[str, int]) -> None:
    c = Conn(addr)
    c.send(b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 4\r\nexpect: 100-continue\r\n\r\n")
    assert c.file.readline().startswith(b"HTTP/1.1 100")
    assert c.file.readline() == b"\r\n"
    c.send(b"data")
    assert c.response()[::2] == (200, b"asgi:data")
    c.close()


def test_unrouted_requests_reach_the_app(conn: Conn) -> None:
    conn.send(b"GET /health HTTP/1.1\r\nhost: t\r\n\r\n")
    assert conn.response()[::2] == (200, b'{"ok":true}')
    conn.send(b"GET /echo HTTP/1.1\r\nhost: t\r\n\r\n")  # the router takes POST only
    assert conn.response()[0] == 405
    conn.send(post("/elsewhere", b"q"))  # a path the router does not know
    assert conn.response()[::2] == (200, b"asgi:q")


def test_a_client_gone_before_its_reply_does_not_disturb_others(
    addr: tuple[str, int], conn: Conn, caplog: pytest.LogCaptureFixture
) -> None:
    slow = ROUTER.routes["/slow"]
    landed = threading.Event()
    slow.on_reply = landed.set
    gone = Conn(addr)
    gone.send(post("/slow", b"never read"))
    gone.close()
    assert landed.wait(10), "the slow reply never came"
    conn.send(post("/echo", b"still here"))
    assert conn.response()[::2] == (200, b"direct:still here")
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


def test_a_graceful_stop_answers_what_is_in_flight() -> None:
    router = Router()
    with uvicorn_thread(app(), direct_protocol(router)) as (server, port):
        c = Conn(("127.0.0.1", port))
        c.send(post("/echo", b"first"))
        assert c.response()[::2] == (200, b"direct:first")  # the connection is up and idle
        c.send(post("/slow", b"in flight"))  # answered 0.5 s from now
        assert router.routes["/slow"].called.wait(10)
        server.should_exit = True  # as SIGTERM does, while the reply is pending
        status, headers, body = c.response()
        assert (status, body, headers["connection"]) == (200, b"direct:in flight", "close")
        assert c.at_eof()
        c.close()


def test_keep_alive_closes_an_idle_connection_and_spares_a_busy_one() -> None:
    """One keep-alive timer per connection, not one per response: it closes a
    connection idle for ``timeout_keep_alive`` and nothing else."""
    with uvicorn_thread(app(), direct_protocol(Router()), timeout_keep_alive=1) as (_, port):
        c = Conn(("127.0.0.1", port))
        c.send(post("/echo", b"a"))
        assert c.response()[::2] == (200, b"direct:a")  # idle from here: the timer is armed
        time.sleep(0.7)
        c.send(post("/slow", b"b"))  # busy 0.5 s, across the moment the timer fires
        assert c.response()[::2] == (200, b"direct:b")
        for i in range(4):  # used more often than the timeout: it stays open
            time.sleep(0.4)
            c.send(post("/echo", b"%d" % i))
            assert c.response()[::2] == (200, b"direct:%d" % i)
        c.send(b"GET /health HTTP/1.1\r\nhost: t\r\n\r\n")  # the app's answers count too
        assert c.response()[::2] == (200, b'{"ok":true}')
        idle = time.monotonic()
        assert c.at_eof()  # the server hangs up (the socket's own timeout is 10 s)
        assert 0.9 <= time.monotonic() - idle <= 5
        c.close()
