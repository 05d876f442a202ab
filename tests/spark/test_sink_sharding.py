"""The sink's shardingKey and queueId columns: one queue per key, in row order, in batches."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import httpx
import pytest

from connector import PullConsumer
from connector.local import LocalCluster
from connector.spark.routing import shard_index
from tests.support.cluster import create_topic

KEYS = 50
_SENDS = re.compile(r'^pymq_send_requests_total\{api="\w+",outcome="PUT_OK"\} (\S+)$', re.M)
_MESSAGES = re.compile(r"^pymq_send_messages_total (\S+)$", re.M)


def send_requests(cluster: LocalCluster) -> tuple[int, int]:
    """Send requests the brokers stored so far (every API: a single message is a batch of
    one on the wire), and the messages those held."""
    requests = messages = 0
    for b in cluster.brokers:
        text = httpx.get(f"http://{b.http_addr}/metrics", timeout=10).text
        requests += sum(int(float(v)) for v in _SENDS.findall(text))
        messages += sum(int(float(v)) for v in _MESSAGES.findall(text))
    return requests, messages


def read_queues(ns: str, topic: str) -> dict[tuple[str, int], list[Any]]:
    """Every message of ``topic``, per (broker, queue id), in queue order."""
    out: dict[tuple[str, int], list[Any]] = {}
    with PullConsumer(group="sharding-check", namesrv=ns) as consumer:
        for mq in consumer.fetch_queues(topic):
            msgs: list[Any] = []
            end = consumer.max_offset(mq)
            while len(msgs) < end:
                res = consumer.pull(mq, len(msgs), 5000)
                assert res.messages, f"{mq}: no messages at {len(msgs)} of {end}"
                msgs += res.messages
            out[(mq.broker_name, mq.queue_id)] = msgs
    return out


def check_sharded(queues: dict[tuple[str, int], list[Any]], rows: int) -> None:
    """Every key in one queue, and each task's rows of a key in row order."""
    key_queue: dict[str, tuple[str, int]] = {}
    last: dict[tuple[str, str], int] = {}
    seen = 0
    for where, msgs in queues.items():
        for m in msgs:
            key, task, seq = m.body.decode().split(":")
            assert key_queue.setdefault(key, where) == where, f"{key} in {where} and elsewhere"
            assert last.get((key, task), -1) < int(seq), f"{key} out of order in {where}"
            last[(key, task)] = int(seq)
            seen += 1
    assert seen == rows and len(key_queue) == KEYS
    assert len(set(key_queue.values())) > 1  # the keys spread over the queues


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    create_topic(cluster, "SparkShard")  # 4 queues on each of 2 brokers
    return "SparkShard"


def sharded_frame(spark: Any, rows: int, *extra: str) -> Any:
    # body "key:task:sequence", the sequence rising with the row within the task
    return spark.range(rows, numPartitions=2).selectExpr(
        f"concat('k', id % {KEYS}) as shardingKey",
        "cast(concat('k', id % 50, ':', spark_partition_id(), ':', id) as binary) as body",
        *extra,
    )


def test_sharding_key_rows_stay_in_one_queue_in_order_and_in_batches(
    spark: Any, cluster: LocalCluster, topic: str
) -> None:
    ns = cluster.namesrv_addr
    rows = 100_000
    before = send_requests(cluster)
    sharded_frame(spark, rows).write.mode("append").format("pymq").option("namesrv", ns).option(
        "topic", topic
    ).save()
    after = send_requests(cluster)
    queues = read_queues(ns, topic)
    check_sharded(queues, rows)
    # the queue of a key is the one Producer.send(sharding_key=) picks
    with PullConsumer(group="sharding-check", namesrv=ns) as consumer:
        order = sorted(consumer.fetch_queues(topic))
    for (broker, qid), msgs in queues.items():
        for m in msgs[:5]:
            mq = order[shard_index(m.body.decode().split(":")[0], len(order))]
            assert (mq.broker_name, mq.queue_id) == (broker, qid)
    # batches: 2 tasks x Arrow batches of 10,000 rows x 8 queues, never a request per row
    batches = after[0] - before[0]
    assert after[1] - before[1] == rows
    assert 0 < batches <= 2 * 10 * 8, batches


def test_sharding_with_row_columns_and_pinned_queue_ids(spark: Any, cluster: LocalCluster) -> None:
    # keys/properties take the row-by-row path: still one queue per key, in order, batched
    create_topic(cluster, "SparkShardRows")
    ns = cluster.namesrv_addr
    rows = 20_000
    before = send_requests(cluster)
    sharded_frame(spark, rows, "map('n', cast(id as string)) as properties").write.mode(
        "append"
    ).format("pymq").option("namesrv", ns).option("topic", "SparkShardRows").save()
    after = send_requests(cluster)
    check_sharded(read_queues(ns, "SparkShardRows"), rows)
    assert after[1] - before[1] == rows
    assert 0 < after[0] - before[0] <= 2 * 8 * 2, after[0] - before[0]

    # queueId pins the queue id (on a broker that has it), in batches too
    create_topic(cluster, "SparkPinned")
    spark.range(4_000, numPartitions=2).selectExpr(
        "cast(id as string) as body", "cast(id % 2 + 1 as int) as queueId"
    ).write.mode("append").format("pymq").option("namesrv", ns).option(
        "topic", "SparkPinned"
    ).save()
    pinned = read_queues(ns, "SparkPinned")
    by_id: dict[int, int] = defaultdict(int)
    for (_broker, qid), msgs in pinned.items():
        for m in msgs:
            assert int(m.body) % 2 + 1 == qid
        by_id[qid] += len(msgs)
    assert dict(by_id) == {0: 0, 1: 2_000, 2: 2_000, 3: 0}


def test_bad_queue_id_is_refused(spark: Any, cluster: LocalCluster, topic: str) -> None:
    ns = cluster.namesrv_addr
    frame = spark.range(3).selectExpr("cast(id as string) as body", "9 as queueId")
    with pytest.raises(Exception, match="no writable queue 9"):
        frame.write.mode("append").format("pymq").option("namesrv", ns).option(
            "topic", topic
        ).save()
