"""Test data spread evenly over every queue of a topic (one batch request per queue)."""

from __future__ import annotations

from connector import Message, Producer
from connector.client.consumer import PullConsumer


def fill_queues(ns: str, topic: str, n: int, *, body_bytes: int = 0) -> list[bytes]:
    """Send ``row-0`` .. ``row-{n-1}`` (padded to ``body_bytes``), message i to queue
    i mod (number of queues); the bodies sent, in order."""
    bodies = [(b"row-%d " % i).ljust(body_bytes, b"x") for i in range(n)]
    with PullConsumer(group="fill", namesrv=ns) as consumer:
        queues = consumer.fetch_queues(topic)
    with Producer(group="fill", namesrv=ns) as producer:
        for q, mq in enumerate(queues):
            mine = bodies[q :: len(queues)]
            if mine:
                producer.send_batch([Message(topic=topic, body=b) for b in mine], queue=mq)
    return bodies
