"""format("pymq") streaming: admission control, AvailableNow, topic to topic, group lag."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from connector import Admin
from connector.local import LocalCluster
from tests.support.cluster import create_topic
from tests.support.spark import fill


def test_available_now_honours_max_messages_per_trigger(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "StreamIn")
    fill(ns, "StreamIn", 5000)
    stream = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "StreamIn")
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "1000")
        .option("consumerGroup", "spark-q1")
        .load()
    )
    query = (
        stream.select("body", "queueOffset")
        .writeStream.format("memory")
        .queryName("stream_in")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    rows = spark.sql("select body from stream_in").collect()
    assert Counter(bytes(r.body) for r in rows) == Counter(b"row-%d" % i for i in range(5000))
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert len(sizes) >= 5 and max(sizes) <= 1000 and sum(sizes) == 5000
    # the group's offsets reach the brokers: Spark commits a micro-batch's end to the
    # source once the next one is planned, so at most the last batch still shows as lag
    with Admin(namesrv=ns) as admin:
        progress = [r for r in admin.consumer_progress("spark-q1") if r["topic"] == "StreamIn"]
    assert progress and sum(r["lag"] for r in progress) <= 1000
    assert sum(r["consumer_offset"] for r in progress) >= 4000


def test_stream_topic_to_topic(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "EtlIn")
    create_topic(cluster, "EtlOut")
    fill(ns, "EtlIn", 3000)
    source = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "EtlIn")
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        source.selectExpr("body", "tags", "map('src', msgId) as properties")
        .writeStream.queryName("etl")  # Spark hands the writer queryName among its options
        .format("pymq")
        .option("namesrv", ns)
        .option("topic", "EtlOut")
        .option("checkpointLocation", str(tmp_path / "etl"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    out = spark.read.format("pymq").option("namesrv", ns).option("topic", "EtlOut").load().collect()
    assert Counter(bytes(r.body) for r in out) == Counter(b"row-%d" % i for i in range(3000))
    assert all(r.tags == "T" and r.properties["src"] for r in out)


def test_a_given_schema_reads_only_its_columns(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    """Batch and stream: a schema given to the read picks columns, in its order."""
    ns = cluster.namesrv_addr
    create_topic(cluster, "StreamCols")
    fill(ns, "StreamCols", 300)
    picked = "queueOffset long, body binary"
    batch = (
        spark.read.format("pymq").schema(picked).option("namesrv", ns)
        .option("topic", "StreamCols").load()
    )  # fmt: skip
    whole = spark.read.format("pymq").option("namesrv", ns).option("topic", "StreamCols").load()
    assert batch.columns == ["queueOffset", "body"]
    assert Counter(tuple(r) for r in batch.collect()) == Counter(
        tuple(r) for r in whole.select("queueOffset", "body").collect()
    )
    query = (
        spark.readStream.format("pymq").schema(picked).option("namesrv", ns)
        .option("topic", "StreamCols").option("startingOffsets", "earliest").load()
        .writeStream.format("memory").queryName("stream_cols")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    assert query.awaitTermination(180)
    streamed = spark.sql("select * from stream_cols")
    assert streamed.columns == ["queueOffset", "body"]
    assert Counter(bytes(r.body) for r in streamed.collect()) == Counter(
        b"row-%d" % i for i in range(300)
    )
