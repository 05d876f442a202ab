"""What one peer may take, with real servers: a request over ``max_frame_bytes`` (remoting:
that connection closed, the server goes on; REST: 413), connections over
``max_connections_per_address`` closed as they come, sends over ``send_rate_limit``
answered SYSTEM_BUSY for the flooding account only."""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from connector import Message, Producer, SendStatus
from connector.errors import BrokerBusyError, PyMQError
from connector.local import LocalCluster
from tests.support.acl import DENIED, PUB_ONLY, RULES, acl_env, create_topic
from tests.support.waits import wait_until


def plain_env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500", **settings)
    return env


def test_a_request_over_max_frame_bytes_is_refused(tmp_path: Path) -> None:
    env = plain_env(PYMQ_MAX_FRAME_BYTES="65536", PYMQ_AUTO_CREATE_TOPIC_ENABLE="true")
    with LocalCluster(tmp_path, brokers=1, env=env) as cluster:
        big = os.urandom(100_000)  # random: not compressed under the limit
        with Producer(namesrv=cluster.namesrv_addr, retry_times_when_send_failed=0) as p:
            assert p.send(Message(topic="Big", body=b"small")).status is SendStatus.SEND_OK
            with pytest.raises(PyMQError):
                p.send(Message(topic="Big", body=big))
            # only that connection was closed: the next send connects again
            assert p.send(Message(topic="Big", body=b"after")).status is SendStatus.SEND_OK
        url = f"http://{cluster.brokers[0].http_addr}/topics/Big/messages"
        resp = httpx.post(url, content=b"{" + b" " * 70_000 + b"}", timeout=10,
                          headers={"content-type": "application/json"})  # fmt: skip
        assert resp.status_code == 413 and resp.json()["code"] == "MESSAGE_SIZE_EXCEEDED"


def test_connections_over_the_per_address_limit_are_closed(tmp_path: Path) -> None:
    env = plain_env(PYMQ_MAX_CONNECTIONS_PER_ADDRESS="3")
    with LocalCluster(tmp_path, brokers=0, env=env) as cluster:
        host, port = cluster.namesrvs[0].addr.rsplit(":", 1)
        kept = [socket.create_connection((host, int(port)), 5) for _ in range(3)]
        try:
            extra = socket.create_connection((host, int(port)), 5)
            extra.settimeout(5)
            assert extra.recv(1) == b""  # closed by the server at once
            extra.close()
            kept.pop().close()

            def admitted() -> bool:  # the freed place is taken by a new connection
                s = socket.create_connection((host, int(port)), 5)
                s.settimeout(0.3)
                try:
                    return s.recv(1) != b""
                except TimeoutError:
                    return True  # still open: admitted
                finally:
                    s.close()

            wait_until(admitted, 10, what="a connection admitted once one closed")
        finally:
            for s in kept:
                s.close()


def test_http_connections_over_the_per_address_limit_are_answered_503(tmp_path: Path) -> None:
    """The REST listeners (NameServer and broker) count connections per address too:
    one too many gets 503 TOO_MANY_CONNECTIONS and is closed; the others go on."""
    env = plain_env(PYMQ_MAX_CONNECTIONS_PER_ADDRESS="3")
    with LocalCluster(tmp_path, brokers=1, env=env) as cluster:
        for server in (cluster.namesrvs[0], cluster.brokers[0]):
            host, port = server.http_addr.rsplit(":", 1)
            kept = [httpx.Client(base_url=f"http://{server.http_addr}") for _ in range(3)]
            try:
                for client in kept:  # each holds a keep-alive connection
                    assert client.get("/health", timeout=10).status_code == 200
                extra = socket.create_connection((host, int(port)), 5)
                extra.settimeout(5)
                answer = b""
                while chunk := extra.recv(4096):
                    answer += chunk
                extra.close()
                assert answer.startswith(b"HTTP/1.1 503"), answer
                assert b'"code":"TOO_MANY_CONNECTIONS"' in answer
                for client in kept:  # the admitted ones were not disturbed
                    assert client.get("/health", timeout=10).status_code == 200
                kept.pop().close()
                url = f"http://{server.http_addr}/health"
                wait_until(
                    lambda url=url: httpx.get(url, timeout=5).status_code == 200,
                    10,
                    what="an HTTP connection admitted once one closed",
                )
            finally:
                for client in kept:
                    client.close()


def test_a_flooding_account_is_slowed_down_the_others_are_not(tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(RULES)
    env = acl_env(acl_file)
    env["PYMQ_SEND_RATE_LIMIT"] = "100"
    with LocalCluster(tmp_path / "c", brokers=1, env=env) as cluster:
        create_topic(cluster, "Rate")
        ns = cluster.namesrv_addr
        busy: list[int] = []
        calm: list[SendStatus] = []
        stop = threading.Event()

        def flood() -> None:
            with Producer(namesrv=ns, access_key=PUB_ONLY[0], secret_key=PUB_ONLY[1],
                          retry_times_when_send_failed=0) as p:  # fmt: skip
                while not stop.is_set():
                    try:
                        p.send(Message(topic="Rate", body=b"flood"))
                    except BrokerBusyError as exc:
                        assert exc.retriable and "send_rate_limit" in exc.message
                        busy.append(1)

        flooder = threading.Thread(target=flood)
        flooder.start()
        try:
            wait_until(lambda: len(busy) > 50, 30, what="the flood refused SYSTEM_BUSY")
            with Producer(namesrv=ns, access_key=DENIED[0], secret_key=DENIED[1],
                          retry_times_when_send_failed=0) as p:  # fmt: skip
                for _ in range(40):  # 20 a second: under the limit
                    calm.append(p.send(Message(topic="Rate", body=b"calm")).status)
                    time.sleep(0.05)
        finally:
            stop.set()
            flooder.join(30)
        assert calm == [SendStatus.SEND_OK] * 40
