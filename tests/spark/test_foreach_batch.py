"""A streaming aggregation in update mode written to pymq through foreach_batch_writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from connector import Message, Producer, PullConsumer
from connector.errors import ConfigError
from connector.local import LocalCluster
from connector.spark import foreach_batch_writer
from tests.support.cluster import create_topic


def send_words(ns: str, words: str, topic: str = "Words") -> None:
    with Producer(group="words", namesrv=ns) as producer:
        producer.send_batch([Message(topic, w.encode()) for w in words.split()])


def updates(ns: str) -> dict[str, list[tuple[int, tuple[str, int]]]]:
    """Counts' messages per word: (count, queue) in queue order."""
    out: dict[str, list[tuple[int, tuple[str, int]]]] = {}
    with PullConsumer(group="counts-check", namesrv=ns) as consumer:
        for mq in consumer.fetch_queues("Counts"):
            res = consumer.pull(mq, 0, 1000)
            for m in res.messages:
                row = json.loads(m.body)
                assert m.keys == [row["word"]]
                out.setdefault(row["word"], []).append(
                    (row["count"], (mq.broker_name, mq.queue_id))
                )
    return out


def test_update_mode_aggregation_through_foreach_batch(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "Words")
    create_topic(cluster, "Counts")
    counts = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "Words")
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("cast(body as string) as word")
        .groupBy("word")
        .count()
    )
    write = foreach_batch_writer(namesrv=ns, topic="Counts", key_column="word", json_body=True)

    def run() -> None:
        query = (
            counts.writeStream.outputMode("update")
            .foreachBatch(write)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180), "the query did not finish in 180 s"
        assert query.exception() is None

    send_words(ns, "a a b a")
    run()
    send_words(ns, "a c a")
    run()  # the same query again: only the words whose count changed are updates
    got = updates(ns)
    assert {w: [c for c, _ in u] for w, u in got.items()} == {"a": [3, 5], "b": [1], "c": [1]}
    assert len({q for _, q in got["a"]}) == 1  # a key's updates in one queue, in order


def test_update_mode_into_the_stream_sink_fails_and_options_are_checked_early(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    # why the helper exists: Spark's Python stream writers take append mode only
    ns = cluster.namesrv_addr
    create_topic(cluster, "Letters")
    create_topic(cluster, "Words2")
    send_words(ns, "x", "Letters")
    agg = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "Letters")
        .option("startingOffsets", "earliest")
        .load()
        .groupBy("tags")
        .count()
        .selectExpr("cast(count as string) as body")
    )
    query = (
        agg.writeStream.format("pymq")
        .outputMode("update")
        .option("namesrv", ns)
        .option("topic", "Words2")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="does not support Update mode"):
        query.awaitTermination(180)
    # the helper checks its options on the driver, before any query starts
    with pytest.raises(ConfigError, match="batchSize"):
        foreach_batch_writer(namesrv=ns, topic="Counts", batchSize=0)
    with pytest.raises(ConfigError, match="topic"):
        foreach_batch_writer(namesrv=ns, json_body=True)
    with pytest.raises(ConfigError, match="deliveryGuarantee"):
        foreach_batch_writer(namesrv=ns, topic="Counts", deliveryGuarantee="exactly-once")
