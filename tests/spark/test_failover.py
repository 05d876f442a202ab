"""Spark reads through a master's death: from its slave, without a gap or a repeat."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connector import Message, Producer, SendStatus
from connector.errors import PyMQError
from connector.server.local import LocalCluster

TOPIC = "Failover"


def wait_until(pred: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, f"{what} not within {timeout_s} s"
        time.sleep(0.1)


def create_topic(cluster: LocalCluster, topic: str) -> None:
    """``topic`` (2 queues) on both masters."""
    for name in ("broker-a", "broker-b"):
        r = httpx.put(
            f"http://{cluster.broker(name).http_addr}/topics/{topic}",
            json={"read_queue_nums": 2, "write_queue_nums": 2, "perm": 6},
            timeout=10,
        )
        assert r.status_code == 200, r.text


def queue_ends(cluster: LocalCluster, topic: str) -> dict[tuple[str, int], int]:
    """Each queue's end, from its master: (broker name, queue id) -> max offset."""
    out = {}
    for name in ("broker-a", "broker-b"):
        r = httpx.get(f"http://{cluster.broker(name).http_addr}/topics/{topic}", timeout=10)
        for q in r.json()["queues"]:
            out[(name, q["queue_id"])] = q["max_offset"]
    return out


@pytest.fixture(scope="module")
def ha_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two SYNC_MASTERs with a slave each."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500", PYMQ_BROKER_ROLE="SYNC_MASTER")
    with LocalCluster(tmp_path_factory.mktemp("ha"), brokers=2, slaves=1, env=env) as c:
        create_topic(c, TOPIC)

        def in_sync() -> bool:
            for name in ("broker-a", "broker-b"):
                ha = httpx.get(f"http://{c.broker(name).http_addr}/health").json()["ha"]
                if not any(s["in_sync"] for s in ha["slaves"]):
                    return False
            return True

        wait_until(in_sync, 30, "both slaves in sync")
        yield c


def test_a_stream_reads_on_through_a_masters_death_without_gap_or_repeat(
    spark: Any, ha_cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = ha_cluster.namesrv_addr
    stored: list[bytes] = []  # every message a send answered as stored
    stop = threading.Event()

    def produce() -> None:
        n = 0
        with Producer(group="fo", namesrv=ns, send_latency_fault_enable=True) as producer:
            while not stop.is_set():
                body = b"row-%06d" % n
                n += 1
                try:
                    res = producer.send(Message(topic=TOPIC, body=body))
                except PyMQError:
                    continue  # not stored (the dead master's queue, no retry left)
                if res.status in (SendStatus.SEND_OK, SendStatus.SLAVE_NOT_AVAILABLE,
                                  SendStatus.FLUSH_SLAVE_TIMEOUT):  # fmt: skip
                    stored.append(body)
                time.sleep(0.002)

    stream = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        stream.select("brokerName", "queueId", "queueOffset", "body")
        .writeStream.format("memory")
        .queryName("failover_rows")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    sender = threading.Thread(target=produce, daemon=True)
    sender.start()
    try:

        def rows() -> Counter[bytes]:
            got = spark.sql("select body from failover_rows").collect()
            return Counter(bytes(r.body) for r in got)

        def positions() -> Counter[tuple[str, int, int]]:
            got = spark.sql("select brokerName, queueId, queueOffset from failover_rows")
            return Counter((r.brokerName, r.queueId, r.queueOffset) for r in got.collect())

        wait_until(lambda: len(rows()) > 200, 60, "rows before the kill")
        ha_cluster.broker("broker-a").kill()  # broker-a's queues: read from its slave now
        killed_at = len(stored)
        wait_until(lambda: len(stored) > killed_at + 300, 60, "sends to broker-b meanwhile")
        before_restart = set(stored)
        wait_until(lambda: before_restart <= set(rows()), 60, "the stream past the kill")
        ha_cluster.restart_broker("broker-a", crash=True)  # same store, new port
        restarted_at = len(stored)
        wait_until(lambda: len(stored) > restarted_at + 300, 60, "sends after the restart")
    finally:
        stop.set()
        sender.join(30)
    try:

        def every() -> set[tuple[str, int, int]]:
            ends = queue_ends(ha_cluster, TOPIC)
            return {(b, q, o) for (b, q), end in ends.items() for o in range(end)}

        # no gap: each message of each queue (a send the producer retried elsewhere after
        # a broken connection may be stored twice: two messages, each read once)
        wait_until(lambda: set(positions()) == every(), 90, "every stored message read")
        got = positions()
        assert not [k for k, n in got.items() if n > 1], "messages read twice"
        assert set(stored) <= set(rows()), "a send answered as stored is missing"
        assert query.exception() is None
    finally:
        query.stop()


def test_batch_reads_of_both_sources_while_a_master_is_down(
    spark: Any, ha_cluster: LocalCluster
) -> None:
    ns = ha_cluster.namesrv_addr
    topic = "FailoverBatch"
    create_topic(ha_cluster, topic)
    sent: list[bytes] = []
    with Producer(group="fo-batch", namesrv=ns) as producer:

        def probe() -> bool:
            status = producer.send(Message(topic=topic, body=b"probe")).status
            sent.append(b"probe")  # stored either way (SEND_OK or SLAVE_NOT_AVAILABLE)
            return status is SendStatus.SEND_OK

        wait_until(probe, 30, "SEND_OK from the masters in sync")
        for i in range(400):
            res = producer.send(Message(topic=topic, body=b"b-%d" % i))
            assert res.status is SendStatus.SEND_OK, res
            sent.append(b"b-%d" % i)
    ha_cluster.broker("broker-a").kill()
    try:
        for fmt in ("pymq", "pymq-jvm"):
            df = spark.read.format(fmt).option("namesrv", ns).option("topic", topic).load()
            got = Counter(bytes(r.body) for r in df.select("body").collect())
            assert got == Counter(sent), fmt
    finally:
        ha_cluster.restart_broker("broker-a", crash=True)
