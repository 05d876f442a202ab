"""Spark connector benchmark: format("pymq") vs the ceilings of Spark's Python data source path.

    python benchmarks/spark_bench.py [--runs 3] [--rows 1000000] [--quick] [--json-out FILE]

A local SparkSession (local[2]) and a local pymq cluster (1 NameServer, 2
ASYNC_FLUSH brokers, processes) on this machine; 100-byte bodies; batch
jobs, each timed from the action's start to its end. In one run:

* sink: ``spark.range`` -> 100-byte ``body`` -> ``write.format("pymq")``
  (every task sends through ``connector.Producer``, ``batchSize`` rows per
  request; once more with a ``shardingKey`` column of 1,000 keys:
  a request per queue and Arrow batch), against the same frame into a no-op Python Arrow writer (a
  ``DataSourceArrowWriter`` that drops its batches): the ceiling of Spark's
  Python write path;
* source: ``read.format("pymq")`` of a topic holding ``--rows`` messages ->
  the JVM ``noop`` sink, against two in-memory Python Arrow sources of the
  same schema in as many partitions, the ceilings of Spark's Python read
  path: one repeating a synthetic 1,000-row batch, and one replaying pymq's
  own batches (the reader's output for every partition, written once to
  Arrow IPC files before the runs and memory-mapped by the workers: the same
  rows, columns and batch sizes as the pymq job, without the broker, the
  network or the decoding). The source's target is against the replay, the
  ceiling of the same rows;
* stream sink: ``readStream`` of an in-memory Python Arrow stream source
  (``body`` only, 10,000-row batches, 2 partitions) ->
  ``writeStream.format("pymq")``, ``trigger(availableNow=True)``, against the
  same stream into a no-op Python Arrow stream writer: the setup of the
  issue's probe of the streaming ceiling (~400,000 rows/s here). Rows / s
  of the micro-batches' ``triggerExecution`` time (query start-up excluded,
  the same for both);
* the peer: the same sink and source jobs through a Redis Streams Python
  data source written the fast way (``redis_streams_source.py``: Arrow
  batches in, pipelined XADD with hiredis; XRANGE pages into Arrow batches,
  one partition per stream), against one redis-server (no persistence)
  holding as many streams as the pymq topic has queues. Targets: pymq's
  sink >= 2x Redis', pymq's source >= 3x Redis'. The Redis source's schema
  is narrower (4 columns, no map), so its ceiling is measured too: the
  in-memory source with that schema; and pymq's source once more reading
  only the same four columns (``topic, msgId, body, storeTimestamp``, named
  in a schema given to the read): like for like with the Redis source;
* CPU per row: for each sink and source job, CPU seconds (utime + stime
  from ``/proc/<pid>/stat``, before and after) of Spark's JVM (the py4j
  gateway's process), its Python workers (every process under the JVM,
  reaped children included), the servers (the two brokers, or
  redis-server) and this driver, divided by the rows, in microseconds;
* for scale: ``spark.range -> noop`` (JVM only, no Python).

Before every measured job the JVM runs a full collection (``System.gc()``
through py4j), so that each job starts from the same heap: the previous
job's garbage (the 10M-row ``range`` job ends each run) is collected outside
the clock and outside the next job's CPU figures.

Each figure is the median of ``--runs`` runs (min and max shown); the
ratios are the medians divided.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers: this interpreter
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

import pyarrow as pa  # noqa: E402
import redis_streams_source  # noqa: E402
from peers_bench import PeerServer, free_port, server_binary  # noqa: E402
from pyspark import cloudpickle  # noqa: E402
from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from redis_streams_source import RedisStreamsDataSource  # noqa: E402

from connector import Admin  # noqa: E402
from connector.local import LocalCluster  # noqa: E402
from connector.spark.columnar import arrow_schema  # noqa: E402
from connector.spark.options import READ_SCHEMA, ReadOptions  # noqa: E402
from connector.spark.source import PyMQBatchReader  # noqa: E402
from connector.spark_jar import jar_path  # noqa: E402

# Spark's Python workers do not have benchmarks/ on their path: the Redis source's
# classes travel by value, as the ones defined here do
cloudpickle.register_pickle_by_value(redis_streams_source)

# pymq's columns for what the Redis Streams source reads: stream, id, body, timestamp
PYMQ_REDIS_COLUMNS = "topic string, msgId string, body binary, storeTimestamp timestamp"
BODY_SQL = "cast(concat(lpad(cast(id as string), 12, '0'), repeat('x', 88)) as binary) as body"


class NoopArrowWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _batch in iterator:
            pass
        return WriterCommitMessage()


class NoopArrowSink(DataSource):
    """The write ceiling: Spark hands Arrow batches to Python, which drops them."""

    @classmethod
    def name(cls) -> str:
        return "bench-noop-arrow"

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        return NoopArrowWriter()


class Slice(InputPartition):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class MemoryArrowReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, *, redis_schema: bool = False) -> None:
        self.rows, self.parts = rows, partitions
        self.redis_schema = redis_schema

    def partitions(self) -> list[InputPartition]:
        share = -(-self.rows // self.parts)
        return [Slice(min(share, self.rows - i * share)) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, Slice)
        size = 1000
        if self.redis_schema:
            yield from self._redis_rows(partition.rows, size)
            return
        schema = arrow_schema(READ_SCHEMA)
        props = schema.field("properties").type
        now = int(time.time() * 1e6)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(["SourceBench"] * size),
                pa.array(["broker-a"] * size),
                pa.array([0] * size, pa.int32()),
                pa.array(range(size), pa.int64()),
                pa.array([f"{i:032X}" for i in range(size)]),
                pa.array(["T"] * size),
                pa.array([None] * size, pa.string()),
                pa.array([b"%012d" % i + b"x" * 88 for i in range(size)]),
                pa.array([[("UNIQ_KEY", f"{i:032X}"), ("TAGS", "T")] for i in range(size)], props),
                pa.array([now] * size, pa.timestamp("us", tz="UTC")),
                pa.array([now] * size, pa.timestamp("us", tz="UTC")),
            ],
            schema=schema,
        )  # fmt: skip
        left = partition.rows
        while left > 0:
            yield batch if left >= size else batch.slice(0, left)
            left -= size

    def _redis_rows(self, rows: int, size: int) -> Iterator[pa.RecordBatch]:
        """Batches of the Redis Streams source's schema."""
        now = int(time.time() * 1e6)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(["SourceBench-0"] * size),
                pa.array([f"{now // 1000}-{i}" for i in range(size)]),
                pa.array([b"%012d" % i + b"x" * 88 for i in range(size)]),
                pa.array([now] * size, pa.timestamp("us", tz="UTC")),
            ],
            names=["stream", "id", "body", "timestamp"],
        )
        while rows > 0:
            yield batch if rows >= size else batch.slice(0, rows)
            rows -= size


class MemoryArrowSource(DataSource):
    """The read ceiling: a Python source yielding ready Arrow batches of the read schema
    (or, with option ``schema`` ``redis``, of the Redis Streams source's)."""

    @classmethod
    def name(cls) -> str:
        return "bench-memory-arrow"

    def schema(self) -> Any:
        if self.options.get("schema") == "redis":
            return redis_streams_source.READ_SCHEMA
        return READ_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return MemoryArrowReader(
            int(self.options["rows"]),
            int(self.options["partitions"]),
            redis_schema=self.options.get("schema") == "redis",
        )


class ReplayFile(InputPartition):
    def __init__(self, path: str) -> None:
        self.path = path


class ReplayArrowReader(DataSourceReader):
    def __init__(self, directory: str) -> None:
        self.directory = directory

    def partitions(self) -> list[InputPartition]:
        return [ReplayFile(str(p)) for p in sorted(Path(self.directory).glob("*.arrow"))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ReplayFile)
        with pa.memory_map(partition.path) as source:
            stored = pa.ipc.open_file(source)
            for i in range(stored.num_record_batches):
                yield stored.get_batch(i)


class ReplayArrowSource(DataSource):
    """The read ceiling of pymq's own rows: the batches ``read.format("pymq")`` makes,
    replayed from memory-mapped Arrow IPC files (option ``dir``, one file a partition)."""

    @classmethod
    def name(cls) -> str:
        return "bench-replay-arrow"

    def schema(self) -> Any:
        return READ_SCHEMA

    def reader(self, schema: Any) -> DataSourceReader:
        return ReplayArrowReader(self.options["dir"])


def record_pymq_batches(namesrv: str, topic: str, directory: Path) -> int:
    """Run pymq's batch reader here, in the driver, over every partition of ``topic`` and
    keep its batches as they are, a partition an Arrow IPC file; the rows written."""
    reader = PyMQBatchReader(
        ReadOptions.parse({"namesrv": namesrv, "topic": topic}, stream=False),
        arrow_schema(READ_SCHEMA),
    )
    rows = 0
    for i, part in enumerate(reader.partitions()):
        batches = list(reader.read(part))
        if not batches:
            continue
        path = directory / f"{i:04d}.arrow"
        with pa.OSFile(str(path), "wb") as out, pa.ipc.new_file(out, batches[0].schema) as w:
            for batch in batches:
                w.write_batch(batch)
                rows += batch.num_rows
    return rows


class RowRange(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end


class MemoryStreamReader(DataSourceStreamReader):
    """``rows`` rows of 100-byte bodies in 10,000-row Arrow batches (Spark's own
    ``arrow.maxRecordsPerBatch``), offsets ``{"row": n}``."""

    def __init__(self, rows: int, partitions: int) -> None:
        self.rows, self.parts = rows, partitions

    def initialOffset(self) -> dict[str, int]:
        return {"row": 0}

    def latestOffset(self) -> dict[str, int]:
        return {"row": self.rows}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        a, b = start["row"], end["row"]
        share = -(-(b - a) // self.parts)
        return [RowRange(i, min(b, i + share)) for i in range(a, b, share)] if b > a else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RowRange)
        size = 10_000
        bodies = pa.array([b"%012d" % i + b"x" * 88 for i in range(size)], pa.binary())
        batch = pa.RecordBatch.from_arrays([bodies], names=["body"])
        left = partition.end - partition.start
        while left > 0:
            yield batch if left >= size else batch.slice(0, left)
            left -= size

    def commit(self, end: dict[str, int]) -> None:
        pass


class MemoryStreamSource(DataSource):
    """The input of the stream sink runs: a Python Arrow stream source."""

    @classmethod
    def name(cls) -> str:
        return "bench-memory-stream"

    def schema(self) -> Any:
        return "body binary"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return MemoryStreamReader(int(self.options["rows"]), 2)


class NoopStreamWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _batch in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


class NoopStreamSink(DataSource):
    """The stream write ceiling: Spark hands Arrow batches to Python, which drops them."""

    @classmethod
    def name(cls) -> str:
        return "bench-noop-stream-arrow"

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamArrowWriter:
        return NoopStreamWriter()


TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:  # gone meanwhile
        return None
    return raw.rsplit(")", 1)[1].split()  # the fields after "(comm)", from state on


def cpu_s(pid: int, *, children: bool) -> float:
    """CPU seconds of ``pid`` (utime + stime), with its reaped children's if asked."""
    f = _stat(pid)
    if f is None:
        return 0.0
    ticks = int(f[11]) + int(f[12])  # fields 14 and 15 of proc(5)
    if children:
        ticks += int(f[13]) + int(f[14])  # cutime, cstime
    return ticks * TICK_S


def process_table() -> dict[int, list[str]]:
    """``/proc/<pid>/stat`` fields (from state on) of every live process."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (f := _stat(int(entry))) is not None:
            table[int(entry)] = f
    return table


def descendants(root: int, table: dict[int, list[str]] | None = None) -> list[int]:
    """Every live process under ``root``."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, f in table.items():
        children.setdefault(int(f[1]), []).append(pid)
    out, frontier = [], [root]
    while frontier:
        kids = children.get(frontier.pop(), [])
        out += kids
        frontier += kids
    return out


def _ticks(f: list[str], *, own: bool = True, reaped: bool = True) -> int:
    """utime + stime (fields 14, 15 of proc(5)) and cutime + cstime (16, 17)."""
    return (int(f[11]) + int(f[12]) if own else 0) + (int(f[13]) + int(f[14]) if reaped else 0)


Tree = dict[int, tuple[int, int]]  # pid -> (parent pid, CPU ticks with reaped children)


def python_tree(jvm_pid: int) -> Tree:
    """The processes under Spark's JVM, and the JVM itself with its reaped children only."""
    table = process_table()
    tree = {p: (int(table[p][1]), _ticks(table[p])) for p in descendants(jvm_pid, table)}
    if jvm_pid in table:
        tree[jvm_pid] = (0, _ticks(table[jvm_pid], own=False))
    return tree


def tree_cpu_s(before: Tree, after: Tree) -> float:
    """CPU seconds the processes of a tree spent between two looks at it.

    A process that exits is reaped by its parent (Spark's Python daemon or the
    JVM), whose cutime then holds its whole life: what it had spent before the
    first look comes off. One that exits with its parent gone too (reaped by
    init) is lost from the last look on; Spark's workers live on between jobs.
    """
    ticks = sum(t for _, t in after.values())
    ticks -= sum(t for p, (_, t) in before.items() if p in after)
    ticks -= sum(t for p, (parent, t) in before.items() if p not in after and parent in after)
    return ticks * TICK_S


def gateway_jvm() -> int:
    """The pid of Spark's JVM: the java process this driver started (py4j's gateway)."""
    for pid in descendants(os.getpid()):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm == "java":
            return pid
    raise SystemExit("no java process under this driver: is Spark running in it?")


class CpuMeter:
    """CPU seconds by role: Spark's JVM, its Python workers, the servers, this driver."""

    def __init__(self, jvm_pid: int) -> None:
        self.jvm_pid = jvm_pid
        self.servers: list[int] = []

    def snapshot(self) -> tuple[dict[str, float], Tree]:
        flat = {
            "jvm": cpu_s(self.jvm_pid, children=False),
            "servers": sum(cpu_s(p, children=True) for p in self.servers),
            "driver": sum(os.times()[:2]),
        }
        return flat, python_tree(self.jvm_pid)

    def measure(self, action: Any, rows: int) -> tuple[float, dict[str, float]]:
        """``rows`` / s of ``action`` and each role's CPU microseconds per row."""
        before, tree_before = self.snapshot()
        seconds = timed(action)
        after, tree_after = self.snapshot()
        spent = {k: after[k] - before[k] for k in after}
        spent["python_workers"] = tree_cpu_s(tree_before, tree_after)
        return rows / seconds, {k: spent[k] / rows * 1e6 for k in ROLES}


ROLES = ("jvm", "python_workers", "servers", "driver")


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def timed(action: Any) -> float:
    t0 = time.perf_counter()
    action()
    return time.perf_counter() - t0


def wait_route(admin: Admin, topic: str, brokers: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if len(admin.topic_route(topic).queues) == brokers:
                return
        except Exception:  # noqa: BLE001 - not registered yet: poll until the deadline
            pass
        time.sleep(0.05)
    raise SystemExit(f"no route for {topic} after 30 s")


def run(
    spark: Any, cluster: LocalCluster, redis: PeerServer, redis_port: int, args: argparse.Namespace
) -> dict[str, Any]:
    ns = cluster.namesrv_addr
    with Admin(namesrv=ns) as admin:
        for topic in ("SinkBench", "StreamSinkBench", "SourceBench"):
            admin.create_topic(topic, read_queue_nums=args.queues, write_queue_nums=args.queues)
            wait_route(admin, topic, len(cluster.brokers))
    for source in (
        NoopArrowSink,
        MemoryArrowSource,
        ReplayArrowSource,
        MemoryStreamSource,
        NoopStreamSink,
        RedisStreamsDataSource,
    ):
        spark.dataSource.register(source)
    frame = spark.range(0, args.rows, numPartitions=2).selectExpr(BODY_SQL)
    partitions = args.queues * len(cluster.brokers)
    # as many Redis streams as the topic has queues
    redis_streams = {
        name: ",".join(f"{name}-{i}" for i in range(partitions))
        for name in ("SinkBench", "SourceBench")
    }

    sharded = spark.range(0, args.rows, numPartitions=2).selectExpr(
        BODY_SQL, "concat('user-', id % 1000) as shardingKey"
    )

    def sink(fmt: str, topic: str, rows: Any = frame) -> None:
        w = rows.write.format(fmt).mode("append")
        if fmt == "pymq":
            w = w.option("namesrv", ns).option("topic", topic)
        elif fmt == "redis-streams":
            w = w.option("port", str(redis_port)).option("streams", redis_streams[topic])
        w.save()

    pymq_read = spark.read.format("pymq").option("namesrv", ns).option("topic", "SourceBench")
    # the Redis source's four columns (stream, id, body, timestamp), named in a schema
    pymq_read_redis_columns = pymq_read.schema(PYMQ_REDIS_COLUMNS)
    # the same read in Spark's JVM (spark.jars: connector/spark_jar.py)
    pymq_jvm_read = (
        spark.read.format("pymq-jvm").option("namesrv", ns).option("topic", "SourceBench")
    )
    redis_read = (
        spark.read.format("redis-streams")
        .option("port", str(redis_port))
        .option("streams", redis_streams["SourceBench"])
    )
    memory_read = (
        spark.read.format("bench-memory-arrow")
        .option("rows", str(args.rows))
        .option("partitions", str(partitions))
    )

    memory_read_redis_schema = memory_read.option("schema", "redis")
    replayed = Path(tempfile.mkdtemp(prefix="pymq-spark-bench-replay-"))
    replay_read = spark.read.format("bench-replay-arrow").option("dir", str(replayed))

    def source(reader: Any) -> None:
        reader.load().write.format("noop").mode("overwrite").save()

    def clear_redis_sink() -> None:
        import redis as redis_py

        with redis_py.Redis(port=redis_port) as r:
            r.delete(*redis_streams["SinkBench"].split(","))

    checkpoints = Path(tempfile.mkdtemp(prefix="pymq-spark-bench-ckpt-"))

    def stream_sink(fmt: str) -> float:
        """Rows / s of the micro-batches (availableNow) of a fresh query."""
        w = (
            spark.readStream.format("bench-memory-stream")
            .option("rows", str(args.rows))
            .load()
            .writeStream.format(fmt)
            .option("checkpointLocation", tempfile.mkdtemp(dir=checkpoints))
            .trigger(availableNow=True)
        )
        if fmt == "pymq":
            w = w.option("namesrv", ns).option("topic", "StreamSinkBench")
        query = w.start()
        if not query.awaitTermination(600):
            query.stop()
            raise SystemExit(f"the {fmt} stream did not finish in 600 s")
        batches = [p for p in query.recentProgress if p.numInputRows]
        rows = sum(p.numInputRows for p in batches)
        if rows != args.rows:
            raise SystemExit(f"the {fmt} stream wrote {rows} rows, expected {args.rows}")
        return rows / (sum(p.durationMs["triggerExecution"] for p in batches) / 1000)

    print("  filling SourceBench (pymq and redis) and warming up", file=sys.stderr, flush=True)
    sink("pymq", "SourceBench")
    sink("redis-streams", "SourceBench")
    for name, reader in (("pymq", pymq_read), ("pymq-jvm", pymq_jvm_read), ("redis", redis_read)):
        stored = reader.load().count()
        if stored != args.rows:
            raise SystemExit(f"{name} SourceBench holds {stored} rows, expected {args.rows}")
        # a warm-up read of every column: count() builds none in a JVM source (Spark prunes
        # them all), so its decoding would otherwise be compiled by the JIT during run 1
        source(reader)
    if record_pymq_batches(ns, "SourceBench", replayed) != args.rows:
        raise SystemExit(f"pymq's reader did not give the {args.rows} rows to replay")
    sink("pymq", "SinkBench", sharded)
    sink("bench-noop-arrow", "")
    source(memory_read)
    source(replay_read)
    stream_sink("pymq")
    stream_sink("bench-noop-stream-arrow")
    meter = CpuMeter(gateway_jvm())
    jvm_system = spark.sparkContext._jvm.java.lang.System  # through py4j's gateway
    brokers = [b.pid for b in cluster.brokers]
    assert redis.proc is not None
    servers = {"pymq": brokers, "redis": [redis.proc.pid]}
    keys = (
        "sink_pymq",
        "sink_pymq_sharded",
        "sink_redis",
        "sink_noop_arrow",
        "stream_sink_pymq",
        "stream_sink_noop_arrow",
        "source_pymq",
        "source_pymq_redis_columns",
        "source_pymq_jvm",
        "source_redis",
        "source_memory_arrow",
        "source_replay_arrow",
        "source_memory_arrow_redis_schema",
        "jvm",
    )
    figures: dict[str, list[float]] = {k: [] for k in keys}
    cpu: dict[str, list[dict[str, float]]] = {}

    def measured(key: str, system: str | None, action: Any) -> None:
        jvm_system.gc()  # the previous job's garbage: collected before the clock starts
        meter.servers = servers[system] if system else []
        rate, per_row = meter.measure(action, args.rows)
        figures[key].append(rate)
        cpu.setdefault(key, []).append(per_row)

    for r in range(args.runs):
        print(f"  run {r + 1}/{args.runs}", file=sys.stderr, flush=True)
        measured("sink_pymq", "pymq", lambda: sink("pymq", "SinkBench"))
        measured("sink_pymq_sharded", "pymq", lambda: sink("pymq", "SinkBench", sharded))
        measured("sink_redis", "redis", lambda: sink("redis-streams", "SinkBench"))
        clear_redis_sink()
        measured("sink_noop_arrow", None, lambda: sink("bench-noop-arrow", ""))
        for key, fmt in (
            ("stream_sink_pymq", "pymq"),
            ("stream_sink_noop_arrow", "bench-noop-stream-arrow"),
        ):
            jvm_system.gc()
            figures[key].append(stream_sink(fmt))
        measured("source_pymq", "pymq", lambda: source(pymq_read))
        measured("source_pymq_redis_columns", "pymq", lambda: source(pymq_read_redis_columns))
        measured("source_pymq_jvm", "pymq", lambda: source(pymq_jvm_read))
        measured("source_redis", "redis", lambda: source(redis_read))
        measured("source_memory_arrow", None, lambda: source(memory_read))
        measured("source_replay_arrow", None, lambda: source(replay_read))
        measured("source_memory_arrow_redis_schema", None, lambda: source(memory_read_redis_schema))
        jvm = spark.range(0, args.rows * 10, numPartitions=2).write.format("noop")
        jvm_system.gc()
        figures["jvm"].append(args.rows * 10 / timed(jvm.mode("overwrite").save))
    out: dict[str, Any] = {k: summary(v) for k, v in figures.items()}
    shutil.rmtree(checkpoints, ignore_errors=True)
    shutil.rmtree(replayed, ignore_errors=True)
    out["sink_ratio"] = out["sink_pymq"]["median"] / out["sink_noop_arrow"]["median"]
    out["stream_sink_ratio"] = (
        out["stream_sink_pymq"]["median"] / out["stream_sink_noop_arrow"]["median"]
    )
    # the source's ceiling is the replay of its own rows; the synthetic one is for scale
    out["source_ratio"] = out["source_pymq"]["median"] / out["source_replay_arrow"]["median"]
    out["source_synthetic_ratio"] = (
        out["source_pymq"]["median"] / out["source_memory_arrow"]["median"]
    )
    out["sink_vs_redis"] = out["sink_pymq"]["median"] / out["sink_redis"]["median"]
    out["source_vs_redis"] = out["source_pymq"]["median"] / out["source_redis"]["median"]
    out["source_jvm_vs_redis"] = out["source_pymq_jvm"]["median"] / out["source_redis"]["median"]
    out["source_redis_columns_vs_redis"] = (
        out["source_pymq_redis_columns"]["median"] / out["source_redis"]["median"]
    )
    out["sink_redis_ratio"] = out["sink_redis"]["median"] / out["sink_noop_arrow"]["median"]
    # the Redis source against the ceiling of its own, narrower schema (4 columns, no map)
    out["source_redis_ratio"] = (
        out["source_redis"]["median"] / out["source_memory_arrow_redis_schema"]["median"]
    )
    # CPU microseconds per row by role, the median over the runs
    out["cpu_us_per_row"] = {
        key: {role: statistics.median(r[role] for r in runs) for role in runs[0]}
        for key, runs in cpu.items()
    }
    out["partitions"] = {"sink": 2, "stream_sink": 2, "source": partitions}
    out["redis_streams"] = partitions
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument(
        "--queues", type=int, default=4,
        help="queues per broker (2 brokers); Redis gets as many streams",
    )  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="100,000 rows, 1 run")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    if args.quick:
        args.rows, args.runs = 100_000, 1
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pymq-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.jars", jar_path())  # format("pymq-jvm")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    base = Path(tempfile.mkdtemp(prefix="pymq-spark-bench-"))
    redis_bin = server_binary("redis-server")
    if redis_bin is None:
        print("redis-server is not installed (apt-get install redis-server)", file=sys.stderr)
        return 2
    redis_port = free_port()
    (base / "redis").mkdir(parents=True)
    redis = PeerServer(
        "redis-server",
        [
            redis_bin, "--port", str(redis_port), "--bind", "127.0.0.1",
            "--dir", str(base / "redis"), "--save", "", "--appendonly", "no",
            "--daemonize", "no",
        ],
        base / "redis" / "server.log",
        "Ready to accept connections",
    )  # fmt: skip
    try:
        redis.start()
        with LocalCluster(base / "pymq", brokers=2, namesrvs=1, env=env) as cluster:
            figures = run(spark, cluster, redis, redis_port, args)
    finally:
        spark.stop()
        redis.stop()
        shutil.rmtree(base, ignore_errors=True)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "command": " ".join(["python", *sys.argv]),
        "rows": args.rows,
        "runs": args.runs,
        **figures,
    }
    print(
        f"\nSpark local[2], {args.rows:,} rows of 100-byte bodies (rows/s, median of {args.runs})"
    )
    for key, label in (
        ("sink_pymq", "sink: write.format('pymq')"),
        ("sink_pymq_sharded", "  ... with a shardingKey (1,000 keys)"),
        ("sink_redis", "sink peer: Redis Streams (XADD)"),
        ("sink_noop_arrow", "sink ceiling: no-op Arrow writer"),
        ("stream_sink_pymq", "stream sink: writeStream.format('pymq')"),
        ("stream_sink_noop_arrow", "stream sink ceiling: no-op Arrow"),
        ("source_pymq", "source: read.format('pymq')"),
        ("source_redis", "source peer: Redis Streams (XRANGE)"),
        ("source_replay_arrow", "source ceiling: pymq's batches replayed"),
        ("source_memory_arrow", "source ceiling: synthetic in-memory"),
        ("source_memory_arrow_redis_schema", "  ... with the Redis source's schema"),
        ("jvm", "JVM only: range -> noop"),
    ):
        f = results[key]
        print(f"{label:<36}{f['median']:>12,.0f}  ({f['min']:,.0f}-{f['max']:,.0f})")
    print(f"sink / ceiling   {results['sink_ratio']:.2f}   (target >= 0.7)")
    print(f"stream sink / ceiling {results['stream_sink_ratio']:.2f}   (target >= 0.7)")
    print(f"source / ceiling {results['source_ratio']:.2f}   (target >= 0.9)")
    print(f"source / synthetic ceiling {results['source_synthetic_ratio']:.2f}")
    print(f"pymq sink / Redis sink     {results['sink_vs_redis']:.2f}   (target >= 2)")
    print(f"pymq source / Redis source {results['source_vs_redis']:.2f}   (target >= 3)")
    print(f"{'CPU us per row':<34}" + "".join(f"{role:>16}" for role in ROLES))
    for key, roles in results["cpu_us_per_row"].items():
        print(f"{key:<34}" + "".join(f"{roles[role]:>16.2f}" for role in ROLES))
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
