"""Clients against a real cluster: topics routed to every broker, reading a whole topic,
filling queues, and a group's progress as ``pymq admin`` reports it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

from connector.client.admin import Admin
from connector.client.consumer import PullConsumer
from connector.client.producer import Producer
from connector.client.results import SendContext
from connector.errors import PyMQError
from connector.local import LocalCluster
from connector.protocol.message import Message, MessageExt, MessageQueue
from connector.protocol.status import PullStatus
from tests.support.waits import wait_until

QUEUES = 4  # of a topic create_topic makes, on each broker, unless told otherwise


def create_topic(
    cluster: LocalCluster,
    topic: str,
    queues: int = QUEUES,
    *,
    credentials: tuple[str, str] | None = None,
    timeout_s: float = 30.0,
) -> None:
    """``queues`` on every broker of ``cluster``; returns once the NameServer routes
    ``topic`` to all of them (a producer that saw fewer would send one key to two queues).

    ``credentials`` (access key, secret key) for a cluster with ACL on.
    """
    access_key, secret_key = credentials if credentials is not None else (None, None)
    brokers = sum(1 for b in cluster.brokers if "SLAVE" not in b.args)  # the masters
    with Admin(namesrv=cluster.namesrv_addr, access_key=access_key, secret_key=secret_key) as admin:
        admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)

        def routed() -> bool:
            try:
                route = admin.topic_route(topic)
            except PyMQError:
                return False
            return len({q.broker_name for q in route.queues}) >= brokers

        wait_until(routed, timeout_s, what=f"{topic} routed to all {brokers} brokers")


def pull_all(source: PullConsumer | str, topic: str, *, max_nums: int = 256) -> list[MessageExt]:
    """Every message of every queue of ``topic``, queue by queue in offset order.

    ``source`` is a consumer, or a NameServer address to read through a consumer of its own.
    """
    if isinstance(source, str):
        with PullConsumer(group="pymq_test_reader", namesrv=source) as consumer:
            return pull_all(consumer, topic, max_nums=max_nums)
    out: list[MessageExt] = []
    for mq in source.fetch_queues(topic):
        offset = 0
        while True:
            res = source.pull(mq, offset, max_nums)
            if res.status is not PullStatus.FOUND:
                break
            out += res.messages
            offset = res.next_begin_offset
    return out


def wait_route(producer: Producer, topic: str, brokers: int, timeout_s: float = 10) -> None:
    """Until the NameServer routes ``topic`` to at least ``brokers`` brokers."""

    def routed() -> bool:
        route = producer.namesrv.topic_route(topic)
        return route is not None and len({q.broker_name for q in route.queues}) >= brokers

    wait_until(routed, timeout_s, what=f"{topic} on {brokers} brokers")


def fill(cluster: LocalCluster, topic: str, count: int) -> MessageQueue:
    """``count`` messages ``m0`` .. into one queue (tags A, every third B); that queue."""
    with Producer(group="e2e", namesrv=cluster.namesrv_addr) as producer:
        first = producer.send(Message(topic=topic, body=b"m0", tags="A"))
        wait_route(producer, topic, 1)
        mq = first.queue
        msgs = [
            Message(topic=topic, body=b"m%d" % i, tags="A" if i % 3 else "B")
            for i in range(1, count)
        ]
        for i in range(0, len(msgs), 100):
            producer.send_batch(msgs[i : i + 100], queue=mq)
    return mq


class Recorder:
    """A send hook that keeps every context it is shown, before and after."""

    def __init__(self) -> None:
        self.before: list[SendContext] = []
        self.after: list[SendContext] = []
        self.lock = threading.Lock()

    def send_message_before(self, ctx: SendContext) -> None:
        with self.lock:
            self.before.append(ctx)

    def send_message_after(self, ctx: SendContext) -> None:
        with self.lock:
            self.after.append(ctx)


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
