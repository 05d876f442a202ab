"""A real SYNC_FLUSH broker answers its hot routes from the protocol (no ASGI cycle):
pipelined sends and pulls on one connection come back in order, errors are
``{"code","message"}`` replies on a connection that stays usable, and a client
that leaves mid-send does not disturb the rest.
"""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from conftest import Servers, body_of, create_topic, pull_all

from connector.protocol.batch import encode_batch
from connector.protocol.properties import encode_properties
from connector.protocol.wire import (
    BATCH_CONTENT_TYPE,
    H_STATUS,
    RECORDS_CONTENT_TYPE,
    split_records,
)

TOPIC = "Direct"
OCTET = f"content-type: {BATCH_CONTENT_TYPE}"


@pytest.fixture(scope="module")
def broker(module_servers: Servers) -> str:
    addr = module_servers.broker(env={"PYMQ_FLUSH_DISK_TYPE": "SYNC_FLUSH"}).http_addr
    create_topic(addr, TOPIC)
    return addr


class Conn:
    def __init__(self, addr: str) -> None:
        host, port = addr.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
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
        body = self.file.read(int(headers["content-length"]))
        return int(status_line.split()[1]), headers, body

    def json(self) -> tuple[int, Any]:
        status, _, body = self.response()
        return status, json.loads(body)

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def request(method: str, target: str, body: bytes = b"", *headers: str) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "host: broker", f"content-length: {len(body)}"]
    return ("\r\n".join([*lines, *headers]) + "\r\n\r\n").encode() + body


def batch(*bodies: bytes) -> bytes:
    return encode_batch([(b, 0, encode_properties({"k": "v"})) for b in bodies])


def test_pipelined_sends_and_pulls_come_back_in_order(broker: str) -> None:
    c = Conn(broker)
    c.send(
        request("POST", f"/topics/{TOPIC}/messages/batch?queue_id=0", batch(b"a", b"b"), OCTET)
        + request("POST", f"/topics/{TOPIC}/messages/batch?queue_id=0", batch(b"c"), OCTET)
        + request(
            "POST",
            f"/topics/{TOPIC}/messages",
            json.dumps({"body": "d", "queue_id": 0}).encode(),
            "content-type: application/json",
        )
        + request("GET", f"/topics/{TOPIC}/queues/0/messages?offset=0&max=10")
        + request(
            "GET",
            f"/topics/{TOPIC}/queues/0/messages?offset=0&max=10",
            b"",
            f"accept: {RECORDS_CONTENT_TYPE}",
        )
    )
    status, first = c.json()
    assert status == 200 and (first["status"], first["queue_offset"], first["count"]) == (
        "SEND_OK", 0, 2,
    )  # fmt: skip
    status, second = c.json()
    assert status == 200 and second["queue_offset"] == 2
    status, third = c.json()
    assert status == 200 and third["queue_offset"] == 3
    status, pulled = c.json()
    assert status == 200 and [body_of(m) for m in pulled["messages"]] == [b"a", b"b", b"c", b"d"]
    status, headers, records = c.response()
    assert status == 200 and headers[H_STATUS] == "FOUND"
    assert len(split_records(records)) == 4
    c.close()


def test_errors_are_replies_and_the_connection_stays_usable(broker: str) -> None:
    c = Conn(broker)
    c.send(
        request("POST", f"/topics/{TOPIC}/messages/batch", batch(b"x"), "content-type: text/plain")
    )
    status, body = c.json()
    assert status == 415 and body["code"]
    c.send(
        request(
            "POST",
            f"/topics/{TOPIC}/messages/batch?queue_id=zero",
            batch(b"x"),
            f"content-type: {BATCH_CONTENT_TYPE}",
        )
    )
    status, body = c.json()
    assert status == 400 and "queue_id" in body["message"]
    c.send(request("POST", "/topics/bad$name/messages", b'{"body":"x"}',
                   "content-type: application/json"))  # fmt: skip
    status, body = c.json()
    assert status == 400 and body["code"]
    c.send(request("POST", f"/topics/{TOPIC}/messages", b"{not json",
                   "content-type: application/json"))  # fmt: skip
    status, body = c.json()
    assert status == 400 and body["code"] == "BAD_REQUEST"
    big = b"y" * (6 << 20)  # over the batch route's body limit
    c.send(request("POST", f"/topics/{TOPIC}/messages/batch", big,
                   f"content-type: {BATCH_CONTENT_TYPE}"))  # fmt: skip
    status, body = c.json()
    assert status == 413 and body["code"] == "MESSAGE_SIZE_EXCEEDED"
    c.send(request("GET", "/health"))
    status, body = c.json()
    assert status == 200
    c.close()


def test_concurrent_single_sends_and_a_client_that_leaves(broker: str) -> None:
    topic = "DirectMany"
    create_topic(broker, topic)
    gone = Conn(broker)  # sends and leaves without reading its answer
    gone.send(request("POST", f"/topics/{topic}/messages/batch?queue_id=1", batch(b"left"),
                      f"content-type: {BATCH_CONTENT_TYPE}"))  # fmt: skip
    gone.close()

    def sender(w: int) -> list[int]:
        c = Conn(broker)
        offsets = []
        for i in range(25):
            body = batch(f"{w}-{i}".encode())
            c.send(request("POST", f"/topics/{topic}/messages/batch?queue_id=0", body, OCTET))
            status, body = c.json()
            assert status == 200 and body["status"] == "SEND_OK", body
            offsets.append(body["queue_offset"])
        c.close()
        return offsets

    with ThreadPoolExecutor(16) as pool:
        offsets = sorted(o for got in pool.map(sender, range(16)) for o in got)
    assert offsets == list(range(400))
    bodies = sorted(body_of(m) for m in pull_all(broker, topic, 0))
    assert bodies == sorted(f"{w}-{i}".encode() for w in range(16) for i in range(25))
