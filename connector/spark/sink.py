"""The batch sink: every task sends through ``connector.Producer`` (full send path).

Rows become messages: ``body`` (binary or string, required), optional
``topic`` (the ``topic`` option wins, as in Kafka's sink), ``tags``,
``keys`` (a space-separated string or an array), ``properties`` (map), ``queueId``,
``shardingKey``, ``delayLevel``. Plain rows go out in batches of
``batchSize`` per topic; rows that pin a queue, carry a sharding key or a
delay go one by one. Frames of only ``body`` (and ``tags``, and one
``topic``) are encoded column-wise in compiled code (``encode.py``) and
sent with ``Producer.send_prepared_batch``: the same send path, no Python
object per row. Delivery is at-least-once: a task that fails and is
retried by Spark sends its rows again (the UNIQ_KEYs differ then).
"""

from __future__ import annotations

import itertools
import logging
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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


PLAIN_COLUMNS = frozenset({"body", "topic", "tags"})
MAX_IN_FLIGHT = 2  # plain batch requests of one task in flight at once


def plain_topic(opts: WriteOptions, batch: Any) -> str | None:
    """The topic of an Arrow batch the column-wise encoder can take, else None."""
    names = set(batch.schema.names)
    if not names <= PLAIN_COLUMNS or batch.num_rows == 0:
        return None
    if opts.topic:
        return opts.topic
    import pyarrow.compute as pc  # noqa: PLC0415

    topics = pc.unique(batch.column("topic")).to_pylist()
    return topics[0] if len(topics) == 1 and topics[0] else None


def plain_chunks(batch: Any, batch_size: int, max_bytes: int) -> Iterator[Any]:
    """Slices of at most ``batch_size`` rows whose encoding stays under ``max_bytes``."""
    import numpy as np  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    # upper bound of an entry: head + body + UNIQ_KEY + TAGS (+ their separators)
    sizes = pc.binary_length(batch.column("body")).to_numpy(zero_copy_only=False)
    sizes = np.nan_to_num(sizes.astype(np.float64)) + 22 + 42
    if "tags" in batch.schema.names:
        tag_len = pc.binary_length(batch.column("tags")).to_numpy(zero_copy_only=False)
        sizes = sizes + np.nan_to_num(tag_len.astype(np.float64)) + 6
    start, n = 0, batch.num_rows
    while start < n:
        total = np.cumsum(sizes[start : start + batch_size])
        count = max(1, int(np.searchsorted(total, max_bytes, side="right")))
        yield batch.slice(start, count)
        start += count


def write_batches(opts: WriteOptions, batches: Iterator[Any]) -> SinkCommitMessage:
    """Send every row of the Arrow batches (runs on an executor)."""
    from connector import Message, Producer  # noqa: PLC0415
    from connector.errors import MessageIllegalError  # noqa: PLC0415
    from connector.spark.encode import encode_columns  # noqa: PLC0415

    producer = Producer(
        group=opts.producer_group,
        namesrv=opts.namesrv,
        send_latency_fault_enable=opts.send_latency_fault_enable,
        retry_times_when_send_failed=opts.retry_times_when_send_failed,
        send_msg_timeout_ms=opts.send_msg_timeout_ms,
    )
    sent = requests = 0
    pending: dict[str, list[Any]] = {}
    pending_bytes: dict[str, int] = {}
    spread = itertools.count()

    def flush(topic: str) -> None:
        nonlocal sent, requests
        msgs = pending.pop(topic, [])
        pending_bytes.pop(topic, None)
        if msgs:
            producer.send_batch(msgs)
            sent += len(msgs)
            requests += 1

    # plain batches are sent from a thread while the next one is encoded: the task
    # does not sit idle while a broker stores a request
    sender = ThreadPoolExecutor(max_workers=MAX_IN_FLIGHT, thread_name_prefix="pymq-sink")
    in_flight: deque[Future[Any]] = deque()
    with producer, sender:
        for batch in batches:
            topic = plain_topic(opts, batch)
            if topic is not None:  # body (+ tags) only: encoded column-wise, no object per row
                flush(topic)
                for chunk in plain_chunks(batch, opts.batch_size, producer.max_message_size):
                    tags = chunk.column("tags") if "tags" in chunk.schema.names else None
                    prepared = encode_columns(
                        topic,
                        chunk.column("body"),
                        tags,
                        producer.new_msg_ids(chunk.num_rows),
                        producer.max_message_size,
                    )
                    while len(in_flight) >= MAX_IN_FLIGHT:
                        in_flight.popleft().result()  # a failed send fails the task here
                    in_flight.append(sender.submit(producer.send_prepared_batch, prepared))
                    sent += chunk.num_rows
                    requests += 1
                continue
            n = batch.num_rows
            names = batch.schema.names
            cols = {
                c: batch.column(c).to_pylist() if c in names else [None] * n for c in WRITE_COLUMNS
            }
            for body, row_topic, tags, keys, props, queue_id, sharding, delay in zip(
                *(cols[c] for c in WRITE_COLUMNS), strict=True
            ):
                if body is None:
                    raise MessageIllegalError("a row has a null body")
                topic = opts.topic or row_topic
                if not topic:
                    raise MessageIllegalError("a row has no topic (and there is no topic option)")
                msg = Message(
                    topic=topic,
                    body=body.encode() if isinstance(body, str) else body,
                    tags=tags,
                    keys=(keys.split() if isinstance(keys, str) else list(keys)) if keys else [],
                    properties=dict(props) if props else {},
                    delay_level=int(delay or 0),
                )
                if queue_id is None and sharding is None and not delay:
                    # an upper bound of the entry: head, body, properties, UNIQ_KEY
                    chars = sum(len(k) + len(v) + 2 for k, v in msg.properties.items())
                    chars += len(msg.tags or "") + sum(len(k) + 1 for k in msg.keys) + 16
                    size = 96 + len(msg.body) + 4 * chars  # UTF-8: at most 4 bytes a char
                    if pending_bytes.get(topic, 0) + size > producer.max_message_size:
                        flush(topic)  # a batch request stays under the size limit
                    pending.setdefault(topic, []).append(msg)
                    pending_bytes[topic] = pending_bytes.get(topic, 0) + size
                    if len(pending[topic]) >= opts.batch_size:
                        flush(topic)
                    continue
                mq = None
                if queue_id is not None:
                    candidates = [
                        q
                        for q in producer.publish_info(topic).message_queues
                        if q.queue_id == int(queue_id)
                    ]
                    if not candidates:
                        raise MessageIllegalError(f"topic {topic} has no queue {queue_id}")
                    mq = candidates[next(spread) % len(candidates)]
                producer.send(msg, queue=mq, sharding_key=sharding)
                sent += 1
                requests += 1
        for topic in list(pending):
            flush(topic)
        while in_flight:
            in_flight.popleft().result()
    return SinkCommitMessage(messages=sent, requests=requests)
