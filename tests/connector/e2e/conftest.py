"""A real cluster for client tests: 2 NameServers and 2 brokers, started once per module."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.client.consumer import PullConsumer
from connector.client.producer import Producer
from connector.client.results import SendContext
from connector.local import LocalCluster
from connector.protocol.message import MessageExt
from connector.protocol.status import PullStatus


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data: Path = tmp_path_factory.mktemp("cluster")
    env = clean_env(
        PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500",
        PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS="200",
        PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS="3000",
    )
    with LocalCluster(data, brokers=2, namesrvs=2, env=env) as c:
        yield c


def pull_everything(consumer: PullConsumer, topic: str) -> list[MessageExt]:
    out: list[MessageExt] = []
    for mq in consumer.fetch_queues(topic):
        offset = 0
        while True:
            res = consumer.pull(mq, offset, 1000)
            if res.status is not PullStatus.FOUND:
                break
            out += res.messages
            offset = res.next_begin_offset
    return out


def wait_route(producer: Producer, topic: str, brokers: int, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        route = producer.namesrv.topic_route(topic)
        if route is not None and len({q.broker_name for q in route.queues}) >= brokers:
            return
        time.sleep(0.05)
    raise AssertionError(f"{topic} not on {brokers} brokers within {timeout_s} s")


class Recorder:
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
