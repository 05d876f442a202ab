"""The batch sink: every task sends through ``connector.Producer`` (full send path).

Rows become messages: ``body`` (binary or string, required), optional
``topic`` (the ``topic`` option wins, as in Kafka's sink), ``tags``,
``keys`` (a space-separated string or an array), ``properties`` (map), ``queueId``,
``shardingKey``, ``delayLevel``. Plain rows go out in batches of
``batchSize`` per topic; rows that pin a queue, carry a sharding key or a
delay go one by one. Delivery is at-least-once: a task that fails and is
retried by Spark sends its rows again (the UNIQ_KEYs differ then).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from connector.errors import ConfigError
from connector.spark.options import WriteOptions

__all__ = ["PyMQBatchWriter", "SinkCommitMessage", "check_write_schema", "write_batches"]

log = logging.getLogger(__name__)
WRITE_COLUMNS = (
    "body",
    "topic",
    "tags",
    "keys",
    "properties",
    "queueId",
    "shardingKey",
    "delayLevel",
)


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    messages: int
    requests: int


def check_write_schema(opts: WriteOptions, schema: StructType) -> None:
    """The frame's columns, checked on the driver before any task runs."""
    names = set(schema.fieldNames())
    if "body" not in names:
        raise ConfigError("the DataFrame needs a body column (binary or string)")
    if opts.topic is None and "topic" not in names:
        raise ConfigError("give the topic option or a topic column")
    unknown = names - set(WRITE_COLUMNS)
    if unknown:
        raise ConfigError(f"columns not understood by the pymq sink: {sorted(unknown)}")


class PyMQBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_write_schema(opts, schema)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.info("pymq sink: %d messages from %d tasks", sent, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.warning("pymq sink aborted after %d messages were sent (at-least-once)", sent)


def write_batches(opts: WriteOptions, batches: Iterator[Any]) -> SinkCommitMessage:
    """Send every row of the Arrow batches (runs on an executor)."""
    from connector import Message, Producer  # noqa: PLC0415
    from connector.errors import MessageIllegalError  # noqa: PLC0415

    producer = Producer(
        group=opts.producer_group,
        namesrv=opts.namesrv,
        send_latency_fault_enable=opts.send_latency_fault_enable,
        retry_times_when_send_failed=opts.retry_times_when_send_failed,
        send_msg_timeout_ms=opts.send_msg_timeout_ms,
    )
    sent = requests = 0
    pending: dict[str, list[Any]] = {}
    spread = itertools.count()

    def flush(topic: str) -> None:
        nonlocal sent, requests
        msgs = pending.pop(topic, [])
        if msgs:
            producer.send_batch(msgs)
            sent += len(msgs)
            requests += 1

    with producer:
        for batch in batches:
            cols = {name: batch.column(name).to_pylist() for name in batch.schema.names}
            bodies = cols["body"]
            for i, raw_body in enumerate(bodies):
                if raw_body is None:
                    raise MessageIllegalError("a row has a null body")
                body = raw_body.encode() if isinstance(raw_body, str) else bytes(raw_body)
                topic = opts.topic or (cols.get("topic") or [None] * len(bodies))[i]
                if not topic:
                    raise MessageIllegalError("a row has no topic (and there is no topic option)")
                props = cols.get("properties", [None] * len(bodies))[i]
                keys = cols.get("keys", [None] * len(bodies))[i]
                delay = cols.get("delayLevel", [None] * len(bodies))[i] or 0
                msg = Message(
                    topic=topic,
                    body=body,
                    tags=cols.get("tags", [None] * len(bodies))[i],
                    keys=(keys.split() if isinstance(keys, str) else list(keys)) if keys else [],
                    properties=dict(props) if props else {},
                    delay_level=int(delay),
                )
                queue_id = cols.get("queueId", [None] * len(bodies))[i]
                sharding = cols.get("shardingKey", [None] * len(bodies))[i]
                if queue_id is None and sharding is None and not delay:
                    pending.setdefault(topic, []).append(msg)
                    if len(pending[topic]) >= opts.batch_size:
                        flush(topic)
                    continue
                queue = None
                if queue_id is not None:
                    candidates = [
                        mq
                        for mq in producer.publish_info(topic).message_queues
                        if mq.queue_id == int(queue_id)
                    ]
                    if not candidates:
                        raise MessageIllegalError(f"topic {topic} has no queue {queue_id}")
                    queue = candidates[next(spread) % len(candidates)]
                producer.send(msg, queue=queue, sharding_key=sharding)
                sent += 1
                requests += 1
        for topic in list(pending):
            flush(topic)
    return SinkCommitMessage(messages=sent, requests=requests)
