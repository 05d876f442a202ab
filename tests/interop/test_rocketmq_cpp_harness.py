"""The C++ client's runner, without a pymq server: failures come back as reports, bounded."""

from __future__ import annotations

import functools
import json
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from tests.support.rocketmq_cpp import CppClient


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class SilentServer:
    """Accepts connections and reads each one's first frame; never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.frames: list[tuple[int, bytes]] = []  # (serialize type, header bytes)
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed by close()
                return
            self.conns.append(conn)
            conn.settimeout(10)
            try:
                (length,) = struct.unpack(">i", self._read(conn, 4))
                data = self._read(conn, length)
            except OSError:
                continue
            (mark,) = struct.unpack(">i", data[:4])
            self.frames.append((mark >> 24, data[4 : 4 + (mark & 0xFFFFFF)]))

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()
        self.thread.join(5)


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.close()


def test_produce_to_a_closed_port_fails_fast(cpp_client: CppClient, closed_port: int) -> None:
    res = cpp_client.produce(namesrv=f"127.0.0.1:{closed_port}", topic="T", count=3, timeout_s=30)
    assert not res["ok"] and not res["timed_out"] and res["returncode"] == 1
    assert res["error"]["type"] == "ProducerSendSyncFailed"
    assert "No route info of this topic: T" in res["error"]["message"]
    assert res["sent"] == [] and [f["i"] for f in res["failed"]] == [0]
    assert len(res["retries"]) == 3  # the client never reached a broker: retried, then given up
    assert res["elapsed_s"] < 20
    assert "No route info of this topic: T" in res["cpp_log"]  # the client's log, for failures


@pytest.mark.parametrize("op", ["pull", "push"])
def test_consumers_without_a_server_stop_at_their_deadline(
    cpp_client: CppClient, closed_port: int, op: str
) -> None:
    run = cpp_client.pull if op == "pull" else functools.partial(cpp_client.push, group="G")
    res = run(namesrv=f"127.0.0.1:{closed_port}", topic="T", expected=5, deadline_s=2, timeout_s=30)
    assert not res["ok"] and not res["timed_out"], res
    assert res["error"]["type"] == "Deadline"
    assert res["messages"] == []


def test_a_server_that_never_answers_is_cut_off_at_the_hard_timeout(
    cpp_client: CppClient, silent_server: SilentServer
) -> None:
    # the client's send_sync waits for a route without bound: only the kill ends it
    res = cpp_client.produce(
        namesrv=f"127.0.0.1:{silent_server.port}", topic="T", count=1, timeout_s=6
    )
    assert res["timed_out"] and not res["ok"] and res["returncode"] < 0
    assert res["error"]["type"] == "Timeout"
    assert 6 <= res["elapsed_s"] < 30
    # what the client said first: a route request (105) for the topic, in a JSON header
    serialize_type, header = silent_server.frames[0]
    assert serialize_type == 0 and header.endswith(b"\n")
    first = json.loads(header)
    assert (first["code"], first["language"], first["flag"]) == (105, "CPP", 0)
    assert first["extFields"]["topic"] == "T"


def test_run_names_what_an_operation_lacks(cpp_client: CppClient) -> None:
    with pytest.raises(ValueError, match=r"push needs \['group'"):
        cpp_client.run("push", namesrv="127.0.0.1:1", topic="T")
