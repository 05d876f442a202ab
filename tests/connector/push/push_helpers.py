"""Helpers of the push consumer tests: topics, producing, bounded waits, and members
(push consumers in processes of their own, ``push_member.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connector import Admin, Message, Producer
from connector.local import LocalCluster

MEMBER = Path(__file__).with_name("push_member.py")


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
