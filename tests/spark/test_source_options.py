"""format("pymq") read options against real processes: startingTimestamp, endingOffsets,
failOnDataLoss (with CommitLog segments really deleted by the broker's retention)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connector import Message, Producer, PullConsumer
from connector.local import LocalCluster

SEGMENT_BYTES = 64 * 1024  # far above StoreConfig's 4096-byte minimum, a few hundred records


def make_topic(cluster: LocalCluster, topic: str, queues: int) -> None:
    """The topic on every broker of the cluster, and its route visible on the NameServer."""
    for b in cluster.brokers:
        r = httpx.put(
            f"http://{b.http_addr}/topics/{topic}",
            json={"read_queue_nums": queues, "write_queue_nums": queues, "perm": 6},
            timeout=10,
        )
        assert r.status_code == 200, r.text
    ns = cluster.namesrvs[0].http_addr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        route = httpx.get(f"http://{ns}/routes/{topic}", timeout=10)
        if route.status_code == 200 and len(route.json()["queues"]) == len(cluster.brokers):
            return
        time.sleep(0.05)
    raise AssertionError(f"no route for {topic}")


Position = tuple[str, int, int]  # (broker name, queue id, queue offset)


def send_bodies(ns: str, topic: str, bodies: list[bytes], chunk: int) -> dict[Position, bytes]:
    """Send in batches of ``chunk``; where each body landed, from the SendResults."""
    where: dict[Position, bytes] = {}
    with Producer(group="options-fill", namesrv=ns) as producer:
        for k in range(0, len(bodies), chunk):
            part = bodies[k : k + chunk]
            r = producer.send_batch([Message(topic=topic, body=b) for b in part])
            for i, body in enumerate(part):  # a batch takes consecutive offsets of one queue
                where[(r.queue.broker_name, r.queue.queue_id, r.queue_offset + i)] = body
    assert len(where) == len(bodies)
    return where


def wait_until_ms(target_ms: int) -> int:
    """Poll the wall clock (bounded) until it reaches ``target_ms``; the time reached."""
    deadline = time.monotonic() + 5
    while (now := int(time.time() * 1000)) < target_ms:
        assert time.monotonic() < deadline, "the wall clock did not advance"
        time.sleep(0.001)
    return now


def read_positions(df: Any) -> list[tuple[Position, bytes]]:
    rows = df.select("brokerName", "queueId", "queueOffset", "body").collect()
    return [((r.brokerName, r.queueId, r.queueOffset), bytes(r.body)) for r in rows]


def offsets_json(topic: str, spec: dict[tuple[str, int], int]) -> str:
    out: dict[str, dict[str, dict[str, int]]] = {topic: {}}
    for (broker, qid), offset in spec.items():
        out[topic].setdefault(broker, {})[str(qid)] = offset
    return json.dumps(out)


@contextlib.contextmanager
def quiet(spark: Any) -> Iterator[None]:
    """No JVM log lines (task failures, stack traces) while an expected failure happens."""
    spark.sparkContext.setLogLevel("OFF")
    try:
        yield
    finally:
        spark.sparkContext.setLogLevel("ERROR")  # the level tests/spark/conftest.py sets


# -- startingTimestamp ----------------------------------------------------------------


def test_starting_timestamp_batch_and_stream(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    topic = "OptTimestamp"
    make_topic(cluster, topic, queues=4)
    a = [b"a-%d" % i for i in range(600)]
    b = [b"b-%d" % i for i in range(600)]
    send_bodies(ns, topic, a, chunk=20)
    acked_a = int(time.time() * 1000)  # every A message was stored at or before this
    split_ms = wait_until_ms(acked_a + 5)
    wait_until_ms(split_ms + 5)  # B is stored at least 5 ms after the split
    send_bodies(ns, topic, b, chunk=20)

    batch = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", topic)
        .option("startingTimestamp", str(split_ms))
        .load()
    )
    got = batch.selectExpr("body", "unix_millis(storeTimestamp) as ts").collect()
    assert sorted(bytes(r.body) for r in got) == sorted(b)
    assert min(r.ts for r in got) >= split_ms + 5  # the broker's clock is the wall clock

    stream = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", topic)
        .option("startingTimestamp", str(split_ms))
        .load()
    )
    query = (
        stream.select("body")
        .writeStream.format("memory")
        .queryName("opt_timestamp")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    assert query.exception() is None
    streamed = sorted(bytes(r.body) for r in spark.sql("select body from opt_timestamp").collect())
    assert streamed == sorted(b)


# -- endingOffsets --------------------------------------------------------------------


def test_ending_offsets_json_reads_exactly_the_ranges(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    topic = "OptEnding"
    make_topic(cluster, topic, queues=2)
    where = send_bodies(ns, topic, [b"e-%d" % i for i in range(800)], chunk=10)
    queues = sorted({(broker, qid) for broker, qid, _ in where})
    assert len(queues) == 4  # the producer spread the batches over both brokers' queues
    hi = {q: 1 + max(o for b, i, o in where if (b, i) == q) for q in queues}
    assert all(v >= 60 for v in hi.values())
    (qa0, qa1, qb0, qb1) = queues
    starting = {qa0: 3, qa1: -2, qb0: 10, qb1: 7}  # -2: earliest
    ending = {qa0: 17, qa1: 1, qb0: -1, qb1: 7}  # -1: latest; qb1 an empty range
    want_ranges = {qa0: (3, 17), qa1: (0, 1), qb0: (10, hi[qb0]), qb1: (7, 7)}
    expected = sorted(
        (pos, body)
        for pos, body in where.items()
        if want_ranges[pos[:2]][0] <= pos[2] < want_ranges[pos[:2]][1]
    )
    assert len(expected) == 14 + 1 + hi[qb0] - 10

    for min_partitions in ("1", "7"):  # split ranges must still be exact
        df = (
            spark.read.format("pymq")
            .option("namesrv", ns)
            .option("topic", topic)
            .option("startingOffsets", offsets_json(topic, starting))
            .option("endingOffsets", offsets_json(topic, ending))
            .option("minPartitions", min_partitions)
            .load()
        )
        assert sorted(read_positions(df)) == expected, f"minPartitions={min_partitions}"

    # queues the JSON leaves out: from their earliest offset (starting), to the latest (ending)
    only_a0 = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", topic)
        .option("endingOffsets", offsets_json(topic, {qa0: 5}))
        .load()
    )
    expected_a0 = sorted((pos, body) for pos, body in where.items() if pos[:2] != qa0 or pos[2] < 5)
    assert sorted(read_positions(only_a0)) == expected_a0


# -- failOnDataLoss -------------------------------------------------------------------


@pytest.fixture(scope="module")
def retention_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One broker whose retention deletes every non-active CommitLog segment within seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(
        {
            "PYMQ_REGISTER_NAME_SERVER_PERIOD_MS": "500",
            "PYMQ_MAPPED_FILE_SIZE_COMMIT_LOG": str(SEGMENT_BYTES),
            "PYMQ_FILE_RESERVED_TIME_HOURS": "0.0005",  # 1.8 s
            "PYMQ_DELETE_WHEN": ";".join(str(h) for h in range(24)),  # any hour is delete time
            "PYMQ_CLEAN_RESOURCE_INTERVAL_MS": "200",
        }
    )
    with LocalCluster(
        tmp_path_factory.mktemp("retention-cluster"), brokers=1, namesrvs=1, env=env
    ) as c:
        yield c


def commit_log_bounds(broker_addr: str) -> tuple[int, int]:
    """The CommitLog's (min, max) byte offsets from the broker's /metrics."""
    text = httpx.get(f"http://{broker_addr}/metrics", timeout=10).text
    values = dict(re.findall(r"^pymq_store_commitlog_(min|max)_offset_bytes (\S+)$", text, re.M))
    return int(float(values["min"])), int(float(values["max"]))


def wait_for_retention(
    cluster: LocalCluster, topic: str, timeout_s: float = 60
) -> dict[tuple[str, int], tuple[int, int]]:
    """Poll until retention deleted every segment but the active one; each queue's bounds.

    The queues' min offsets follow the CommitLog's deletion a moment later (the same
    retention pass corrects them after deleting segments), so the bounds are taken
    once two polls in a row agree."""
    addr = cluster.brokers[0].http_addr
    deadline = time.monotonic() + timeout_s
    before: dict[tuple[str, int], tuple[int, int]] | None = None
    with PullConsumer(group="retention-watch", namesrv=cluster.namesrv_addr) as consumer:
        while True:
            lo_bytes, hi_bytes = commit_log_bounds(addr)
            done = lo_bytes == (hi_bytes - 1) // SEGMENT_BYTES * SEGMENT_BYTES
            bounds = {
                (mq.broker_name, mq.queue_id): (consumer.min_offset(mq), consumer.max_offset(mq))
                for mq in consumer.fetch_queues(topic)
            }
            if done and all(lo > 0 for lo, _ in bounds.values()):
                if bounds == before:
                    return bounds
                before = bounds
            else:
                before = None
            assert time.monotonic() < deadline, f"retention did not run: {lo_bytes}, {bounds}"
            time.sleep(0.1)


def test_fail_on_data_loss_both_ways(
    spark: Any, retention_cluster: LocalCluster, tmp_path: Path
) -> None:
    cluster = retention_cluster
    ns = cluster.namesrv_addr
    topic = "OptRetention"
    make_topic(cluster, topic, queues=2)
    bodies = [b"r-%05d-" % i + b"x" * 150 for i in range(3000)]  # ~14 segments of 64 KiB
    where = send_bodies(ns, topic, bodies, chunk=10)
    bounds = wait_for_retention(cluster, topic)
    assert sum(hi for _, hi in bounds.values()) == len(bodies)
    kept = sorted((pos, body) for pos, body in where.items() if pos[2] >= bounds[pos[:2]][0])
    assert 0 < len(kept) < len(bodies) // 4  # most of it is gone, the active segment stays
    from_zero = offsets_json(topic, {q: 0 for q in bounds})

    def batch(fail_on_data_loss: str, fmt: str = "pymq") -> Any:
        return (
            spark.read.format(fmt)
            .option("namesrv", ns)
            .option("topic", topic)
            .option("startingOffsets", from_zero)
            .option("failOnDataLoss", fail_on_data_loss)
            .load()
        )

    def names_lost_offsets(message: str) -> bool:
        lost = {f"0..{lo - 1}" for lo, _ in bounds.values()}
        return "failOnDataLoss" in message and topic in message and any(x in message for x in lost)

    for fmt in ("pymq", "pymq-jvm"):  # the JVM source decides the same
        with quiet(spark), pytest.raises(Exception) as failed:  # Spark wraps the source's error
            batch("true", fmt).collect()
        assert names_lost_offsets(str(failed.value)), str(failed.value)[-3000:]

        assert sorted(read_positions(batch("false", fmt))) == kept

    def stream(fail_on_data_loss: str, name: str) -> Any:
        reader = (
            spark.readStream.format("pymq")
            .option("namesrv", ns)
            .option("topic", topic)
            .option("startingOffsets", from_zero)
            .option("failOnDataLoss", fail_on_data_loss)
            .load()
        )
        return (
            reader.select("brokerName", "queueId", "queueOffset", "body")
            .writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", str(tmp_path / name))
            .trigger(availableNow=True)
            .start()
        )

    failing = stream("true", "opt_loss_fail")
    with quiet(spark), pytest.raises(Exception) as stream_failed:  # StreamingQueryException
        failing.awaitTermination(180)
    assert names_lost_offsets(str(stream_failed.value)), str(stream_failed.value)[-3000:]

    skipping = stream("false", "opt_loss_skip")
    assert skipping.awaitTermination(180)
    assert skipping.exception() is None
    got = read_positions(spark.table("opt_loss_skip"))
    assert sorted(got) == kept
