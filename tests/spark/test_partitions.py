"""minPartitions and maxRecordsPerPartition: a read's queue ranges cut into pieces, batch and
stream, that together hold every offset exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from connector.local import LocalCluster
from connector.spark.source import QueueRange, split_ranges
from tests.support.cluster import create_topic
from tests.support.spark import fill_queues

# -- the cut, without Spark -----------------------------------------------------------


def offsets(parts: list[QueueRange]) -> Counter[tuple[str, int, int]]:
    return Counter((p.broker_name, p.queue_id, o) for p in parts for o in range(p.start, p.end))


def test_min_partitions_in_proportion_and_exact() -> None:
    ranges = [QueueRange("T", "a", 0, 10, 910), QueueRange("T", "b", 0, 0, 100)]
    parts = split_ranges(ranges, 10)
    assert len(parts) >= 10
    assert offsets(parts) == offsets(ranges)  # every offset once
    big = [p for p in parts if p.broker_name == "a"]
    assert len(big) == 9 and {p.end - p.start for p in big} == {100}
    assert split_ranges(ranges, 2) == ranges  # already enough


def test_max_records_per_partition() -> None:
    ranges = [QueueRange("T", "a", 0, 5, 106), QueueRange("T", "b", 1, 0, 3)]
    parts = split_ranges(ranges, 1, 25)
    assert max(p.end - p.start for p in parts) <= 25
    assert [p.end - p.start for p in parts if p.broker_name == "a"] == [20, 20, 20, 20, 21]
    assert offsets(parts) == offsets(ranges)
    # a range of one offset is never cut further
    assert split_ranges([QueueRange("T", "a", 0, 7, 8)], 4) == [QueueRange("T", "a", 0, 7, 8)]


# -- with Spark -----------------------------------------------------------------------

N = 200


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> tuple[str, list[bytes]]:
    create_topic(cluster, "PartsIn", queues=2)  # 4 queues of 50
    return "PartsIn", fill_queues(cluster.namesrv_addr, "PartsIn", N)


def _by_partition(rows: list[Any]) -> Counter[int]:
    return Counter(r.pid for r in rows)


def _check_exact(rows: list[Any], bodies: list[bytes]) -> None:
    assert Counter(bytes(r.body) for r in rows) == Counter(bodies)
    assert len({(r.brokerName, r.queueId, r.queueOffset) for r in rows}) == len(bodies)


def _stream(spark: Any, cluster: LocalCluster, tmp_path: Path, name: str, **opts: str) -> Any:
    reader = (
        spark.readStream.format("pymq")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", "PartsIn")
        .option("startingOffsets", "earliest")
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    query = (
        reader.load()
        .selectExpr("body", "brokerName", "queueId", "queueOffset", "spark_partition_id() as pid")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    return query, spark.sql(f"select * from {name}").collect()


def test_stream_min_partitions_splits_exactly(
    spark: Any, cluster: LocalCluster, tmp_path: Path, topic: tuple[str, list[bytes]]
) -> None:
    query, rows = _stream(spark, cluster, tmp_path, "parts_min", minPartitions="12")
    _check_exact(rows, topic[1])
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [N]  # one micro-batch, read by 12 tasks where there are 4 queues
    assert len(_by_partition(rows)) == 12


def test_stream_max_records_per_partition(
    spark: Any, cluster: LocalCluster, tmp_path: Path, topic: tuple[str, list[bytes]]
) -> None:
    query, rows = _stream(spark, cluster, tmp_path, "parts_max", maxRecordsPerPartition="15")
    _check_exact(rows, topic[1])
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [N]
    per_partition = _by_partition(rows)
    assert max(per_partition.values()) <= 15
    assert len(per_partition) == 4 * 4  # 50 offsets a queue: 4 pieces of 12 or 13


def test_batch_max_records_per_partition(
    spark: Any, cluster: LocalCluster, topic: tuple[str, list[bytes]]
) -> None:
    rows = (
        spark.read.format("pymq")
        .option("namesrv", cluster.namesrv_addr)
        .option("topic", "PartsIn")
        .option("maxRecordsPerPartition", "15")
        .load()
        .selectExpr("body", "brokerName", "queueId", "queueOffset", "spark_partition_id() as pid")
        .collect()
    )
    _check_exact(rows, topic[1])
    per_partition = _by_partition(rows)
    assert max(per_partition.values()) <= 15
    assert len(per_partition) == 4 * 4  # 50 offsets a queue: 4 pieces of 12 or 13
