"""Helpers of the Spark tests: test data for a topic's queues, and Spark's error lines."""

from __future__ import annotations

import re

from connector import Message, Producer
from connector.client.consumer import PullConsumer

ERROR_LINE = re.compile(r"^[\w.]+(Error|Exception): ")


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


def fill(ns: str, topic: str, n: int) -> None:
    """Send ``row-0`` .. ``row-{n-1}`` (tag T) in batches of 500, queues chosen by the producer."""
    with Producer(group="fill", namesrv=ns) as producer:
        for k in range(0, n, 500):
            producer.send_batch(
                [
                    Message(topic=topic, body=b"row-%d" % i, tags="T")
                    for i in range(k, min(n, k + 500))
                ]
            )


def first_error_line(exc: BaseException) -> str:
    """The first line of Spark's message that names an exception (Spark's own header
    line, ``[PYTHON_DATA_SOURCE_ERROR] ...``, and traceback frames aside)."""
    lines = [x for x in str(exc).splitlines() if ERROR_LINE.match(x)]
    assert lines, str(exc)
    return lines[0]
