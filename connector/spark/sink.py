"""The batch sink: every task sends through ``connector.Producer`` (full send path).

Rows become messages: ``body`` (binary or string, required), optional
``topic`` (the ``topic`` option wins, as in Kafka's sink), ``tags``,
``keys`` (a space-separated string or an array), ``properties`` (map),
``queueId``, ``shardingKey``, ``delayLevel``, ``bornTimestamp`` (a timestamp
or ms; RocketMQ's request carries one born time, so a request holds a run of
rows of one born time). Rows go out in batch requests of at most
``batchSize`` rows, one queue each:

- rows of a sharding key to the queue ``Producer.send(sharding_key=)``
  would pick (see ``routing.py``), in the order of the task's rows. Tasks
  run side by side: to order a key's rows across the whole frame, put them
  in one task first, e.g. ``repartition("k").sortWithinPartitions("k", "seq")``;
- rows of a ``queueId`` to that queue;
- other rows where the producer's queue selection sends them;
- rows with a delay level one by one (a batch cannot carry one).

Frames of ``body``, ``tags``, one ``topic``, ``shardingKey`` and
``queueId`` are encoded column-wise in compiled code (``encode.py``) and
sent with ``Producer.send_prepared_batch``: the same send path, no Python
object per row. Delivery is at-least-once: a task that fails and is
retried by Spark sends its rows again (the UNIQ_KEYs differ then). With
``deliveryGuarantee=exactly-once`` every request is a transactional batch
half that Spark's commit makes visible (``exactly_once.py``); rows with a
``delayLevel`` cannot be sent so.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    IntegerType,
    LongType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from connector.errors import ConfigError, MessageIllegalError
from connector.protocol.message import Message, MessageQueue
from connector.spark import exactly_once
from connector.spark.exactly_once import Half, half_of
from connector.spark.options import WriteOptions
from connector.spark.routing import ANY_QUEUE, QueueRouter, groups

if TYPE_CHECKING:
    from connector.client.producer import Producer

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
    "bornTimestamp",
)


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    messages: int
    requests: int
    # exactly-once: the task's key and halves (broker, half queue offset, CommitLog
    # offset, messages), committed by the driver
    writer: str = ""
    batch: int = -1
    halves: list[Half] = field(default_factory=list)


def commit_halves(opts: WriteOptions, messages: list[WriterCommitMessage | None]) -> int:
    """Exactly-once: the driver's commit of the tasks' halves; messages made visible."""
    done = [m for m in messages if isinstance(m, SinkCommitMessage) and m.halves]
    if not done:
        return 0
    keys = {(m.writer, m.batch) for m in done}
    if len(keys) != 1:
        raise ConfigError(f"exactly-once: the tasks of one batch wrote under {sorted(keys)}")
    ((writer, batch),) = keys
    return exactly_once.commit(opts, writer, batch, [h for m in done for h in m.halves])


def abort_halves(opts: WriteOptions, messages: list[WriterCommitMessage | None]) -> None:
    halves = [h for m in messages if isinstance(m, SinkCommitMessage) for h in m.halves]
    exactly_once.abort(opts, halves)


def check_write_schema(opts: WriteOptions, schema: StructType) -> None:
    """The frame's columns, checked on the driver before any task runs."""
    names = set(schema.fieldNames())
    if "body" not in names:
        raise ConfigError("the DataFrame needs a body column (binary or string)")
    if opts.topic is None and "topic" not in names:
        raise ConfigError("give the topic option or a topic column")
    if "bornTimestamp" in names:
        kind = schema["bornTimestamp"].dataType
        if not isinstance(kind, (TimestampType, TimestampNTZType, LongType, IntegerType)):
            raise ConfigError(
                f"column bornTimestamp must be a timestamp or ms since the epoch (long), "
                f"not {kind.simpleString()}"
            )
    unknown = names - set(WRITE_COLUMNS)
    if unknown:
        raise ConfigError(f"columns not understood by the pymq sink: {sorted(unknown)}")
    if opts.exactly_once and "delayLevel" in names:
        raise ConfigError(
            "deliveryGuarantee=exactly-once cannot send delayed messages (column delayLevel)"
        )


class PyMQBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_write_schema(opts, schema)
        self.opts = opts
        self.write_id = exactly_once.new_write_id() if opts.exactly_once else None

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_batches(self.opts, iterator, write_id=self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        if self.opts.exactly_once:
            commit_halves(self.opts, messages)
        log.info("pymq sink: %d messages from %d tasks", sent, len(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        if self.opts.exactly_once:
            abort_halves(self.opts, messages)
            log.warning("pymq sink aborted: %d messages rolled back", sent)
            return
        log.warning("pymq sink aborted after %d messages were sent (at-least-once)", sent)


# columns the column-wise encoder takes (topic: one per Arrow batch; the last two only
# choose the queue)
COLUMNAR = frozenset({"body", "topic", "tags", "shardingKey", "queueId"})
MAX_IN_FLIGHT = 2  # batch requests of one task in flight at once


def batch_topic(opts: WriteOptions, batch: Any) -> str | None:
    """The topic of every row of an Arrow batch, None when the rows name several."""
    if opts.topic:
        return opts.topic
    import pyarrow.compute as pc  # noqa: PLC0415

    topics = pc.unique(batch.column("topic")).to_pylist()
    return topics[0] if len(topics) == 1 and topics[0] else None


def entry_sizes(batch: Any) -> Any:
    """An upper bound of each row's batch entry in bytes (a numpy array)."""
    import numpy as np  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    # head + body + UNIQ_KEY + TAGS (+ their separators)
    sizes = pc.binary_length(batch.column("body")).to_numpy(zero_copy_only=False)
    sizes = np.nan_to_num(sizes.astype(np.float64)) + 22 + 42
    if "tags" in batch.schema.names:
        tag_len = pc.binary_length(batch.column("tags")).to_numpy(zero_copy_only=False)
        sizes = sizes + np.nan_to_num(tag_len.astype(np.float64)) + 6
    return sizes


def born_millis(column: Any) -> list[int | None]:
    """A ``bornTimestamp`` column (timestamp of any unit, or ms as an integer) as ms."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.compute as pc  # noqa: PLC0415

    raw = pc.cast(column, pa.int64())  # a timestamp: in its unit since the epoch (UTC)
    unit = column.type.unit if pa.types.is_timestamp(column.type) else "ms"
    if unit == "s":
        raw = pc.multiply(raw, 1000)
    elif unit != "ms":
        raw = pc.divide(raw, {"us": 1000, "ns": 1_000_000}[unit])  # integer division
    values: list[int | None] = raw.to_pylist()
    return values


def chunk_bounds(sizes: Any, batch_size: int, max_bytes: int) -> Iterator[tuple[int, int]]:
    """``(start, count)`` of runs of at most ``batch_size`` rows under ``max_bytes``."""
    import numpy as np  # noqa: PLC0415

    start, n = 0, len(sizes)
    while start < n:
        total = np.cumsum(sizes[start : start + batch_size])
        count = max(1, int(np.searchsorted(total, max_bytes, side="right")))
        yield start, count
        start += count


class _Sends:
    """A task's batch requests on a small pool, so it encodes the next while a broker
    stores one: at most ``limit`` in flight, and one at a time per queue, so rows of a
    sharding key stay in order (a request and its retries end before the next to its
    queue starts). A failed request fails the task when it is next waited for."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.pool = ThreadPoolExecutor(max_workers=limit, thread_name_prefix="pymq-sink")
        self.in_flight: deque[Future[Any]] = deque()
        self.last: dict[MessageQueue, Future[Any]] = {}

    def submit(self, queue: MessageQueue | None, send: Callable[[], Any]) -> None:
        if queue is not None and (before := self.last.get(queue)) is not None:
            before.result()
        while len(self.in_flight) >= self.limit:
            self.in_flight.popleft().result()
        future = self.pool.submit(send)
        self.in_flight.append(future)
        if queue is not None:
            self.last[queue] = future

    def drain(self) -> None:
        while self.in_flight:
            self.in_flight.popleft().result()
        self.last.clear()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


class _TaskWriter:
    """Rows of one task -> batch requests through one ``Producer``.

    Rows the column-wise encoder takes go out as they come, a request per
    (queue, chunk of ``batchSize``); other rows become ``Message`` objects and
    wait in a batch per (topic, queue) until it is full, except rows with a
    delay level (batches cannot carry one), which are sent alone.
    """

    def __init__(
        self,
        opts: WriteOptions,
        producer: Producer,
        sends: _Sends,
        half: tuple[str, int] | None = None,
    ) -> None:
        self.opts = opts
        self.producer = producer
        self.sends = sends
        self.half = half  # exactly-once: every request a batch half of this key
        self.halves: list[Half] = []  # list.append: safe from the pool's threads
        self.router = QueueRouter()
        self.sent = self.requests = 0
        self.pending: dict[tuple[str, MessageQueue | None], list[Message]] = {}
        self.pending_bytes: dict[tuple[str, MessageQueue | None], int] = {}
        self.pending_born: dict[tuple[str, MessageQueue | None], int | None] = {}

    def write(self, batch: Any) -> None:
        if batch.num_rows == 0:
            return
        topic = batch_topic(self.opts, batch)
        if topic is not None and set(batch.schema.names) <= COLUMNAR:
            self.flush_all()  # rows held back go first: a sharding key's order
            self.columns(topic, batch)
        else:
            self.rows(batch)

    def columns(self, topic: str, batch: Any) -> None:
        """Body (and tags) encoded column-wise: no Python object per row."""
        import pyarrow as pa  # noqa: PLC0415

        from connector.spark.encode import encode_columns  # noqa: PLC0415

        producer = self.producer
        queues = producer.publish_info(topic).message_queues
        slots = self.router.slots(batch, queues)
        if (slots == ANY_QUEUE).all():
            ordered, ranges = batch, iter([(ANY_QUEUE, 0, batch.num_rows)])
        else:  # rows grouped by queue, each group in row order
            order, ranges = groups(slots)
            ordered = batch.take(pa.array(order))
        sizes = entry_sizes(ordered)
        for slot, a, b in ranges:
            queue = None if slot == ANY_QUEUE else queues[slot]
            limit = producer.max_message_size
            for start, count in chunk_bounds(sizes[a:b], self.opts.batch_size, limit):
                chunk = ordered.slice(a + start, count)
                tags = chunk.column("tags") if "tags" in chunk.schema.names else None
                prepared = encode_columns(
                    topic,
                    chunk.column("body"),
                    tags,
                    producer.new_msg_ids(chunk.num_rows),
                    producer.max_message_size,
                )
                send = partial(producer.send_prepared_batch, prepared, queue=queue, half=self.half)
                self.sends.submit(queue, self._noted(send, chunk.num_rows))
                self.sent += chunk.num_rows
                self.requests += 1

    def rows(self, batch: Any) -> None:
        """Any columns, a ``Message`` per row."""
        n = batch.num_rows
        names = batch.schema.names
        cols = {c: batch.column(c).to_pylist() if c in names else [None] * n for c in WRITE_COLUMNS}
        if "bornTimestamp" in names:
            cols["bornTimestamp"] = born_millis(batch.column("bornTimestamp"))
        for body, row_topic, tags, keys, props, queue_id, sharding, delay, born in zip(
            *(cols[c] for c in WRITE_COLUMNS), strict=True
        ):
            if body is None:
                raise MessageIllegalError("a row has a null body")
            topic = self.opts.topic or row_topic
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
            queues = self.producer.publish_info(topic).message_queues
            queue = self.router.row_queue(queues, queue_id, sharding)
            if msg.delay_level and self.half is not None:
                raise MessageIllegalError("exactly-once cannot send a delayed message")
            if msg.delay_level:  # a batch cannot carry a delay level: alone, in order
                self.flush((topic, queue))
                send = partial(self.producer.send, msg, queue=queue, born_timestamp=born)
                self.sends.submit(queue, send)
                self.sent += 1
                self.requests += 1
                continue
            key = (topic, queue)
            if key in self.pending and self.pending_born.get(key) != born:
                self.flush(key)  # a request carries one born time: a new one starts a batch
            self.pending_born[key] = born
            # an upper bound of the entry: head, body, properties, UNIQ_KEY
            chars = sum(len(k) + len(v) + 2 for k, v in msg.properties.items())
            chars += len(msg.tags or "") + sum(len(k) + 1 for k in msg.keys) + 16
            size = 96 + len(msg.body) + 4 * chars  # UTF-8: at most 4 bytes a char
            if self.pending_bytes.get(key, 0) + size > self.producer.max_message_size:
                self.flush(key)  # a batch request stays under the size limit
            self.pending.setdefault(key, []).append(msg)
            self.pending_bytes[key] = self.pending_bytes.get(key, 0) + size
            if len(self.pending[key]) >= self.opts.batch_size:
                self.flush(key)

    def flush(self, key: tuple[str, MessageQueue | None]) -> None:
        msgs = self.pending.pop(key, [])
        self.pending_bytes.pop(key, None)
        born = self.pending_born.pop(key, None)
        if msgs:
            queue = key[1]
            send = partial(
                self.producer.send_batch, msgs, queue=queue, born_timestamp=born, half=self.half
            )
            self.sends.submit(queue, self._noted(send, len(msgs)))
            self.sent += len(msgs)
            self.requests += 1

    def flush_all(self) -> None:
        for key in list(self.pending):
            self.flush(key)

    def _noted(self, send: Callable[[], Any], messages: int) -> Callable[[], Any]:
        """``send``, whose half (exactly-once) goes into the task's list once stored."""
        if self.half is None:
            return send

        def noted() -> Any:
            result = send()
            self.halves.append(half_of(result, messages))
            return result

        return noted


def write_batches(
    opts: WriteOptions, batches: Iterator[Any], *, write_id: str | None = None
) -> SinkCommitMessage:
    """Send every row of the Arrow batches (runs on an executor).

    The task borrows its executor process's ``Producer`` for these settings
    (``connector.spark.clients``): the tasks of a write, and of every
    micro-batch of a stream, share one connection per broker and the routes
    it already knows instead of starting a producer each.
    """
    from connector.spark.clients import producer as shared_producer  # noqa: PLC0415

    with shared_producer(
        namesrv=opts.namesrv,
        group=opts.producer_group,
        send_latency_fault_enable=opts.send_latency_fault_enable,
        retry_times_when_send_failed=opts.retry_times_when_send_failed,
        send_msg_timeout_ms=opts.send_msg_timeout_ms,
        **opts.security.client_kwargs,
    ) as producer:
        sends = _Sends(MAX_IN_FLIGHT)
        key = exactly_once.task_key(write_id) if opts.exactly_once else None
        try:
            task = _TaskWriter(opts, producer, sends, key)
            for batch in batches:
                task.write(batch)
            task.flush_all()
            sends.drain()  # every send answered before the producer serves another task
        finally:
            sends.close()
    if key is None:
        return SinkCommitMessage(messages=task.sent, requests=task.requests)
    return SinkCommitMessage(task.sent, task.requests, key[0], key[1], task.halves)
