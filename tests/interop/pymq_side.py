"""pymq's side of the interop tests: topics on every broker, what pymq's own client reads,
and a group's progress as ``pymq admin`` reports it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from connector.client.admin import Admin
from connector.client.consumer import PullConsumer
from connector.errors import PyMQError
from connector.protocol.message import MessageExt
from connector.protocol.status import PullStatus

QUEUES = 4  # of every interop topic, on each broker


def create_topic(namesrv: str, topic: str, *, brokers: int = 2, timeout_s: float = 15) -> None:
    """Create ``topic`` on every broker and wait until the NameServer routes it to all."""
    with Admin(namesrv=namesrv) as admin:
        admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                route = admin.topic_route(topic)
            except PyMQError:
                route = None
            if route is not None and len({q.broker_name for q in route.queues}) >= brokers:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic} not routed to {brokers} brokers in {timeout_s} s")
            time.sleep(0.1)


def consumer_progress(namesrv: str, group: str) -> list[dict[str, Any]]:
    """``pymq admin consumer progress`` of ``group``, as its JSON rows."""
    cli = [sys.executable, "-m", "connector.cli", "admin", "--json", "--namesrv", namesrv]
    proc = subprocess.run(
        [*cli, "consumer", "progress", group],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows: list[dict[str, Any]] = json.loads(proc.stdout)
    return rows


def pull_all(namesrv: str, topic: str) -> list[MessageExt]:
    out: list[MessageExt] = []
    with PullConsumer(group="pymq_interop_reader", namesrv=namesrv) as consumer:
        for mq in consumer.fetch_queues(topic):
            offset = 0
            while True:
                res = consumer.pull(mq, offset, 256)
                if res.status is not PullStatus.FOUND:
                    break
                out += res.messages
                offset = res.next_begin_offset
    return out
