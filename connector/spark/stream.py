"""Streaming read and write for ``format("pymq")``.

Offsets are JSON ``{"topic": {"broker-a": {"0": 42}}}``: for every queue the
next offset to read. ``latestOffset(start, limit)`` decides each
micro-batch's end on the driver; with ``maxMessagesPerTrigger`` the limit is
split across queues by backlog. ``read()`` pulls exactly ``[start, end)``
of one queue, so a micro-batch re-run after a failure reads the same rows.
A queue that appears later (more queues, a new broker) starts at its
earliest offset, as Kafka's source does for new partitions. With
``consumerGroup``, ``commit(end)`` stores the offsets on the brokers so
``pymq admin consumer progress`` shows the query's lag.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from connector.spark.options import ReadOptions, WriteOptions
from connector.spark.sink import SinkCommitMessage, write_batches
from connector.spark.source import QueueRange, pick_offset, read_range

__all__ = ["PyMQStreamReader", "PyMQStreamWriter", "RefusedStreamReader", "split_limit"]

log = logging.getLogger(__name__)
Offsets = dict[str, dict[str, dict[str, int]]]


def _flat(offsets: Offsets) -> dict[tuple[str, str, int], int]:
    return {
        (t, b, int(q)): int(o)
        for t, bs in offsets.items()
        for b, qs in bs.items()
        for q, o in qs.items()
    }


def _nest(flat: dict[tuple[str, str, int], int]) -> Offsets:
    out: Offsets = {}
    for (t, b, q), o in sorted(flat.items()):
        out.setdefault(t, {}).setdefault(b, {})[str(q)] = o
    return out


def split_limit(start: dict[Any, int], latest: dict[Any, int], max_rows: int) -> dict[Any, int]:
    """End offsets reading at most ``max_rows`` in all, shared by backlog (largest first)."""
    backlog = {k: max(0, latest[k] - start.get(k, 0)) for k in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    share = {k: (v * max_rows) // total for k, v in backlog.items()}
    left = max_rows - sum(share.values())
    for k in sorted(backlog, key=lambda k: backlog[k] - share[k], reverse=True):
        if left <= 0:
            break
        if share[k] < backlog[k]:
            share[k] += 1
            left -= 1
    return {k: start.get(k, 0) + share[k] for k in latest}


class PyMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions, schema: pa.Schema) -> None:
        self.opts = opts
        self.schema = schema
        self._target: dict[tuple[str, str, int], int] | None = None
        self._latest: dict[tuple[str, str, int], int] = {}
        self._known: dict[tuple[str, str, int], tuple[int, int]] = {}
        self._consumer: Any = None

    def _client(self) -> Any:
        if self._consumer is None:
            from connector.client.consumer import PullConsumer  # noqa: PLC0415

            self._consumer = PullConsumer(
                group=self.opts.consumer_group or "pymq-spark-reader", namesrv=self.opts.namesrv
            )
        return self._consumer

    def _bounds(self) -> dict[tuple[str, str, int], tuple[int, int]]:
        """(min, max) offset of every queue; a broker that does not answer keeps the
        last bounds seen (the query waits for it instead of failing)."""
        from connector.errors import PyMQError  # noqa: PLC0415

        consumer = self._client()
        out = {}
        for topic in self.opts.topics:
            for mq in consumer.fetch_queues(topic):
                key = (topic, mq.broker_name, mq.queue_id)
                try:
                    out[key] = (consumer.min_offset(mq), consumer.max_offset(mq))
                except PyMQError as exc:
                    if key not in self._known:
                        raise
                    log.warning("%s: offsets unavailable (%s); using the last seen", mq, exc)
                    out[key] = self._known[key]
        self._known.update(out)
        return out

    def initialOffset(self) -> Offsets:
        bounds = self._bounds()
        start: dict[tuple[str, str, int], int] = {}
        for key, (lo, hi) in bounds.items():
            if self.opts.starting_timestamp is not None:
                from connector.protocol.message import MessageQueue  # noqa: PLC0415

                mq = MessageQueue(*key)
                start[key] = self._client().search_offset(mq, self.opts.starting_timestamp)
            else:
                start[key] = pick_offset(self.opts.starting, *key, lo, hi)
        return _nest(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_per_trigger:
            return ReadMaxRows(self.opts.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {k: hi for k, (_, hi) in self._bounds().items()}

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        latest = {k: hi for k, (_, hi) in self._bounds().items()}
        if self._target is not None:  # AvailableNow: nothing past what existed at the start
            latest = {k: min(v, self._target.get(k, 0)) for k, v in latest.items()}
        begin = _flat(start)
        # a queue missing from the route for a while (its broker down) keeps its offset:
        # dropping it would make it "new" again later, read from its start a second time
        latest = {k: max(latest.get(k, v), v) for k, v in begin.items()} | {
            k: v for k, v in latest.items() if k not in begin
        }
        self._latest = latest
        if isinstance(limit, ReadMaxRows):
            latest = split_limit(begin, latest, limit.max_rows)
        return _nest(latest)

    def reportLatestOffset(self) -> Offsets | None:
        return _nest(self._latest) if self._latest else None

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin = _flat(start)
        ranges = [
            QueueRange(t, b, q, begin.get((t, b, q), 0), e)
            for (t, b, q), e in _flat(end).items()
            if e > begin.get((t, b, q), 0)
        ]
        return ranges or [QueueRange(self.opts.topics[0], "", 0, 0, 0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, QueueRange)
        if partition.end <= partition.start:
            return iter(())
        return read_range(self.opts, partition, self.schema)

    def commit(self, end: Offsets) -> None:
        if not self.opts.consumer_group:
            return
        from connector.errors import PyMQError  # noqa: PLC0415
        from connector.protocol.message import MessageQueue  # noqa: PLC0415

        consumer = self._client()
        for (t, b, q), offset in _flat(end).items():
            try:
                consumer.commit_offset(MessageQueue(t, b, q), offset)
            except PyMQError as exc:  # lag reporting must never fail the query; it is logged
                log.warning("committing %s:%s:%d=%d failed: %s", t, b, q, offset, exc)

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.shutdown()
            self._consumer = None


class RefusedStreamReader(DataSourceStreamReader):
    """A stream read whose options were refused: every call raises that error.

    PySpark (4.2, 4.3) builds the reader inside ``try: ... finally: reader.stop()``, so an
    error raised by ``streamReader()`` itself reaches users as ``UnboundLocalError``; raised
    from the reader's first call, it reaches them as it is.
    """

    def __init__(self, error: Exception) -> None:
        self.error = error

    def _refuse(self) -> NoReturn:
        raise self.error

    def initialOffset(self) -> Offsets:
        self._refuse()

    def getDefaultReadLimit(self) -> ReadLimit:
        self._refuse()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        self._refuse()

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        self._refuse()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        self._refuse()

    def commit(self, end: Offsets) -> None:
        self._refuse()

    def stop(self) -> None:
        pass  # nothing was opened


class PyMQStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> SinkCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.info("pymq sink: micro-batch %d sent %d messages", batchId, sent)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        log.warning(
            "pymq sink: micro-batch %d aborted after %d messages (at-least-once)", batchId, sent
        )
