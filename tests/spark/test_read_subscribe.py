"""What a read covers: subscribePattern (topics that appear mid-query too), assign, and a
topic deleted and created again under a running query (failOnDataLoss both ways)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connector import Admin, Message, Producer, PullConsumer
from connector.local import LocalCluster
from connector.spark.options import ReadOptions
from connector.spark.queues import QueueFinder
from tests.support.cluster import create_topic
from tests.support.spark import fill


def bodies(rows: list[Any]) -> Counter[bytes]:
    return Counter(bytes(r.body) for r in rows)


def sent(n: int) -> Counter[bytes]:
    return Counter(b"row-%d" % i for i in range(n))  # what test_stream.fill sends


def stream_to_memory(spark: Any, name: str, tmp_path: Path, **options: str) -> Any:
    reader = spark.readStream.format("pymq").options(**options).load()
    return (
        reader.select("topic", "body", "queueId", "brokerName")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .start()
    )


def test_pattern_leaves_out_broker_topics(cluster: LocalCluster) -> None:
    create_topic(cluster, "PatUser")
    create_topic(cluster, "%RETRY%pat-group")
    opts = ReadOptions.parse(
        {"namesrv": cluster.namesrv_addr, "subscribePattern": ".*"}, stream=False
    )
    with PullConsumer(group="pat-check", namesrv=cluster.namesrv_addr) as consumer:
        listed = consumer.namesrv.topic_list()
        matched = QueueFinder(opts, consumer).topics()
    assert "TBW102" in listed and "%RETRY%pat-group" in listed  # the cluster has them
    assert "PatUser" in matched
    assert not [t for t in matched if t == "TBW102" or t.startswith(("%", "RMQ_SYS_"))]


def test_pattern_stream_reads_topics_created_mid_query(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "SubOther")  # does not match: fullmatch, not search
    fill(ns, "SubOther", 50)
    query = stream_to_memory(
        spark,
        "sub_pattern",
        tmp_path,
        namesrv=ns,
        subscribePattern=r"SubOrders\d",
        startingOffsets="latest",  # new topics are read from their earliest offset anyway
    )
    try:
        query.processAllAvailable()  # no topic matches yet
        assert spark.table("sub_pattern").count() == 0
        create_topic(cluster, "SubOrders1")
        fill(ns, "SubOrders1", 300)
        query.processAllAvailable()
        assert bodies(spark.table("sub_pattern").collect()) == sent(300)
        create_topic(cluster, "SubOrders2")
        fill(ns, "SubOrders2", 200)
        fill(ns, "SubOrders1", 300)
        query.processAllAvailable()
        rows = spark.table("sub_pattern").collect()
    finally:
        query.stop()
    assert Counter(r.topic for r in rows) == {"SubOrders1": 600, "SubOrders2": 200}
    two = [r for r in rows if r.topic == "SubOrders2"]
    assert bodies(two) == sent(200)


def test_pattern_batch(spark: Any, cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "PatBatchA")
    create_topic(cluster, "PatBatchB")
    fill(ns, "PatBatchA", 100)
    fill(ns, "PatBatchB", 70)
    df = spark.read.format("pymq").option("namesrv", ns).option("subscribePattern", "PatBatch.")
    assert Counter(r.topic for r in df.load().collect()) == {"PatBatchA": 100, "PatBatchB": 70}


def test_assign_reads_only_its_queues(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "AssignT")
    with Producer(group="assign-fill", namesrv=ns) as producer:  # small batches: every queue
        for k in range(0, 800, 10):
            producer.send_batch(
                [Message(topic="AssignT", body=b"%d" % i) for i in range(k, k + 10)]
            )
    with PullConsumer(group="assign-check", namesrv=ns) as consumer:
        counts = {
            (mq.broker_name, mq.queue_id): consumer.max_offset(mq)
            for mq in consumer.fetch_queues("AssignT")
        }
    assert len(counts) == 8 and all(counts.values())
    assign = '{"AssignT": {"broker-a": [1, 3], "broker-b": [0]}}'
    wanted = {("broker-a", 1), ("broker-a", 3), ("broker-b", 0)}

    df = spark.read.format("pymq").option("namesrv", ns).option("assign", assign).load()
    got = Counter((r.brokerName, r.queueId) for r in df.collect())
    assert got == {k: counts[k] for k in wanted}

    query = stream_to_memory(
        spark, "assign_stream", tmp_path, namesrv=ns, assign=assign, startingOffsets="earliest"
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    got = Counter((r.brokerName, r.queueId) for r in spark.table("assign_stream").collect())
    assert got == {k: counts[k] for k in wanted}

    missing = '{"AssignT": {"broker-a": [1, 9]}}'
    with pytest.raises(Exception, match="option assign: no such queue AssignT:broker-a:9"):
        spark.read.format("pymq").option("namesrv", ns).option("assign", missing).load().collect()


def delete(cluster: LocalCluster, topic: str) -> None:
    """Delete ``topic`` and wait (bounded) until the NameServer has no route for it."""
    with Admin(namesrv=cluster.namesrv_addr) as admin:
        admin.delete_topic(topic)
        deadline = time.monotonic() + 30
        while topic in admin.topic_list():
            assert time.monotonic() < deadline, f"{topic} still listed"
            time.sleep(0.05)


def test_topic_deleted_mid_query(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    for topic in ("GoneA", "GoneB", "GoneC", "GoneD"):
        create_topic(cluster, topic)
        fill(ns, topic, 100)
    # failOnDataLoss=false: the deleted topic is dropped, the query reads on
    going_on = stream_to_memory(
        spark, "gone_go_on", tmp_path, namesrv=ns, subscribePattern="Gone[AB]",
        startingOffsets="earliest", failOnDataLoss="false",
    )  # fmt: skip
    # failOnDataLoss (the default): the query fails naming the topic
    failing = stream_to_memory(
        spark, "gone_fail", tmp_path, namesrv=ns, topic="GoneC,GoneD", startingOffsets="earliest"
    )
    try:
        going_on.processAllAvailable()
        failing.processAllAvailable()
        delete(cluster, "GoneA")
        delete(cluster, "GoneC")
        fill(ns, "GoneB", 100)
        going_on.processAllAvailable()
        assert going_on.exception() is None
        with pytest.raises(Exception, match="topic GoneC was deleted") as failed:
            failing.awaitTermination(120)
            failing.processAllAvailable()  # not reached if it failed in time
        assert "failOnDataLoss=false" in str(failed.value)
    finally:
        going_on.stop()
        failing.stop()
    rows = spark.table("gone_go_on").collect()
    assert Counter(r.topic for r in rows) == {"GoneA": 100, "GoneB": 200}


def recreate(cluster: LocalCluster, topic: str, rows: int) -> None:
    """Delete ``topic`` and create it again with ``rows`` messages (its offsets from 0)."""
    ns = cluster.namesrv_addr
    with Admin(namesrv=ns) as admin:
        admin.delete_topic(topic)
    create_topic(cluster, topic)
    # the brokers' queues start again at 0 (bounded wait for the new route's brokers)
    deadline = time.monotonic() + 30
    with PullConsumer(group="recreate-check", namesrv=ns) as consumer:
        while sum(consumer.max_offset(mq) for mq in consumer.fetch_queues(topic)) != 0:
            assert time.monotonic() < deadline, "the topic's offsets did not reset"
            time.sleep(0.05)
    with Producer(group="recreate", namesrv=ns) as producer:
        producer.send_batch([Message(topic=topic, body=b"new-%d" % i) for i in range(rows)])


def test_topic_recreated_fails_the_query(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "LossFail")
    fill(ns, "LossFail", 800)
    query = stream_to_memory(
        spark, "loss_fail", tmp_path, namesrv=ns, topic="LossFail", startingOffsets="earliest"
    )
    try:
        query.processAllAvailable()
        assert len(spark.table("loss_fail").collect()) == 800
        recreate(cluster, "LossFail", 8)
        with pytest.raises(Exception) as failed:  # StreamingQueryException
            query.awaitTermination(120)
            query.processAllAvailable()  # not reached if it failed in time
    finally:
        query.stop()
    message = str(failed.value)
    assert "LossFail" in message and "failOnDataLoss=false" in message, message[-3000:]
    assert "was deleted" in message or "before offset" in message, message[-3000:]


def test_topic_recreated_goes_on_without_fail_on_data_loss(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "LossGoOn")
    fill(ns, "LossGoOn", 800)
    query = stream_to_memory(
        spark,
        "loss_go_on",
        tmp_path,
        namesrv=ns,
        topic="LossGoOn",
        startingOffsets="earliest",
        failOnDataLoss="false",
    )
    try:
        query.processAllAvailable()
        recreate(cluster, "LossGoOn", 40)
        query.processAllAvailable()
        rows = spark.table("loss_go_on").collect()
        assert query.exception() is None
    finally:
        query.stop()
    # everything before, and every message of the new topic, from its new start
    assert bodies(rows) == sent(800) + Counter(b"new-%d" % i for i in range(40))


def test_a_named_topic_without_a_route_is_refused(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    """``topic`` (and ``assign``) name topics that must exist: batch and stream say which."""
    ns = cluster.namesrv_addr
    with pytest.raises(Exception, match="No route info of this topic: NeverMade"):
        spark.read.format("pymq").option("namesrv", ns).option("topic", "NeverMade").load().count()
    query = stream_to_memory(spark, "never_made", tmp_path, namesrv=ns, topic="NeverMade")
    try:
        with pytest.raises(Exception, match="No route info of this topic: NeverMade"):
            query.awaitTermination(120)
    finally:
        query.stop()
