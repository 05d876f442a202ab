"""Spark reads through a master's death: from its slave, without a gap or a repeat."""

from __future__ import annotations

import json
import os
import re
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
from connector.local import LocalCluster
from connector.protocol.message import MessageQueue
from tests.support.waits import wait_until

TOPIC = "Failover"
_NO_NEW = re.compile(r'^pymq_pull_requests_total\{status="NO_NEW_MSG"\} (\S+)$', re.M)


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
        wait_until(lambda: slaves_in_sync(c), 30, what="both slaves in sync")
        yield c


def slaves_in_sync(cluster: LocalCluster) -> bool:
    for name in ("broker-a", "broker-b"):
        ha = httpx.get(f"http://{cluster.broker(name).http_addr}/health").json()["ha"]
        if not any(s["in_sync"] for s in ha["slaves"]):
            return False
    return True


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

        wait_until(lambda: len(rows()) > 200, 60, what="rows before the kill")
        ha_cluster.broker("broker-a").kill()  # broker-a's queues: read from its slave now
        killed_at = len(stored)
        wait_until(lambda: len(stored) > killed_at + 300, 60, what="sends to broker-b meanwhile")
        before_restart = set(stored)
        wait_until(lambda: before_restart <= set(rows()), 60, what="the stream past the kill")
        ha_cluster.restart_broker("broker-a", crash=True)  # same store, new port
        restarted_at = len(stored)
        wait_until(lambda: len(stored) > restarted_at + 300, 60, what="sends after the restart")
    finally:
        stop.set()
        sender.join(30)
    try:

        def every() -> set[tuple[str, int, int]]:
            ends = queue_ends(ha_cluster, TOPIC)
            return {(b, q, o) for (b, q), end in ends.items() for o in range(end)}

        # no gap: each message of each queue (a send the producer retried elsewhere after
        # a broken connection may be stored twice: two messages, each read once)
        wait_until(lambda: set(positions()) == every(), 90, what="every stored message read")
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

        wait_until(probe, 30, what="SEND_OK from the masters in sync")
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


def test_a_reader_waits_for_a_slave_short_of_its_range(
    spark: Any, ha_cluster: LocalCluster
) -> None:
    """A range the slave has only part of (its master down) is not lost at once: the
    reader long-polls the slave, which gets the rest once the master is back."""
    ns = ha_cluster.namesrv_addr
    topic = "FailoverShort"
    create_topic(ha_cluster, topic)
    mq = MessageQueue(topic, "broker-a", 0)
    slave = ha_cluster.broker("broker-a-s1")

    def held_pulls() -> int:
        text = httpx.get(f"http://{slave.http_addr}/metrics", timeout=10).text
        return sum(int(float(v)) for v in _NO_NEW.findall(text))

    def send(count: int, first: int) -> None:
        with Producer(group="fo-short", namesrv=ns) as producer:
            for i in range(first, first + count):

                def stored(i: int = i) -> bool:
                    try:  # to the restarted master: once its route is back
                        res = producer.send(Message(topic=topic, body=b"s-%d" % i), queue=mq)
                    except PyMQError:
                        return False
                    return res.status in (SendStatus.SEND_OK, SendStatus.SLAVE_NOT_AVAILABLE,
                                          SendStatus.FLUSH_SLAVE_TIMEOUT)  # fmt: skip

                wait_until(stored, 60, what=f"message {i} stored")

    sent = 0
    for fmt in ("pymq", "pymq-jvm"):
        # the slave has all of these (and the topic): in sync with the master (restarted
        # by the tests before)
        wait_until(lambda: slaves_in_sync(ha_cluster), 60, what="both slaves in sync")
        send(30, sent)
        sent += 30
        ha_cluster.broker("broker-a").kill()
        want = sent + 20  # 20 more than the slave has: sent once the master is back
        ending = json.dumps({topic: {"broker-a": {"0": want}}})
        result: dict[str, Any] = {}

        def read(fmt: str = fmt, ending: str = ending, result: dict[str, Any] = result) -> None:
            try:
                df = (
                    spark.read.format(fmt).option("namesrv", ns).option("topic", topic)
                    .option("endingOffsets", ending).load()
                )  # fmt: skip
                result["rows"] = df.select("queueOffset", "body").collect()
            except Exception as exc:  # noqa: BLE001 - reported by the assertions below
                result["error"] = f"{type(exc).__name__}: {exc}"

        before = held_pulls()
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            wait_until(
                lambda before=before, reader=reader: held_pulls() > before or not reader.is_alive(),
                60,
                what=f"{fmt}: a pull held at the slave's end",
            )  # fmt: skip
            assert "error" not in result, result  # the short slave was waited for
        finally:
            ha_cluster.restart_broker("broker-a", crash=True)
        send(20, sent)
        sent += 20
        reader.join(60)
        assert not reader.is_alive(), f"{fmt}: the read did not end"
        assert "error" not in result, result
        rows = result["rows"]
        assert sorted(r.queueOffset for r in rows) == list(range(want)), fmt
        assert sorted(bytes(r.body) for r in rows) == sorted(b"s-%d" % i for i in range(want))
