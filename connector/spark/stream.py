"""Streaming read and write for ``format("pymq")``.

Offsets are JSON ``{"topic": {"broker-a": {"0": 42}}}``: for every queue the
next offset to read. ``latestOffset(start, limit)`` decides each
micro-batch's end on the driver; the rate options (``maxMessagesPerTrigger``,
``minMessagesPerTrigger`` with ``maxTriggerDelay``, ``maxBytesPerTrigger``) are
applied there, see ``limits.py``. ``partitions()`` cuts the queues' ranges into
pieces for ``minPartitions`` / ``maxRecordsPerPartition``; ``read()`` pulls exactly
``[start, end)`` of one piece, so a micro-batch re-run after a failure reads the
same rows. ``reportLatestOffset`` gives Spark the queues' ends, so a query's
progress shows ``latestOffset`` next to ``endOffset`` (the lag).
A queue that appears later (more queues, a new broker) starts at its
earliest offset, as Kafka's source does for new partitions. With
``consumerGroup``, ``commit(end)`` stores the offsets on the brokers so
``pymq admin consumer progress`` shows the query's lag.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NoReturn

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from connector.spark.limits import Admission, TriggerLimits, default_read_limit, split_limit
from connector.spark.options import ReadOptions, WriteOptions
from connector.spark.sink import SinkCommitMessage, abort_halves, commit_halves, write_batches
from connector.spark.source import QueueRange, read_range, split_ranges

__all__ = ["PyMQStreamReader", "PyMQStreamWriter", "RefusedStreamReader", "split_limit"]

log = logging.getLogger(__name__)
Offsets = dict[str, dict[str, dict[str, int]]]
BYTES_SAMPLE = 8  # messages pulled per queue to size a batch for maxBytesPerTrigger


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


class PyMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions, schema: pa.Schema) -> None:
        self.opts = opts
        self.schema = schema
        self._target: dict[tuple[str, str, int], int] | None = None
        self._latest: dict[tuple[str, str, int], int] = {}
        self._known: dict[tuple[str, str, int], tuple[int, int]] = {}
        self._topics: set[str] = set()  # the topics read that have a route (see _bounds)
        self._gone: set[str] = set()
        self._consumer: Any = None
        self._admission = Admission()

    def _client(self) -> Any:
        if self._consumer is None:
            from connector.client.consumer import PullConsumer  # noqa: PLC0415

            self._consumer = PullConsumer(
                group=self.opts.consumer_group or "pymq-spark-reader", namesrv=self.opts.namesrv,
                **self.opts.security.client_kwargs,
            )  # fmt: skip
        return self._consumer

    def _bounds(self) -> dict[tuple[str, str, int], tuple[int, int]]:
        """(min, max) offset of every queue read now (``subscribePattern`` is asked again);
        a broker that does not answer keeps the last bounds seen (the query waits for it
        instead of failing). Sets ``self._topics`` (those with a route) and ``self._gone``
        (topics named by ``topic``/``assign`` that have none)."""
        from connector.errors import PyMQError  # noqa: PLC0415
        from connector.spark.queues import QueueFinder  # noqa: PLC0415

        consumer = self._client()
        queues, self._topics, self._gone = QueueFinder(self.opts, consumer).queues()
        out = {}
        for mq in queues:
            key = (mq.topic, mq.broker_name, mq.queue_id)
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
        from connector.spark.queues import QueueFinder, refuse_unrouted  # noqa: PLC0415

        bounds = self._bounds()
        refuse_unrouted(self._gone)
        finder = QueueFinder(self.opts, self._client())
        finder.check_assigned(set(bounds))
        return _nest(finder.starts(bounds))

    def _lost(
        self, begin: dict[tuple[str, str, int], int], bounds: dict[Any, tuple[int, int]]
    ) -> tuple[set[str], dict[tuple[str, str, int], int]]:
        """Topics deleted since ``begin`` and queues whose offsets went backwards (a topic
        deleted and created again), with where each of those queues starts again.

        With failOnDataLoss (the default) either fails the query, as Kafka's source does;
        without, it is logged: a deleted topic is dropped from the offsets (read from its
        start should it come back), a queue that went backwards restarts at its min offset.
        """
        from connector.errors import InvalidOffsetError  # noqa: PLC0415

        deleted = sorted({k[0] for k in begin} - self._topics)
        back = {k: bounds[k] for k, v in begin.items() if k in bounds and bounds[k][1] < v}
        problems = [f"topic {t} was deleted" for t in deleted] + [
            f"queue {t}:{b}:{q} now ends at offset {hi}, before offset {begin[(t, b, q)]}"
            " the query already reached (its topic deleted and created again?)"
            for (t, b, q), (_, hi) in sorted(back.items())
        ]
        if problems and self.opts.fail_on_data_loss:
            raise InvalidOffsetError(
                "; ".join(problems) + ": some data may have been lost. failOnDataLoss=false"
                " logs this and goes on (a queue from its new start)"
            )
        for problem in problems:
            log.warning("%s: some data may have been lost (failOnDataLoss=false)", problem)
        return set(deleted), {k: lo for k, (lo, _) in back.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        return default_read_limit(self.opts)

    def _from_min(
        self, begin: dict[tuple[str, str, int], int], keys: Iterable[tuple[str, str, int]]
    ) -> dict[tuple[str, str, int], int]:
        """``begin`` plus every queue of ``keys`` it lacks (new since the last batch: more
        queues, a new broker, a topic the pattern now matches) at its min offset as last
        seen, where Kafka's source starts a new partition (0 when never seen: a replayed
        batch after a restart)."""
        return {k: self._known.get(k, (0, 0))[0] for k in keys if k not in begin} | begin

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {k: hi for k, (_, hi) in self._bounds().items()}

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        bounds = self._bounds()
        latest = {k: hi for k, (_, hi) in bounds.items()}
        if self._target is not None:  # AvailableNow: nothing past what existed at the start
            latest = {k: min(v, self._target.get(k, 0)) for k, v in latest.items()}
        begin = _flat(start)
        deleted, restart = self._lost(begin, bounds)
        begin = {k: v for k, v in begin.items() if k[0] not in deleted}
        # a queue missing from the route for a while (its broker down) keeps its offset:
        # dropping it would make it "new" again later, read from its start a second time
        latest = {k: max(latest.get(k, v), v) for k, v in begin.items()} | {
            k: v for k, v in latest.items() if k not in begin
        }
        begin = self._from_min(begin, latest)
        # a queue that went backwards ends this batch at its new start: partitions() reads
        # nothing of it now (end < start), the next batch reads on from there
        latest |= restart
        self._latest = latest
        end = self._admission.end(
            begin,
            latest,
            TriggerLimits.of(self.opts, limit),
            available_now=self._target is not None,
            avg_bytes=lambda ends: self._avg_bytes(begin, ends),
        )
        return _nest(end | restart)

    def _avg_bytes(
        self, begin: dict[tuple[str, str, int], int], ends: dict[tuple[str, str, int], int]
    ) -> dict[tuple[str, str, int], float]:
        """Average stored body size of the next messages of each queue with a backlog:
        one pull of up to ``BYTES_SAMPLE`` messages at its start offset (maxBytesPerTrigger).
        A queue whose pull fails or finds nothing is left out (``split_bytes`` then uses the
        others' mean)."""
        from connector.errors import PyMQError  # noqa: PLC0415
        from connector.protocol.message import MessageQueue  # noqa: PLC0415
        from connector.protocol.scan import index_records  # noqa: PLC0415

        consumer = self._client()
        out = {}
        for key, end in ends.items():
            offset = begin.get(key, 0)
            if end <= offset:
                continue
            try:
                want = min(BYTES_SAMPLE, end - offset)
                res = consumer.pull_records(
                    MessageQueue(*key), offset, want, tags=self.opts.tags, read_ahead=False
                )  # one page, no more
            except PyMQError as exc:
                log.warning("sampling message sizes of %s failed: %s", key, exc)
                continue
            index = index_records(res.records) if res.records else None
            if index is not None and len(index):
                out[key] = float(index.body_len.mean())
        return out

    def reportLatestOffset(self) -> Offsets | None:
        return _nest(self._latest) if self._latest else None

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin = self._from_min(_flat(start), _flat(end))
        ranges = [
            QueueRange(t, b, q, begin.get((t, b, q), 0), e)
            for (t, b, q), e in _flat(end).items()
            if e > begin.get((t, b, q), 0)
        ]
        ranges = split_ranges(ranges, self.opts.min_partitions, self.opts.max_records_per_partition)
        return ranges or [QueueRange("", "", 0, 0, 0)]

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
        if self.opts.exactly_once:
            sent = commit_halves(self.opts, messages)
        log.info("pymq sink: micro-batch %d sent %d messages", batchId, sent)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = sum(m.messages for m in messages if isinstance(m, SinkCommitMessage))
        if self.opts.exactly_once:
            abort_halves(self.opts, messages)
            log.warning("pymq sink: micro-batch %d aborted, %d messages rolled back", batchId, sent)
            return
        log.warning(
            "pymq sink: micro-batch %d aborted after %d messages (at-least-once)", batchId, sent
        )
