"""The client's routing state: topic publish info, latency fault avoidance, read nodes.

Pure classes, no IO: ``TopicPublishInfo`` (a topic's writable queues and the
round-robin counter), ``MQFaultStrategy`` (which broker to skip, and for
how long, with an injectable millisecond clock) and ``ReadRouting`` (which
node of a broker name, master or slave, a consumer reads from). The producer
and the consumer, which do the network calls, live in
``connector.client.producer`` and ``connector.client.consumer``.
"""

from connector.client.latency import (
    DEFAULT_LATENCY_MAX_MS,
    DEFAULT_NOT_AVAILABLE_DURATION_MS,
    ISOLATION_LATENCY_MS,
    FaultItem,
    LatencyFaultTolerance,
    MQFaultStrategy,
    split_send_timeout,
)
from connector.client.publish_info import QueueIndex, TopicPublishInfo
from connector.client.read_routing import (
    FAILED_ADDR_AVOID_MS,
    ROUTE_REFRESH_INTERVAL_MS,
    ReadChoice,
    ReadRouting,
)

__all__ = [
    "DEFAULT_LATENCY_MAX_MS",
    "DEFAULT_NOT_AVAILABLE_DURATION_MS",
    "FAILED_ADDR_AVOID_MS",
    "ISOLATION_LATENCY_MS",
    "ROUTE_REFRESH_INTERVAL_MS",
    "FaultItem",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
    "QueueIndex",
    "ReadChoice",
    "ReadRouting",
    "TopicPublishInfo",
    "split_send_timeout",
]
