"""The data source and its batch reader: one partition per (broker, queue) offset range.

``read()`` pulls exactly ``[start, end)`` of its queue, so a re-run reads the
same rows. Offsets that retention already removed are a clear error with
``failOnDataLoss`` (the default) or skipped with a warning without it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from connector.errors import ConfigError, InvalidTopicError
from connector.spark.options import (
    READ_SCHEMA,
    ReadOptions,
    WriteOptions,
    check_read_schema,
    check_stream_read,
)
from connector.spark.queues import pick_offset

__all__ = ["PyMQBatchReader", "PyMQDataSource", "QueueRange", "pick_offset"]

log = logging.getLogger(__name__)
# a reader whose pull finds less than its range (a broker's slave, behind the node the
# range was planned on) waits this long for the rest, in long polls of REPLICA_POLL_MS
REPLICA_WAIT_S = 15.0
REPLICA_POLL_MS = 1000
REPLICA_RETRY_S = 0.1  # ... or every this often while its queue ends before the read's offset


@dataclass
class QueueRange(InputPartition):
    """Offsets ``[start, end)`` of one queue on one broker."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int


class PyMQDataSource(DataSource):
    """``spark.read.format("pymq")`` / ``df.write.format("pymq")``."""

    @classmethod
    def name(cls) -> str:
        return "pymq"

    def schema(self) -> StructType:
        # Spark asks for the schema when a read is loaded, batch or stream, and shows what
        # raises here as it is. An error raised in streamReader() reaches users as PySpark's
        # own UnboundLocalError (python_streaming_source_runner, 4.2 and 4.3), so the read
        # options are checked now. Writes never ask.
        ReadOptions.parse(self.options, stream=True)
        return READ_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        from connector.spark.columnar import arrow_schema  # noqa: PLC0415 - pyarrow: not at import

        opts = ReadOptions.parse(self.options, stream=False)
        check_read_schema(schema)  # one given by the user picks columns
        return PyMQBatchReader(opts, arrow_schema(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from connector.spark.columnar import arrow_schema  # noqa: PLC0415 - pyarrow: not at import
        from connector.spark.stream import PyMQStreamReader, RefusedStreamReader  # noqa: PLC0415

        try:
            opts = ReadOptions.parse(self.options, stream=True)
            check_stream_read(self.options)
            check_read_schema(schema)
        except (ConfigError, InvalidTopicError) as exc:
            # a schema given by the user (Spark then skips schema(), see there) or an option
            # only batch reads take: refused from the reader's first call
            return RefusedStreamReader(exc)
        return PyMQStreamReader(opts, arrow_schema(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from connector.spark.sink import check_write_schema  # noqa: PLC0415
        from connector.spark.stream import PyMQStreamWriter  # noqa: PLC0415

        opts = WriteOptions.parse(self.options)
        check_write_schema(opts, schema)
        return PyMQStreamWriter(opts)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from connector.spark.sink import PyMQBatchWriter  # noqa: PLC0415 - driver only

        return PyMQBatchWriter(WriteOptions.parse(self.options), schema)


def resolve_ranges(opts: ReadOptions) -> list[QueueRange]:
    """Every queue read with its start and end offset, decided now, on the driver."""
    from connector.client.consumer import PullConsumer  # noqa: PLC0415
    from connector.spark.queues import QueueFinder, refuse_unrouted  # noqa: PLC0415

    with PullConsumer(
        group=opts.consumer_group or "pymq-spark-reader", namesrv=opts.namesrv,
        **opts.security.client_kwargs,
    ) as consumer:  # fmt: skip
        finder = QueueFinder(opts, consumer)
        queues, _, gone = finder.queues()
        refuse_unrouted(gone)
        bounds = finder.bounds(queues)
        finder.check_assigned(set(bounds))
        starts, ends = finder.starts(bounds), finder.ends(bounds)
    ranges = [QueueRange(*k, starts[k], ends[k]) for k in sorted(bounds) if ends[k] > starts[k]]
    return split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)


def split_ranges(
    ranges: list[QueueRange], min_partitions: int, max_records: int | None = None
) -> list[QueueRange]:
    """Cut ranges into contiguous pieces that cover each exactly (a re-run reads the same rows).

    With fewer ranges than ``min_partitions``, each range gets pieces in proportion to
    its size, so there are at least ``min_partitions`` (as Kafka's offset range
    calculator); no piece holds more than ``max_records`` offsets. A range is cut
    into pieces of equal size (within one offset).
    """
    total = sum(r.end - r.start for r in ranges)
    out: list[QueueRange] = []
    for r in ranges:
        size = r.end - r.start
        parts = 1
        if len(ranges) < min_partitions and total > 0:
            parts = -(-size * min_partitions // total)  # ceil
        if max_records:
            parts = max(parts, -(-size // max_records))
        parts = max(1, min(parts, size))
        out += [
            QueueRange(
                r.topic,
                r.broker_name,
                r.queue_id,
                r.start + size * i // parts,
                r.start + size * (i + 1) // parts,
            )
            for i in range(parts)
        ]
    return sorted(out, key=lambda r: (r.topic, r.broker_name, r.queue_id, r.start))


def read_range(opts: ReadOptions, part: QueueRange, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """``[start, end)`` as Arrow batches, one per pull, in offset order (runs on an executor,
    with that process's cached ``PullConsumer``: see ``clients.py``)."""
    from connector.errors import (  # noqa: PLC0415
        InvalidOffsetError,
        RemotingError,
        RemotingTimeoutError,
    )
    from connector.protocol.hashing import parse_tags  # noqa: PLC0415
    from connector.protocol.message import MessageQueue  # noqa: PLC0415
    from connector.protocol.status import PullStatus  # noqa: PLC0415
    from connector.spark.clients import freeze_long_lived, pull_consumer  # noqa: PLC0415
    from connector.spark.columnar import records_to_batch  # noqa: PLC0415

    mq = MessageQueue(part.topic, part.broker_name, part.queue_id)
    wanted = parse_tags(opts.tags)
    offset = part.start
    wait_ms = 0  # a long poll, while a replica lacks what the plan saw (below)
    give_up = 0.0
    # the process's cached consumer: the next task (and micro-batch) reuses its connections
    with pull_consumer(
        namesrv=opts.namesrv, group=opts.consumer_group or "pymq-spark-reader",
        **opts.security.client_kwargs,
    ) as consumer:  # fmt: skip
        while offset < part.end:
            want = min(opts.pull_batch_size, part.end - offset)
            # the next page is asked for ahead only if it is a whole one of this range
            # (a shorter last page is another request: a page read ahead would be wasted)
            ahead = part.end - offset >= 2 * want and not wait_ms
            try:
                res = consumer.pull_records(
                    mq, offset, want, tags=opts.tags, read_ahead=ahead, wait_ms=wait_ms
                )
            except RemotingError as exc:
                if isinstance(exc, RemotingTimeoutError):
                    raise
                # a cached consumer's connection may have been closed by its broker just
                # after the last task used it (a restart; one idle for a second or more is
                # checked before use, see connector/client/connection.py): the call fails at
                # once, the route is refreshed, and a pull (it changes nothing) on a new
                # connection can succeed
                log.info("pulling %s at %d again after: %s", mq, offset, exc)
                res = consumer.pull_records(
                    mq, offset, want, tags=opts.tags, read_ahead=ahead, wait_ms=wait_ms
                )
            behind = res.status is PullStatus.NO_NEW_MSG or (
                res.status is PullStatus.OFFSET_ILLEGAL and offset > res.max_offset
            )
            if behind:
                # the range was planned on one node of the broker and this pull went to
                # another that has less yet: a slave read while its master is down, or one
                # catching up after its master's restart. Wait for it (long polls, woken as
                # it gets the records), at most REPLICA_WAIT_S, before calling them lost.
                now = time.monotonic()
                if not wait_ms:
                    give_up = now + REPLICA_WAIT_S
                if now < give_up:
                    wait_ms = REPLICA_POLL_MS
                    if res.status is PullStatus.OFFSET_ILLEGAL:
                        # past a queue's end a broker answers at once, holding nothing
                        time.sleep(REPLICA_RETRY_S)
                    continue
            wait_ms = 0
            if res.status is PullStatus.OFFSET_ILLEGAL:
                if res.min_offset > offset:  # retention removed what this range needs
                    lost = f"offsets {offset}..{res.min_offset - 1} of {mq} were deleted"
                    if opts.fail_on_data_loss:
                        raise InvalidOffsetError(f"{lost}; failOnDataLoss=false skips them")
                    log.warning("%s: skipped (failOnDataLoss=false)", lost)
                    offset = res.min_offset
                    continue
                raise InvalidOffsetError(f"cannot read {mq} at {offset}: {res}")
            if res.status is PullStatus.NO_NEW_MSG or res.next_begin_offset <= offset:
                raise InvalidOffsetError(f"{mq} ends at {res.max_offset}, before {part.end}")
            if res.records:
                batch = records_to_batch(
                    res.records,
                    schema,
                    topic=part.topic,
                    broker_name=part.broker_name,
                    queue_id=part.queue_id,
                    end=part.end,
                    tags=wanted,
                )
                # the kernels are loaded and the consumer cached: out of the collection
                # Spark runs after every task (see clients.py)
                freeze_long_lived()
                if batch.num_rows:
                    yield batch
            offset = res.next_begin_offset


class PyMQBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions, schema: pa.Schema) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        return resolve_ranges(self.opts) or [QueueRange("", "", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        if partition.end <= partition.start:
            return iter(())
        return read_range(self.opts, partition, self.schema)
