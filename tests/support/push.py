"""Helpers of the push consumer tests: producing, and members (push consumers in
processes of their own, ``push_member.py``, beside this module)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connector import Message, Producer
from connector.local import LocalCluster

MEMBER = Path(__file__).with_name("push_member.py")


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
