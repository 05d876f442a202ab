"""A streaming read while the topic changes under it: more queues, a new broker, a broker down."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from connector import Admin, Message, MessageQueue, Producer
from connector.errors import TopicNotExistError
from connector.local import LocalCluster


def put_topic(addr: str, topic: str, queues: int) -> None:
    body = {"read_queue_nums": queues, "write_queue_nums": queues, "perm": 6}
    r = httpx.put(f"http://{addr}/topics/{topic}", json=body, timeout=10)
    assert r.status_code == 200, r.text


def send(ns: str, topic: str, bodies: list[bytes], queues: list[MessageQueue]) -> None:
    with Producer(group="topology", namesrv=ns) as producer:
        for i, body in enumerate(bodies):
            producer.send(Message(topic=topic, body=body), queue=queues[i % len(queues)])


def wait_queues(admin: Admin, topic: str, want: set[tuple[str, int]]) -> list[MessageQueue]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            route = admin.topic_route(topic)
        except TopicNotExistError:  # the broker registers a new topic a moment later
            time.sleep(0.05)
            continue
        have = {(q.broker_name, i) for q in route.queues for i in range(q.write_queue_nums)}
        if have == want:
            return [MessageQueue(topic, b, i) for b, i in sorted(have)]
        time.sleep(0.05)
    raise AssertionError(f"route of {topic} never became {sorted(want)}")


def read_bodies(spark: Any) -> Counter[bytes]:
    return Counter(bytes(r.body) for r in spark.sql("select body from topology").collect())


def test_new_queues_new_broker_and_a_broker_down(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns, topic = cluster.namesrv_addr, "StreamTopology"
    admin = Admin(namesrv=ns)
    a = cluster.broker("broker-a")
    put_topic(a.http_addr, topic, 2)
    queues = wait_queues(admin, topic, {("broker-a", 0), ("broker-a", 1)})
    send(ns, topic, [b"first-%d" % i for i in range(40)], queues)
    query = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
        .select("body")
        .writeStream.format("memory")
        .queryName("topology")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        assert read_bodies(spark) == Counter(b"first-%d" % i for i in range(40))

        # two more queues on broker-a and the topic on broker-b: all read from their start
        put_topic(a.http_addr, topic, 4)
        put_topic(cluster.broker("broker-b").http_addr, topic, 2)
        want = {("broker-a", q) for q in range(4)} | {("broker-b", q) for q in range(2)}
        queues = wait_queues(admin, topic, want)
        send(ns, topic, [b"second-%d" % i for i in range(60)], queues)
        query.processAllAvailable()
        expected = Counter(b"first-%d" % i for i in range(40)) + Counter(
            b"second-%d" % i for i in range(60)
        )
        assert read_bodies(spark) == expected

        # broker-b down: the query keeps reading broker-a, and re-reads nothing later
        cluster.broker("broker-b").kill()
        on_a = [q for q in queues if q.broker_name == "broker-a"]
        send(ns, topic, [b"third-%d" % i for i in range(20)], on_a)
        query.processAllAvailable()
        assert query.isActive, query.exception()
        expected += Counter(b"third-%d" % i for i in range(20))
        assert read_bodies(spark) == expected
        cluster.restart_broker("broker-b", crash=True)
        queues = wait_queues(admin, topic, want)
        send(ns, topic, [b"fourth-%d" % i for i in range(12)], queues)
        query.processAllAvailable()
        expected += Counter(b"fourth-%d" % i for i in range(12))
        assert read_bodies(spark) == expected  # exactly once: nothing of broker-b twice
    finally:
        query.stop()
        admin.close()
