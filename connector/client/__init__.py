"""The client's routing state: topic publish info and latency fault avoidance.

Pure classes, no IO: ``TopicPublishInfo`` (a topic's writable queues and the
round-robin counter) and ``MQFaultStrategy`` (which broker to skip, and for
how long, with an injectable millisecond clock). The producer, which does
the network calls, lives in ``connector.client.producer``.
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

__all__ = [
    "DEFAULT_LATENCY_MAX_MS",
    "DEFAULT_NOT_AVAILABLE_DURATION_MS",
    "ISOLATION_LATENCY_MS",
    "FaultItem",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
    "QueueIndex",
    "TopicPublishInfo",
    "split_send_timeout",
]
