"""A slow broker is isolated by its latency (send_latency_fault_enable).

broker-b sits behind a TCP proxy that holds every request for a while (the
broker advertises the proxy's address, as a broker behind NAT would), so its
sends succeed but slowly; the latency table benches it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from connector import Message, Producer
from connector.client.results import SendContext
from connector.local import ServerProcess

TOPIC = "SlowT"


class DelayProxy:
    """Forwards 127.0.0.1:port to ``target``; client->server data waits ``delay_s`` first."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.delay_s = 0.0
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.target is not None
            upstream = socket.create_connection(self.target, timeout=10)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, delayed: bool) -> None:
        try:
            while chunk := src.recv(65536):
                if delayed and self.delay_s:
                    time.sleep(self.delay_s)  # the injected slowness under test
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def close(self) -> None:
        self.closed.set()
        self.listener.close()


class Attempts:
    def __init__(self) -> None:
        self.log: list[tuple[str, float]] = []
        self.lock = threading.Lock()

    def send_message_before(self, ctx: SendContext) -> None:
        pass

    def send_message_after(self, ctx: SendContext) -> None:
        with self.lock:
            self.log.append((ctx.broker_name, ctx.latency_ms))


@pytest.fixture
def slow_cluster(tmp_path: Path) -> Iterator[tuple[str, DelayProxy]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["PYMQ_REGISTER_NAME_SERVER_PERIOD_MS"] = "500"
    proxy = DelayProxy()
    logs = tmp_path / "logs"
    procs: list[ServerProcess] = []
    try:
        ns = ServerProcess(
            "namesrv",
            ["--port", "0", "--data", str(tmp_path / "ns")],
            log_path=logs / "ns.log",
            env=env,
        ).start()
        procs.append(ns)
        for name, extra in (
            ("broker-a", {}),
            ("broker-b", {"PYMQ_ADVERTISED_ADDR": f"127.0.0.1:{proxy.port}"}),
        ):
            b = ServerProcess(
                "broker",
                [
                    "--name",
                    name,
                    "--port",
                    "0",
                    "--namesrv",
                    ns.addr,
                    "--store",
                    str(tmp_path / name),
                ],
                log_path=logs / f"{name}.log",
                env={**env, **extra},
                name=name,
            ).start()
            procs.append(b)
            r = httpx.put(
                f"http://{b.http_addr}/topics/{TOPIC}",
                json={"read_queue_nums": 2, "write_queue_nums": 2, "perm": 6},
                timeout=10,
            )
            assert r.status_code == 200, r.text
            if name == "broker-b":
                host, port = b.addr.rsplit(":", 1)
                proxy.target = (host, int(port))
        yield ns.addr, proxy
    finally:
        for p in reversed(procs):
            p.terminate()
        proxy.close()


def test_slow_broker_is_isolated_by_latency(slow_cluster: tuple[str, DelayProxy]) -> None:
    ns, proxy = slow_cluster
    attempts = Attempts()
    with Producer(group="slow", namesrv=ns, send_latency_fault_enable=True) as producer:
        producer.register_send_hook(attempts)
        deadline = time.monotonic() + 10
        while True:
            route = producer.namesrv.topic_route(TOPIC)
            if route is not None and len(route.brokers) == 2:
                break
            assert time.monotonic() < deadline, "route never showed both brokers"
            time.sleep(0.05)
        assert producer.publish_info(TOPIC).broker_addrs["broker-b"] == f"127.0.0.1:{proxy.port}"
        proxy.delay_s = 0.6
        for i in range(40):
            producer.send(Message(topic=TOPIC, body=b"s%d" % i))
    to_b = [(i, lat) for i, (b, lat) in enumerate(attempts.log) if b == "broker-b"]
    assert len(to_b) == 1, attempts.log  # one slow answer, then broker-b is benched
    assert to_b[0][1] >= 550
    assert producer.fault_strategy.is_available("broker-b") is False
    assert len(attempts.log) == 40
