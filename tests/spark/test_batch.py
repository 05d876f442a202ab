"""format("pymq") in batch: write through the producer, read back by offset range."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx
import pytest

from connector.local import LocalCluster


def create_topic(cluster: LocalCluster, topic: str, queues: int = 4) -> None:
    for b in cluster.brokers:
        r = httpx.put(
            f"http://{b.addr}/topics/{topic}",
            json={"read_queue_nums": queues, "write_queue_nums": queues, "perm": 6},
            timeout=10,
        )
        assert r.status_code == 200, r.text
    deadline = time.monotonic() + 10
    ns = cluster.namesrv_addr.split(";")[0]
    while time.monotonic() < deadline:
        route = httpx.get(f"http://{ns}/routes/{topic}", timeout=10)
        if route.status_code == 200 and len(route.json()["queues"]) == len(cluster.brokers):
            return
        time.sleep(0.05)
    raise AssertionError(f"no route for {topic}")


def test_format_pymq_needs_no_registration(spark: Any) -> None:
    # a fresh session finds the source through the installed pyspark_pymq module
    with pytest.raises(Exception, match="namesrv"):
        spark.read.format("pymq").option("topic", "T").load().collect()


def test_batch_round_trip(spark: Any, cluster: LocalCluster) -> None:
    create_topic(cluster, "SparkBatch")
    ns = cluster.namesrv_addr
    rows = 20_000
    df = spark.range(rows).selectExpr(
        "cast(concat('event-', id) as binary) as body",
        "if(id % 2 = 0, 'even', 'odd') as tags",
        "concat('k', id) as keys",
        "map('n', cast(id as string)) as properties",
    )
    df.write.mode("append").format("pymq").option("namesrv", ns).option(
        "topic", "SparkBatch"
    ).save()

    read = spark.read.format("pymq").option("namesrv", ns).option("topic", "SparkBatch").load()
    got = read.select("body", "tags", "keys", "properties", "brokerName", "queueOffset").collect()
    assert len(got) == rows
    assert Counter(bytes(r.body) for r in got) == Counter(b"event-%d" % i for i in range(rows))
    for r in got[:200]:
        n = int(bytes(r.body)[6:])
        assert r.tags == ("even" if n % 2 == 0 else "odd") and r.keys == f"k{n}"
        assert r.properties["n"] == str(n)
    assert {r.brokerName for r in got} == {"broker-a", "broker-b"}  # the producer spread them

    # an exact range re-reads the same rows; a tag filter is pushed to the broker
    evens = read.where("tags = 'even'").count()
    assert evens == rows // 2
    only_even = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", "SparkBatch")
        .option("tags", "even")
        .load()
    )
    assert only_even.count() == rows // 2
    first_offsets = '{"SparkBatch": {"broker-a": {"0": 0}}}'
    ending = (
        '{"SparkBatch": {"broker-a": {"0": 10, "1": 0, "2": 0, "3": 0}, "broker-b": '
        '{"0": 0, "1": 0, "2": 0, "3": 0}}}'
    )
    ten = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", "SparkBatch")
        .option("startingOffsets", first_offsets)
        .option("endingOffsets", ending)
        .load()
    )
    first = ten.collect()
    assert len(first) == 10 and ten.collect() == first
    assert sorted(r.queueOffset for r in first) == list(range(10))


def test_sink_rejects_bad_frames(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    no_body = spark.range(3).selectExpr("cast(id as string) as payload")
    with pytest.raises(Exception, match="body"):
        no_body.write.mode("append").format("pymq").option("namesrv", ns).option(
            "topic", "X"
        ).save()
    no_topic = spark.range(3).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception, match="topic"):
        no_topic.write.mode("append").format("pymq").option("namesrv", ns).save()
