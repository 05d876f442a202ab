"""Admin's REST calls: paths, error bodies into the hierarchy, transport failures;
against a real HTTP/1.1 server on a loopback port."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.client.rest import RestClient, decode_error, path
from connector.errors import (
    BrokerBusyError,
    ConnectError,
    PyMQError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    release: ClassVar[threading.Event] = threading.Event()
    # (path as received, content-type, body) of every request
    seen: ClassVar[list[tuple[str, str | None, bytes]]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _reply(self, body: bytes, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _handle(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        Handler.seen.append((self.path, self.headers.get("Content-Type"), body))
        if self.path == "/missing-topic":
            self._reply(b'{"code":"TOPIC_NOT_EXIST","message":"no T","topic":"T"}', 404)
        elif self.path == "/busy":
            self._reply(b'{"code":"SYSTEM_BUSY","message":"later"}', 503)
        elif self.path == "/odd-code":
            self._reply(b'{"code":"SOMETHING_NEW"}', 400)
        elif self.path == "/proxy-page":
            self._reply(b"<html>bad gateway</html>", 502)
        elif self.path == "/not-json":
            self._reply(b"<html>ok</html>")
        elif self.path == "/slow":
            Handler.release.wait(5)
            self.close_connection = True  # no answer: the client gave up on this one
        elif self.path == "/hang-up":  # the request is read, then the connection closed
            self.close_connection = True
        else:
            self._reply(json.dumps({"path": self.path, "echo": body.decode() or None}).encode())

    do_GET = do_PUT = do_POST = do_DELETE = _handle


@pytest.fixture(scope="module")
def server_addr() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{srv.server_address[1]}"
    Handler.release.set()
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def server(server_addr: str) -> Iterator[str]:
    Handler.release.clear()
    Handler.seen.clear()
    yield server_addr
    Handler.release.set()  # a handler still waiting is let go


@pytest.fixture
def rest() -> Iterator[RestClient]:
    client = RestClient(timeout_ms=2000)
    yield client
    client.close()


# -- paths -----------------------------------------------------------------------------


def test_path_encodes_every_part_and_the_query() -> None:
    assert path("topics", "a%b/c d", "queues", 3) == "/topics/a%25b%2Fc%20d/queues/3"
    assert path("x", query={"key": "k&=1", "max": 32}) == "/x?key=k%26%3D1&max=32"
    assert path("x", query={"on": True, "off": False, "none": None}) == "/x?on=true&off=false"
    assert path("x", query={"none": None}) == "/x"


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=4))
def test_path_parts_come_back_whole(parts: list[str]) -> None:
    encoded = path(*parts)
    assert [unquote(p) for p in encoded[1:].split("/")] == parts


def test_the_server_sees_the_path_as_encoded(server: str, rest: RestClient) -> None:
    target = path("topics", "%41 b/c", "messages", query={"key": "k%"})
    assert (
        rest.call(server, "GET", target)["path"] == target
    )  # httpx neither decodes nor re-encodes


# -- answers ---------------------------------------------------------------------------


@pytest.mark.parametrize("base", ["{}", "http://{}", "http://{}/"])
def test_json_in_and_out(server: str, rest: RestClient, base: str) -> None:
    got = rest.call(base.format(server), "PUT", "/topics/T", {"read_queue_nums": 2**70})
    assert got["path"] == "/topics/T"
    assert json.loads(got["echo"]) == {"read_queue_nums": 2**70}
    assert Handler.seen[-1][1] == "application/json"
    assert rest.call(server, "DELETE", "/topics/T")["echo"] is None
    assert Handler.seen[-1][2] == b""  # no payload, no body


def test_error_bodies_become_the_errors_of_their_code(server: str, rest: RestClient) -> None:
    with pytest.raises(TopicNotExistError) as missing:
        rest.call(server, "GET", "/missing-topic")
    assert missing.value.invalid_metadata and missing.value.message == "no T"
    assert missing.value.fields == {"topic": "T", "http_status": 404, "addr": server}
    with pytest.raises(BrokerBusyError) as busy:
        rest.call(f"http://{server}", "GET", "/busy")
    assert busy.value.retriable and busy.value.fields["addr"] == server
    with pytest.raises(PyMQError) as odd:
        rest.call(server, "GET", "/odd-code")
    assert odd.value.code == "SOMETHING_NEW" and odd.value.fields["http_status"] == 400


def test_answers_that_are_not_json_are_remoting_errors(server: str, rest: RestClient) -> None:
    with pytest.raises(RemotingError, match="answered HTTP 502"):
        rest.call(server, "GET", "/proxy-page")
    with pytest.raises(RemotingError, match="not JSON"):
        rest.call(server, "GET", "/not-json")


@pytest.mark.parametrize("body", [b"", b"<html>", b'{"a": 1', b"\xff\xfe", b"[1]", b'{"x": 1}'])
def test_decode_error_of_a_body_without_a_code(body: bytes) -> None:
    err = decode_error("h:1", 500, body)
    assert type(err) is RemotingError and "h:1 answered HTTP 500" in err.message


# -- transport failures ----------------------------------------------------------------


def test_refused_and_bad_addresses_are_connect_errors(rest: RestClient) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError) as refused:
        rest.call(f"127.0.0.1:{port}", "GET", "/health")
    assert refused.value.retriable and f"127.0.0.1:{port}" in refused.value.message
    with pytest.raises(ConnectError):
        rest.call("127.0.0.1:notaport", "GET", "/health")


def test_no_answer_in_time_is_a_timeout(server: str) -> None:
    rest = RestClient(timeout_ms=200)
    try:
        t0 = time.monotonic()
        with pytest.raises(RemotingTimeoutError, match="within 200 ms"):
            rest.call(server, "GET", "/slow")
        assert time.monotonic() - t0 < 2
        Handler.release.set()
        assert rest.call(server, "GET", "/after")["path"] == "/after"  # the client still works
    finally:
        rest.close()


def test_a_connection_broken_mid_request_is_a_remoting_error(server: str, rest: RestClient) -> None:
    with pytest.raises(RemotingError) as broken:
        rest.call(server, "POST", "/hang-up", {"x": 1})
    assert type(broken.value) is RemotingError and broken.value.retriable  # maybe processed


def test_one_client_is_shared_by_threads(server: str, rest: RestClient) -> None:
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(20):
                assert rest.call(server, "GET", f"/t{k}-{i}")["path"] == f"/t{k}-{i}"
        except (AssertionError, PyMQError) as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
