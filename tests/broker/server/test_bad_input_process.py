"""A sample of the bad-input matrix against a real broker process over real sockets.

The full matrix runs in-process (tests/broker/http/test_bad_input.py); this
checks what only a real server does: uvicorn's own parsing, a body that is
cut off or larger than it says, and that the process stays healthy.
"""

from __future__ import annotations

import socket
from typing import Any

import httpx
import pytest

from connector.protocol.batch import encode_batch
from connector.protocol.properties import encode_properties
from tests.support.processes import Servers
from tests.support.rest import create_topic, health, send, url

BATCH = {"content-type": "application/octet-stream"}
MiB = 1 << 20


@pytest.fixture(scope="module")
def broker(module_servers: Servers) -> str:
    addr = module_servers.broker().http_addr
    create_topic(addr, "Guarded")
    send(addr, "Guarded", "first", queue_id=0)
    return addr


def state(addr: str) -> tuple[int, list[int]]:
    topic = httpx.get(url(addr, "topics", "Guarded"), timeout=10).json()
    return health(addr)["commit_log_max_offset"], [q["max_offset"] for q in topic["queues"]]


def batch(n: int) -> bytes:
    return encode_batch([(b"body %d" % i, 0, encode_properties({"i": str(i)})) for i in range(n)])


CASES: dict[str, tuple[str, str, dict[str, Any], int, str]] = {
    "traversal": ("POST", "/topics/..%2Fx/messages", {"json": {"body": "x"}}, 404, "NOT_FOUND"),
    "reserved": ("POST", "/topics/TBW102/messages", {"json": {"body": "x"}}, 400, "TOPIC_ILLEGAL"),
    "long name": ("POST", f"/topics/{'a' * 128}/messages", {"json": {"body": "x"}}, 400,
                  "TOPIC_ILLEGAL"),
    "empty body": ("POST", "/topics/Guarded/messages", {"json": {"body": ""}}, 400,
                   "MESSAGE_ILLEGAL"),
    "4 MiB + 1": ("POST", "/topics/Guarded/messages/batch",
                  {"content": encode_batch([(b"x" * (4 * MiB + 1), 0, b"")]), "headers": BATCH},
                  413, "MESSAGE_SIZE_EXCEEDED"),
    "truncated batch": ("POST", "/topics/Guarded/messages/batch",
                        {"content": batch(3)[:-7], "headers": BATCH}, 400, "MESSAGE_ILLEGAL"),
    "wrong type": ("POST", "/topics/Guarded/messages",
                   {"content": b'{"body":"x"}', "headers": {"content-type": "text/plain"}}, 415,
                   "UNSUPPORTED_MEDIA_TYPE"),
    "negative offset": ("GET", "/topics/Guarded/queues/0/messages?offset=-1", {}, 400,
                        "OFFSET_ILLEGAL"),
    "huge offset": ("GET", "/topics/Guarded/queues/0/messages?offset=1000000000000000", {}, 400,
                    "OFFSET_ILLEGAL"),
    "unknown queue": ("GET", "/topics/Guarded/queues/99999/messages", {}, 400,
                      "QUEUE_ID_ILLEGAL"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_a_4xx_and_stores_nothing(broker: str, case: str) -> None:
    method, path, kwargs, status, code = CASES[case]
    before = state(broker)
    resp = httpx.request(method, f"http://{broker}{path}", timeout=30, **kwargs)
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["code"] == code and isinstance(body["message"], str) and body["message"]
    assert health(broker)["status"] == "ok"
    assert state(broker) == before


def raw_exchange(addr: str, request: bytes, timeout_s: float = 10.0) -> bytes:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout_s) as sock:
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_body_shorter_than_content_length_stores_nothing(broker: str) -> None:
    before = state(broker)
    data = batch(5)
    head = (
        f"POST /topics/Guarded/messages/batch?queue_id=1 HTTP/1.1\r\nHost: x\r\n"
        f"Content-Type: application/octet-stream\r\nContent-Length: {len(data) + 100}\r\n\r\n"
    ).encode()
    raw_exchange(broker, head + data)  # the client hangs up before the body is complete
    assert health(broker)["status"] == "ok"
    assert state(broker) == before


def test_garbage_request_line_does_not_hurt(broker: str) -> None:
    before = state(broker)
    answer = raw_exchange(broker, b"\x00\x01\x02 nonsense\r\n\r\n")
    assert not answer or answer.startswith(b"HTTP/1.1 4")
    assert health(broker)["status"] == "ok"
    assert state(broker) == before
