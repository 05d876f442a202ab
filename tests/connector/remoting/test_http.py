"""The keep-alive HTTP client against a real HTTP/1.1 server on loopback."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from connector.errors import ConnectError, RemotingError, RemotingTimeoutError
from connector.remoting import HttpConnection, HttpPool
from connector.remoting import http as http_module


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: ClassVar[set[int]] = set()
    release: ClassVar[threading.Event] = threading.Event()

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, body: bytes, status: int = 200, close: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Peer", str(self.client_address[1]))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        if close:
            self.close_connection = True

    def do_GET(self) -> None:
        Handler.connections.add(self.client_address[1])
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"hello ", b"world"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/close":
            self._reply(b"bye", close=True)
        elif self.path == "/slow":
            Handler.release.wait(5)
            self._reply(b"late")
        elif self.path == "/trickle":  # a byte every 50 ms: each recv is quick, the whole is not
            self.send_response(200)
            self.send_header("Content-Length", "40")
            self.end_headers()
            for _ in range(40):
                if Handler.release.wait(0.05):
                    break
                self.wfile.write(b"x")
                self.wfile.flush()
        elif self.path.startswith("/big/"):  # /big/<size>[/<pieces>]: a large body
            size, _, pieces = self.path[5:].partition("/")
            body = _pattern(int(size))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            step = -(-len(body) // int(pieces or 1))
            for at in range(0, len(body), step):
                self.wfile.write(body[at : at + step])
                self.wfile.flush()
        elif self.path in ("/big-stall", "/big-cut", "/huge-claim"):
            self.send_response(200)
            claimed = 10**12 if self.path == "/huge-claim" else 1 << 20
            self.send_header("Content-Length", str(claimed))
            self.end_headers()
            self.wfile.write(_pattern(100_000))
            self.wfile.flush()
            if self.path == "/big-stall":
                Handler.release.wait(5)
            self.close_connection = True
        elif self.path == "/then-drop":  # a keep-alive answer, then the server hangs up
            self._reply(b"dropping")
            self.close_connection = True
        elif self.path == "/missing":
            self._reply(b'{"code":"NOT_FOUND"}', status=404)
        else:
            self._reply(b"ok:" + self.path.encode())

    def do_POST(self) -> None:
        n = int(self.headers["Content-Length"])
        self._reply(self.rfile.read(n)[::-1])


def _pattern(size: int) -> bytes:
    return (bytes(range(251)) * (size // 251 + 1))[:size]


@pytest.fixture
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    Handler.connections.clear()
    Handler.release.clear()
    yield f"127.0.0.1:{srv.server_address[1]}"
    Handler.release.set()
    srv.shutdown()
    srv.server_close()


def test_keep_alive_reuses_one_connection(server: str) -> None:
    conn = HttpConnection(server)
    peers = {conn.request("GET", f"/a{i}").headers["x-peer"] for i in range(20)}
    assert len(peers) == 1
    resp = conn.request("POST", "/p", b"abc" * 10_000, {"Content-Type": "text/plain"})
    assert resp.ok and resp.body == (b"abc" * 10_000)[::-1]
    conn.close()


def test_status_and_chunked_bodies(server: str) -> None:
    conn = HttpConnection(server)
    missing = conn.request("GET", "/missing")
    assert missing.status == 404 and not missing.ok and missing.body == b'{"code":"NOT_FOUND"}'
    assert conn.request("GET", "/chunked").body == b"hello world"
    assert conn.request("GET", "/after").body == b"ok:/after"


def test_server_closing_the_connection_is_handled(server: str) -> None:
    conn = HttpConnection(server)
    assert conn.request("GET", "/close").body == b"bye"
    assert conn.request("GET", "/next").body == b"ok:/next"  # a new connection, transparently


def _wait_closed_by_peer(conn: HttpConnection) -> None:
    """Until the server's close reached the client's socket (bounded)."""
    sock = conn._sock
    assert sock is not None
    deadline = time.monotonic() + 5
    while not conn._dropped(sock):
        assert time.monotonic() < deadline, "the server did not close the connection"
        time.sleep(0.01)


def test_an_idle_connection_the_server_closed_is_replaced(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle connection is polled before reuse; one the server closed is replaced."""
    monkeypatch.setattr(http_module, "_FRESH_S", 0.0)  # every connection counts as idle
    conn = HttpConnection(server)
    first = conn.request("GET", "/then-drop")
    assert first.body == b"dropping"
    _wait_closed_by_peer(conn)
    again = conn.request("GET", "/next")
    assert again.body == b"ok:/next"
    assert again.headers["x-peer"] != first.headers["x-peer"]  # a new connection
    conn.close()


def test_a_fresh_connection_is_reused_without_a_poll(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within _FRESH_S of its last answer a connection is not polled (a system call a
    request); if the server did hang up meanwhile, the request fails retriably."""
    polls: list[int] = []
    real = HttpConnection._dropped

    def counting(self: HttpConnection, sock: socket.socket) -> bool:
        polls.append(1)
        return real(self, sock)

    monkeypatch.setattr(HttpConnection, "_dropped", counting)
    conn = HttpConnection(server)
    peers = {conn.request("GET", f"/a{i}").headers["x-peer"] for i in range(10)}
    assert len(peers) == 1 and polls == []
    conn.request("GET", "/then-drop")
    _wait_closed_by_peer(conn)
    polls.clear()
    with pytest.raises(RemotingError) as info:
        conn.request("GET", "/next")
    assert info.value.retriable and polls == []
    assert conn.request("GET", "/after").body == b"ok:/after"  # reconnects after the failure
    conn.close()


def test_timeout_and_refused(server: str) -> None:
    conn = HttpConnection(server)
    with pytest.raises(RemotingTimeoutError):
        conn.request("GET", "/slow", timeout_s=0.2)
    Handler.release.set()
    assert conn.request("GET", "/x").body == b"ok:/x"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError):
        HttpConnection(f"127.0.0.1:{port}").request("GET", "/")
    assert issubclass(ConnectError, RemotingError) and ConnectError.retriable


def test_the_deadline_covers_the_whole_answer(server: str) -> None:
    conn = HttpConnection(server)
    t0 = time.monotonic()
    with pytest.raises(RemotingTimeoutError):
        conn.request("GET", "/trickle", timeout_s=0.3)
    assert time.monotonic() - t0 < 1.5  # not the 2 s the trickle would take
    Handler.release.set()
    assert conn.request("GET", "/y").body == b"ok:/y"  # a new connection


@pytest.mark.parametrize("pieces", [1, 37])
def test_large_bodies_arrive_whole_on_a_kept_connection(server: str, pieces: int) -> None:
    # bodies from 64 KiB on are received in place: sizes around that line, one that
    # came mostly with the head, and a body sent in many pieces
    conn = HttpConnection(server)
    for size in (65_535, 65_536, 65_537, 200_000, 3_000_001):
        resp = conn.request("GET", f"/big/{size}/{pieces}")
        assert isinstance(resp.body, bytes)
        assert resp.body == _pattern(size)
        assert conn.request("GET", "/after").body == b"ok:/after"  # nothing read past it
    assert len(Handler.connections) == 1
    conn.close()


def test_large_body_cut_or_stalled(server: str) -> None:
    conn = HttpConnection(server)
    with pytest.raises(RemotingError, match="closed"):
        conn.request("GET", "/big-cut")  # 100 KB of a promised 1 MiB, then the server closes
    t0 = time.monotonic()
    with pytest.raises(RemotingTimeoutError):
        conn.request("GET", "/big-stall", timeout_s=0.3)
    assert time.monotonic() - t0 < 1.5
    Handler.release.set()
    # a Content-Length of a terabyte is not allocated up front: the cut answer is an error
    with pytest.raises(RemotingError, match="closed"):
        conn.request("GET", "/huge-claim")
    assert conn.request("GET", "/z").body == b"ok:/z"


def test_bad_address() -> None:
    with pytest.raises(ConnectError):
        HttpConnection("no-port")


def test_pool_is_shared_by_threads(server: str) -> None:
    pool = HttpPool(server, max_idle=4)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(30):
                assert pool.request("GET", f"/t{k}-{i}").body == f"ok:/t{k}-{i}".encode()
        except (AssertionError, RemotingError) as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert len(Handler.connections) <= 6 + 4
    pool.close()
