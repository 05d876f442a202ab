"""Stream rate options: minMessagesPerTrigger/maxTriggerDelay, maxBytesPerTrigger, and the
latest offset Spark shows next to a batch's end (the lag). Pure rules first, then Spark."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
)

from connector.local import LocalCluster
from connector.spark.limits import Admission, TriggerLimits, default_read_limit, split_bytes
from connector.spark.options import ReadOptions
from tests.support.cluster import create_topic
from tests.support.spark import fill_queues
from tests.support.waits import wait_until


def opts(**extra: str) -> ReadOptions:
    return ReadOptions.parse({"namesrv": "127.0.0.1:9876", "topic": "T", **extra}, stream=True)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- the rules, without Spark ---------------------------------------------------------


def test_default_read_limit_and_all_available() -> None:
    assert default_read_limit(opts()) == ReadAllAvailable()
    assert default_read_limit(opts(maxOffsetsPerTrigger="7")) == ReadMaxRows(7)
    assert default_read_limit(opts(maxBytesPerTrigger="900")) == ReadMaxBytes(900)
    assert default_read_limit(opts(minOffsetsPerTrigger="5")) == ReadMinRows(5)
    both = opts(minMessagesPerTrigger="5", maxMessagesPerTrigger="9", maxBytesPerTrigger="99")
    # Spark passes one limit back; any but ReadAllAvailable applies all the options
    limits = TriggerLimits.of(both, default_read_limit(both))
    assert limits == TriggerLimits(9, 5, 15 * 60 * 1000, 99)
    assert TriggerLimits.of(both, ReadAllAvailable()) is None  # e.g. Trigger.Once


def test_min_rows_waits_until_max_trigger_delay() -> None:
    clock = Clock()
    adm = Admission(clock=clock)
    limits = TriggerLimits.of(
        opts(minMessagesPerTrigger="10", maxTriggerDelay="2s"), ReadMinRows(10)
    )
    start = {"a": 0, "b": 0}
    assert adm.end(start, {"a": 3, "b": 0}, limits) == {"a": 3, "b": 0}  # first: not delayed
    start = {"a": 3, "b": 0}
    clock.now += 1.0
    assert adm.end(start, {"a": 5, "b": 2}, limits) == start  # 4 new < 10: skipped
    clock.now += 0.9
    assert adm.end(start, {"a": 5, "b": 2}, limits) == start
    clock.now += 0.1  # 2 s since the last batch: read what there is
    assert adm.end(start, {"a": 5, "b": 2}, limits) == {"a": 5, "b": 2}
    start = {"a": 5, "b": 2}
    clock.now += 0.1
    assert adm.end(start, {"a": 10, "b": 7}, limits) == {"a": 10, "b": 7}  # 10 new: at once
    clock.now += 0.1
    # AvailableNow must reach its target: no delay there
    assert adm.end({"a": 10}, {"a": 11}, limits, available_now=True) == {"a": 11}


def test_min_and_max_rows_together() -> None:
    clock = Clock()
    adm = Admission(clock=clock)
    limits = TriggerLimits(max_rows=4, min_rows=3, max_trigger_delay_ms=1000)
    adm.end({"a": 0}, {"a": 0}, limits)  # the first trigger
    assert adm.end({"a": 0}, {"a": 2}, limits) == {"a": 0}
    assert adm.end({"a": 0}, {"a": 50}, limits) == {"a": 4}


def test_split_bytes() -> None:
    start = {"a": 0, "b": 100}
    latest = {"a": 100, "b": 200}
    # 100 x 10 B + 100 x 90 B = 10,000 B backlog; 1,000 B is a tenth of each queue
    assert split_bytes(start, latest, {"a": 10.0, "b": 90.0}, 1000) == {"a": 10, "b": 110}
    assert split_bytes(start, latest, {"a": 10.0, "b": 90.0}, 10_000) == latest
    # a queue not sampled counts with the others' mean; nothing sampled: no cap
    assert split_bytes(start, latest, {"a": 50.0}, 1000) == {"a": 10, "b": 110}
    assert split_bytes(start, latest, {}, 1000) == latest
    # one message larger than the cap is still read (the stream must go on)
    assert split_bytes({"a": 0}, {"a": 5}, {"a": 5000.0}, 1000) == {"a": 1}


# -- with Spark -----------------------------------------------------------------------


def _ms(progress: Any) -> float:
    return datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp() * 1000


def test_min_messages_waits_for_max_trigger_delay(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "MinIn", queues=1)
    fill_queues(ns, "MinIn", 3)
    delay_ms = 4000
    query = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "MinIn")
        .option("startingOffsets", "earliest")
        .option("minMessagesPerTrigger", "5")
        .option("maxTriggerDelay", "4s")
        .load()
        .select("body")
        .writeStream.format("memory")
        .queryName("min_in")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:

        def rows() -> int:
            return int(spark.sql("select count(*) from min_in").collect()[0][0])

        # the first trigger is not delayed (as Kafka's): 3 < 5 messages, read at once
        wait_until(lambda: rows() == 3, 120, what="the first batch never came")
        sent_ms = []
        for total, n in ((5, 2), (7, 2), (13, 6)):  # 2 and 2 wait for the delay, 6 do not
            sent_ms.append(time.time() * 1000)
            fill_queues(ns, "MinIn", n)
            wait_until(lambda total=total: rows() == total, 60, what=f"{n} messages never read")

        # the memory sink shows a batch's rows before Spark records the batch's progress
        def reported() -> int:
            return sum(p["numInputRows"] for p in query.recentProgress)

        wait_until(lambda: reported() == 13, 30, what="the last batch's progress never came")
        batches = [p for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert [p["numInputRows"] for p in batches] == [3, 2, 2, 6]
    at = [_ms(p) for p in batches]
    # the delay counts from the last batch's latestOffset call, made early in its trigger
    # (progress timestamps are trigger starts)
    slack = 500
    assert at[1] - at[0] >= delay_ms - slack and at[2] - at[1] >= delay_ms - slack, at
    # batch 1 ends within ~1 s of its call, the test sees it soon after and sends: the 2
    # messages wait most of the delay (a trigger comes every 100 ms: without the minimum
    # they would be read at once)
    assert at[2] - sent_ms[1] >= delay_ms / 3, (at, sent_ms)
    assert at[3] - sent_ms[2] < delay_ms - slack, (at, sent_ms)  # 6 >= 5: no waiting


def test_max_bytes_per_trigger_caps_batches_and_lag_shows(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "BytesIn", queues=2)
    bodies = fill_queues(ns, "BytesIn", 60, body_bytes=1000)
    query = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "BytesIn")
        .option("startingOffsets", "earliest")
        .option("maxBytesPerTrigger", "10000")  # 10 bodies of 1,000 B
        .load()
        .select("body")
        .writeStream.format("memory")
        .queryName("bytes_in")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    got = [bytes(r.body) for r in spark.sql("select body from bytes_in").collect()]
    assert Counter(got) == Counter(bodies)
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    sizes = [p["numInputRows"] for p in batches]
    assert sum(sizes) == 60 and max(sizes) <= 10 and len(sizes) >= 6, sizes

    # reportLatestOffset: Spark shows the queues' ends next to the batch's end
    def total(offsets: Any) -> int:
        parsed = json.loads(offsets) if isinstance(offsets, str) else offsets
        return sum(o for brokers in parsed.values() for qs in brokers.values() for o in qs.values())

    first = batches[0]["sources"][0]
    assert total(first["latestOffset"]) == 60
    assert total(first["latestOffset"]) - total(first["endOffset"]) == 60 - sizes[0]


def test_max_offsets_alias_caps_batches(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "AliasIn", queues=2)
    bodies = fill_queues(ns, "AliasIn", 30)
    query = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "AliasIn")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "7")  # Kafka's name
        .load()
        .select("body")
        .writeStream.format("memory")
        .queryName("alias_in")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    got = [bytes(r.body) for r in spark.sql("select body from alias_in").collect()]
    assert Counter(got) == Counter(bodies)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert max(sizes) <= 7 and len(sizes) == 5, sizes
