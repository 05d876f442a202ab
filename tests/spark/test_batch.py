"""format("pymq") in batch: write through the producer, read back by offset range."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import httpx
import pytest

from connector import Admin, Message, Producer
from connector.local import LocalCluster
from tests.support.cluster import create_topic


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
    # batches of 500: each task makes 20 requests, round-robin over all 8 queues
    df.write.mode("append").format("pymq").option("namesrv", ns).option(
        "topic", "SparkBatch"
    ).option("batchSize", "500").save()

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
    # ten messages of a queue that has at least ten (a batch request fills one queue)
    with Admin(namesrv=ns) as admin:
        full = next(q for q in admin.topic_status("SparkBatch") if q["max_offset"] >= 10)
    broker, qid = full["broker_name"], str(full["queue_id"])
    first_offsets = json.dumps({"SparkBatch": {broker: {qid: 0}}})
    ends = {b: {str(q): 0 for q in range(4)} for b in ("broker-a", "broker-b")}
    ends[broker][qid] = 10
    ending = json.dumps({"SparkBatch": ends})
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


def test_large_bodies_are_split_under_the_request_limit(spark: Any, cluster: LocalCluster) -> None:
    # 120 rows of 100 KB: 12 MB per path, 3 times the 4 MiB request limit
    create_topic(cluster, "SparkBig")
    ns = cluster.namesrv_addr
    big = spark.range(120, numPartitions=1).selectExpr(
        "cast(concat(lpad(cast(id as string), 6, '0'), repeat('x', 100000)) as binary) as body",
        "'big' as tags",
    )
    for frame in (big, big.selectExpr("body", "tags", "concat('k', 'x') as keys")):  # both paths
        frame.write.mode("append").format("pymq").option("namesrv", ns).option(
            "topic", "SparkBig"
        ).save()
    got = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", "SparkBig")
        .load()
        .selectExpr("substring(body, 1, 6) as id", "length(body) as n", "keys")
        .collect()
    )
    assert Counter((bytes(r.id).decode(), r.keys) for r in got) == Counter(
        (f"{i:06d}", k) for i in range(120) for k in (None, "kx")
    )
    assert {r.n for r in got} == {100_006}


def test_a_range_reads_ahead_only_whole_pages(spark: Any, cluster: LocalCluster) -> None:
    # 1,000 messages in one queue read in pages of 300: 300, 300, 300, 100, each asked
    # for once (the 100 is not read ahead as a page of 300 nobody takes)
    create_topic(cluster, "SparkPages", queues=1)
    ns = cluster.namesrv_addr
    with Producer(group="pages-fill", namesrv=ns) as producer:
        first = producer.send(Message(topic="SparkPages", body=b"0"))
        mq = first.queue
        for k in range(1, 1000, 111):
            batch = [
                Message(topic="SparkPages", body=b"%d" % i) for i in range(k, min(k + 111, 1000))
            ]
            producer.send_batch(batch, queue=mq)
    assign = json.dumps({"SparkPages": {mq.broker_name: [0]}})
    broker = cluster.broker(mq.broker_name)

    def pulls() -> int:  # the broker's count of pull requests, every status
        text = httpx.get(f"http://{broker.http_addr}/metrics", timeout=10).text
        return sum(
            int(float(v)) for v in re.findall(r"^pymq_pull_requests_total\{.*\} (\S+)$", text, re.M)
        )

    before = pulls()
    df = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("assign", assign)
        .option("pullBatchSize", "300")
        .load()
    )
    assert sorted(int(bytes(r.body)) for r in df.select("body").collect()) == list(range(1000))
    assert pulls() - before == 4
