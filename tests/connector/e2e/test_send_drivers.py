"""The sync and async send drivers share one send policy: the same decisions on the
same failures (they had drifted: only the sync one asked for the route again when
a queue's broker had no master)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connector import Admin, Message, MessageQueue, Producer
from connector.errors import TopicNotExistError
from connector.local import LocalCluster

TOPIC = "DriversAlike"


@pytest.fixture(scope="module")
def producer(cluster: LocalCluster) -> Iterator[Producer]:
    with Admin(namesrv=cluster.namesrv_addr) as admin:
        admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
    p = Producer(group="drivers", namesrv=cluster.namesrv_addr, retry_times_when_send_failed=2,
                 retry_times_when_send_async_failed=2)  # fmt: skip
    p.start()
    yield p
    p.shutdown()


def _counting_refreshes(producer: Producer) -> list[str]:
    asked: list[str] = []
    real = producer.policy._refresh_route

    def refresh(topic: str) -> object:
        asked.append(topic)
        return real(topic)

    producer.policy._refresh_route = refresh
    return asked


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_queue_without_a_master_asks_for_the_route_on_both_drivers(
    producer: Producer, driver: str
) -> None:
    producer.send(Message(topic=TOPIC, body=b"warm"))  # the route is known
    asked = _counting_refreshes(producer)
    gone = MessageQueue(TOPIC, "broker-without-master", 0)
    msg = Message(topic=TOPIC, body=b"x")
    with pytest.raises(TopicNotExistError, match="has no master"):
        if driver == "sync":
            producer.send(msg, queue=gone, timeout_ms=3000)
        else:
            producer.send_async(msg, queue=gone).result(10)
    assert asked == [TOPIC] * 3  # every attempt (1 + 2 retries) asked again


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_both_drivers_send_and_count_attempts_alike(producer: Producer, driver: str) -> None:
    msg = Message(topic=TOPIC, body=b"y", tags="T")
    if driver == "sync":
        r = producer.send(msg, sharding_key="k")
    else:
        r = producer.send_async(msg, sharding_key="k").result(10)
    again = producer.send(Message(topic=TOPIC, body=b"z"), sharding_key="k")
    assert r.queue == again.queue  # one sharding rule for both
