"""The producer's route refresh follows the seeds (updateTopicRouteInfoFromNameServer):
a topic the NameServer has no route for keeps the route it had; TBW102's route stands in
only for a topic without a usable one (tryToFindTopicPublishInfo)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.client.connection import RemotingClient
from connector.client.producer import Producer
from connector.local import LocalCluster
from connector.protocol.message import Message
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.processes import clean_env

TOPIC = "OnlyOnB"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, brokers=2, namesrvs=1, env=clean_env()) as c:
        yield c


def create_on(addr: str, topic: str, queues: int) -> None:
    """UPDATE_AND_CREATE_TOPIC on one broker (answered once the NameServer knows it)."""
    client = RemotingClient()
    try:
        ext = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues)}
        cmd = RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
        assert client.invoke(addr, cmd, 10).code == ResponseCode.SUCCESS
    finally:
        client.close()


def test_a_topic_whose_brokers_left_keeps_its_route(cluster: LocalCluster) -> None:
    create_on(cluster.broker("broker-b").addr, TOPIC, 2)
    with Producer(group="route-refresh", namesrv=cluster.namesrv_addr) as producer:
        assert producer.send(Message(topic=TOPIC, body=b"x")).queue.broker_name == "broker-b"
        before = producer.publish_info(TOPIC)
        assert {q.broker_name for q in before.message_queues} == {"broker-b"}

        # broker-b unregisters: the NameServer has no route of the topic, but TBW102's
        # (broker-a) is there
        cluster.broker("broker-b").terminate()
        assert producer.namesrv.topic_route(TOPIC) is None
        producer.refresh_routes()
        # not replaced by TBW102's: that would auto-create the topic on broker-a
        assert producer.publish_info(TOPIC) is before

        # a topic without a route of its own still goes through TBW102 (auto-creation)
        fresh = producer.send(Message(topic="NeverCreated", body=b"y"))
        assert fresh.queue.broker_name == "broker-a"
