"""Reads started and ended by store time: startingTimestamp, startingOffsetsByTimestamp
(and its strategy for a time past a queue's last message), endingTimestamp,
endingOffsetsByTimestamp, and their precedence over the offset options."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connector import Message, Producer, PullConsumer
from connector.local import LocalCluster
from tests.support.cluster import create_topic

TOPIC = "TimeT"
EARLY, LATE = 200, 120  # messages sent before and after the split time


def now_ms() -> int:
    return int(time.time() * 1000)


def send(ns: str, prefix: bytes, n: int) -> None:
    with Producer(group="time-fill", namesrv=ns) as producer:
        for k in range(0, n, 10):  # small batches: every queue gets some
            producer.send_batch(
                [Message(topic=TOPIC, body=prefix + b"%d" % i) for i in range(k, min(n, k + 10))]
            )


@pytest.fixture(scope="module")
def split(cluster: LocalCluster) -> Iterator[int]:
    """``TimeT`` holds EARLY messages stored before the split time and LATE after it."""
    ns = cluster.namesrv_addr
    create_topic(cluster, TOPIC)
    send(ns, b"early-", EARLY)
    # store times are the brokers' clocks (this machine's), in ms: the split is a ms no
    # early message can have and every later one is past (a bounded spin of ~2 ms)
    mid = now_ms() + 1
    while now_ms() <= mid:
        pass
    send(ns, b"late-", LATE)
    yield mid


def read(spark: Any, ns: str, **options: str) -> Counter[bytes]:
    df = spark.read.format("pymq").option("namesrv", ns).option("topic", TOPIC)
    return Counter(bytes(r.body) for r in df.options(**options).load().collect())


def early(n: int = EARLY) -> Counter[bytes]:
    return Counter(b"early-%d" % i for i in range(n))


def late() -> Counter[bytes]:
    return Counter(b"late-%d" % i for i in range(LATE))


def queues(ns: str) -> list[tuple[str, int, int]]:
    """(broker, queue id, max offset) of every queue of the topic."""
    with PullConsumer(group="time-check", namesrv=ns) as consumer:
        return [
            (mq.broker_name, mq.queue_id, consumer.max_offset(mq))
            for mq in consumer.fetch_queues(TOPIC)
        ]


def per_queue(ns: str, value: Any) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for broker, qid, _ in queues(ns):
        out.setdefault(TOPIC, {}).setdefault(broker, {})[str(qid)] = value
    return out


def test_ending_timestamp_reads_exactly_up_to_it(
    spark: Any, cluster: LocalCluster, split: int
) -> None:
    ns = cluster.namesrv_addr
    assert read(spark, ns, endingTimestamp=str(split)) == early()
    assert read(spark, ns, endingTimestamp="0") == Counter()
    # endingTimestamp wins over endingOffsets and endingOffsetsByTimestamp (Kafka's order)
    every = json.dumps(per_queue(ns, 0))
    assert read(
        spark, ns, endingTimestamp=str(split), endingOffsetsByTimestamp=every,
        endingOffsets=json.dumps(per_queue(ns, 1)),
    ) == early()  # fmt: skip
    assert read(spark, ns, endingOffsetsByTimestamp=json.dumps(per_queue(ns, split))) == early()


def test_starting_timestamp(spark: Any, cluster: LocalCluster, split: int) -> None:
    ns = cluster.namesrv_addr
    assert read(spark, ns, startingTimestamp=str(split)) == late()
    assert read(spark, ns, startingTimestamp="0") == early() + late()
    both = read(
        spark, ns, startingTimestamp=str(split), startingOffsetsByTimestamp=json.dumps(
            per_queue(ns, 0)), startingOffsets="earliest",
    )  # fmt: skip
    assert both == late()  # startingTimestamp first


def test_starting_offsets_by_timestamp_per_queue(
    spark: Any, cluster: LocalCluster, split: int
) -> None:
    ns = cluster.namesrv_addr
    spec = per_queue(ns, split)
    broker, qid, _ = queues(ns)[0]
    spec[TOPIC][broker][str(qid)] = 0  # this one queue from its start, the others from split
    df = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", TOPIC)
        .option("startingOffsetsByTimestamp", json.dumps(spec))
        .option("startingOffsets", "latest")  # ByTimestamp wins
        .load()
    )
    everything = spark.read.format("pymq").option("namesrv", ns).option("topic", TOPIC).load()
    expected = Counter(
        bytes(r.body)
        for r in everything.collect()
        if (r.brokerName, r.queueId) == (broker, qid) or r.body.startswith(b"late-")
    )
    assert expected - late()  # the queue chosen holds early messages too
    assert Counter(bytes(r.body) for r in df.collect()) == expected

    del spec[TOPIC][broker][str(qid)]  # as Kafka: the JSON must name every queue read
    with pytest.raises(Exception, match=f"does not name {TOPIC}:{broker}:{qid}"):
        read(spark, ns, startingOffsetsByTimestamp=json.dumps(spec))


def test_timestamp_past_the_end(
    spark: Any, cluster: LocalCluster, split: int, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    future = str(now_ms() + 3_600_000)
    with pytest.raises(Exception) as failed:
        read(spark, ns, startingTimestamp=future)
    message = str(failed.value)
    assert f"has no message stored at or after {future} ms" in message, message[-3000:]
    assert f"queue {TOPIC}:broker-" in message and "Strategy=latest" in message

    spec = json.dumps(per_queue(ns, int(future)))
    with pytest.raises(Exception, match="startingOffsetsByTimestamp: queue TimeT:broker-"):
        read(spark, ns, startingOffsetsByTimestamp=spec)

    # latest: such a queue starts at its end; a stream then reads only what comes after
    assert read(spark, ns, startingTimestamp=future,
                startingOffsetsByTimestampStrategy="latest") == Counter()  # fmt: skip
    query = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", TOPIC)
        .option("startingOffsetsByTimestamp", spec)
        .option("startingOffsetsByTimestampStrategy", "latest")
        .load()
        .select("body")
        .writeStream.format("memory")
        .queryName("time_latest")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        query.processAllAvailable()  # the start offsets are fixed by the first batch
        with Producer(group="time-more", namesrv=ns) as producer:
            producer.send_batch([Message(topic=TOPIC, body=b"after-%d" % i) for i in range(7)])
        query.processAllAvailable()
    finally:
        query.stop()
    got = Counter(bytes(r.body) for r in spark.table("time_latest").collect())
    assert got == Counter(b"after-%d" % i for i in range(7))


def test_empty_queues_do_not_fail_a_timestamp_start(spark: Any, cluster: LocalCluster) -> None:
    # one batch request fills one queue: the topic's other queues hold nothing, and a
    # start by time is not "past their last message" (they have none)
    ns = cluster.namesrv_addr
    create_topic(cluster, "TimeSparse")
    before = now_ms()
    with Producer(group="time-sparse", namesrv=ns) as producer:
        producer.send_batch([Message(topic="TimeSparse", body=b"s-%d" % i) for i in range(5)])
    df = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", "TimeSparse")
        .option("startingTimestamp", str(before))
        .load()
    )
    rows = df.collect()
    assert Counter(bytes(r.body) for r in rows) == Counter(b"s-%d" % i for i in range(5))
    assert len({(r.brokerName, r.queueId) for r in rows}) == 1
