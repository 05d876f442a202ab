"""A real cluster for push consumer tests (1 NameServer, 2 brokers, short delays and
lock expiry), and members: push consumers in processes of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connector import Admin, Message, Producer
from connector.server.local import LocalCluster

MEMBER = Path(__file__).with_name("push_member.py")
DELAYS = "100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(
        PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500",
        PYMQ_MESSAGE_DELAY_LEVEL=DELAYS,
        PYMQ_REBALANCE_LOCK_MAX_LIVE_TIME_MS="5000",
    )
    with LocalCluster(tmp_path_factory.mktemp("push-cluster"), brokers=2, env=env) as c:
        yield c


def create_topic(cluster: LocalCluster, topic: str, queues: int = 4) -> None:
    """``queues`` on every broker, and wait until the NameServer routes to all of them
    (a producer that saw fewer would send one key to two queues: no order to check)."""
    with Admin(namesrv=cluster.namesrv_addr) as admin:
        admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)

        def routed() -> bool:
            route = admin.topic_route(topic)
            return len({q.broker_name for q in route.queues}) == len(cluster.brokers)

        wait_for(f"{topic} routed to every broker", routed, 30)


def produce(
    cluster: LocalCluster, topic: str, bodies: list[str], *, tags: str | None = None,
    key: Callable[[str], str] | None = None,
) -> None:  # fmt: skip
    """Send each body; with ``key``, as ordered messages (the same key, the same queue)."""
    with Producer(group="push-test-producer", namesrv=cluster.namesrv_addr) as producer:
        for body in bodies:
            msg = Message(topic=topic, body=body.encode(), tags=tags)
            if key is None:
                producer.send(msg)
            else:
                producer.send(msg, sharding_key=key(body))


def wait_for(what: str, check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        time.sleep(0.05)


class Member:
    """``push_member.py`` in a process of its own; its events as they come."""

    def __init__(self, params: dict[str, Any], log_path: Path) -> None:
        self.params = params
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self._log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed in stop
        self.proc = subprocess.Popen(
            [sys.executable, str(MEMBER), json.dumps(params)],
            stdout=subprocess.PIPE, stderr=self._log, text=True, bufsize=1,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.lock:
                self.events.append(json.loads(line))

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return [e for e in self.events if e["event"] == kind]

    @property
    def bodies(self) -> list[str]:
        return [e["body"] for e in self.of("msg")]

    @property
    def owned(self) -> list[str]:
        owned = self.of("owned")
        return owned[-1]["queues"] if owned else []

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)
        self._log.close()

    def stop(self, timeout_s: float = 60.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(5)
        self._log.close()


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Callable[..., Member]]:
    started: list[Member] = []

    def start(**params: Any) -> Member:
        m = Member(params, tmp_path / f"member-{len(started)}.log")
        started.append(m)
        return m

    yield start
    for m in started:
        m.stop()
