"""Request builders of the NameServer tests (the ms clock is ``clocks.FakeMsClock``)."""

from __future__ import annotations

from typing import Any

from connector.protocol.route import (
    DataVersion,
    RegisterBrokerRequest,
    TopicQueueConfig,
    UnregisterBrokerRequest,
)
from tests.support.clocks import START_MS

CLUSTER = "DefaultCluster"


def queues(n: int = 4, *, write: int | None = None, perm: int = 6) -> TopicQueueConfig:
    return TopicQueueConfig(
        read_queue_nums=n, write_queue_nums=n if write is None else write, perm=perm
    )


def register_request(
    name: str = "broker-a",
    *,
    broker_id: int = 0,
    addr: str = "127.0.0.1:10911",
    cluster: str = CLUSTER,
    version: int = 1,
    topics: dict[str, TopicQueueConfig] | None = None,
) -> RegisterBrokerRequest:
    return RegisterBrokerRequest(
        cluster=cluster,
        broker_name=name,
        broker_id=broker_id,
        broker_addr=addr,
        data_version=DataVersion(timestamp=START_MS + version, counter=version),
        topics={"T": queues()} if topics is None else topics,
    )


def unregister_request(
    name: str = "broker-a",
    *,
    broker_id: int = 0,
    addr: str = "127.0.0.1:10911",
    cluster: str = CLUSTER,
) -> UnregisterBrokerRequest:
    return UnregisterBrokerRequest(
        cluster=cluster, broker_name=name, broker_id=broker_id, broker_addr=addr
    )


def register_json(**kwargs: Any) -> dict[str, Any]:
    """A registration as the JSON a broker POSTs."""
    return register_request(**kwargs).model_dump(mode="json")
