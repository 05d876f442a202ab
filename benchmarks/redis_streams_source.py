"""A Redis Streams data source for Spark, written to be fast: the peer of format("pymq").

``spark.dataSource.register(RedisStreamsDataSource)``, then
``format("redis-streams")`` with options ``host`` (127.0.0.1), ``port``
(6379), ``streams`` (a comma list of stream keys) and for reads ``count``
(XRANGE page size, 10,000), for writes ``pipeline`` (XADDs a round trip,
1,000).

* Read: one partition per stream; ``read()`` walks the stream with XRANGE
  pages of ``count`` entries and turns each page into one Arrow
  ``RecordBatch`` (``stream string, id string, body binary, timestamp
  timestamp``: the entry's id, its ``body`` field, the id's milliseconds).
  redis-py with hiredis parses the reply in C; the reply callback that
  would build a dict per entry is switched off, so a page is nested lists
  and the batch is built from two list comprehensions.
* Write: a ``DataSourceArrowWriter`` (Spark hands Arrow batches to Python,
  as to pymq's sink); each batch's ``body`` column is sent with
  pipelined ``XADD key * body <bytes>`` (``pipeline`` commands a round
  trip, no MULTI), the pipelines going to the streams in turn.

Redis runs without persistence (``--save "" --appendonly no``): it keeps
the entries in memory only, where pymq's brokers write a CommitLog and
ConsumeQueues to disk (asynchronous flush). That favours Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

__all__ = ["RedisStreamsDataSource"]

READ_SCHEMA = "stream string, id string, body binary, timestamp timestamp"


def _client(options: dict[str, str]) -> Any:
    import redis

    r = redis.Redis(host=options.get("host", "127.0.0.1"), port=int(options.get("port", 6379)))
    # raw replies (hiredis' nested lists): no dict and tuple per entry from redis-py
    r.set_response_callback("XRANGE", lambda reply, **_: reply)
    r.set_response_callback("XADD", lambda reply, **_: reply)
    return r


def _streams(options: dict[str, str]) -> list[str]:
    streams = [s.strip() for s in options.get("streams", "").split(",") if s.strip()]
    if not streams:
        raise ValueError("option streams is required (a comma list of stream keys)")
    return streams


@dataclass
class StreamPartition(InputPartition):
    stream: str


class RedisStreamsReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = dict(options)
        self.streams = _streams(self.options)
        self.count = int(self.options.get("count", 10_000))

    def partitions(self) -> list[InputPartition]:
        return [StreamPartition(s) for s in self.streams]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        assert isinstance(partition, StreamPartition)
        r = _client(self.options)
        key = partition.stream
        schema = pa.schema(
            [
                ("stream", pa.string()),
                ("id", pa.string()),
                ("body", pa.binary()),
                ("timestamp", pa.timestamp("us", tz="UTC")),
            ]
        )
        start = b"-"
        try:
            while True:
                page = r.execute_command("XRANGE", key, start, "+", "COUNT", self.count)
                if not page:
                    return
                ids = [e[0] for e in page]
                # fields are [b"body", value]: the value is the second
                bodies = pa.array([e[1][1] for e in page], pa.binary())
                id_col = pa.array(ids, pa.binary())
                ms = pc.cast(
                    pc.utf8_slice_codeunits(pc.cast(id_col, pa.string()), 0, 13),
                    pa.int64(),
                )  # 13 digits: ids of this century; a split on "-" would cost a string list
                n = len(page)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([key], pa.string()).take(pa.array([0] * n)),
                        id_col.cast(pa.string()),
                        bodies,
                        pc.multiply(ms, 1000).cast(pa.timestamp("us", tz="UTC")),
                    ],
                    schema=schema,
                )
                if n < self.count:
                    return
                # the next page starts after the last id: "(" makes XRANGE exclusive
                start = b"(" + ids[-1]
        finally:
            r.close()


class RedisStreamsWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = dict(options)
        self.streams = _streams(self.options)
        self.pipeline = int(self.options.get("pipeline", 1000))

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        import os

        r = _client(self.options)
        turn = os.getpid()  # tasks start on different streams
        try:
            for batch in iterator:
                bodies = batch.column("body").to_pylist()
                step = self.pipeline
                for i in range(0, len(bodies), step):
                    pipe = r.pipeline(transaction=False)
                    key = self.streams[turn % len(self.streams)]
                    turn += 1
                    for body in bodies[i : i + step]:
                        pipe.execute_command("XADD", key, "*", "body", body)
                    pipe.execute()
        finally:
            r.close()
        return WriterCommitMessage()


class RedisStreamsDataSource(DataSource):
    """``format("redis-streams")``: batch reads and writes of Redis streams."""

    @classmethod
    def name(cls) -> str:
        return "redis-streams"

    def schema(self) -> str:
        return READ_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return RedisStreamsReader(self.options)

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        return RedisStreamsWriter(self.options)
