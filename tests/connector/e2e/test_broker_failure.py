"""A broker killed with -9 during a synchronous send loop costs the application nothing."""

from __future__ import annotations

import threading
import time

from connector.client.consumer import PullConsumer
from connector.client.producer import Producer
from connector.client.results import SendResult
from connector.errors import PyMQError
from connector.local import LocalCluster
from connector.protocol.message import Message, MessageExt, MessageQueue
from connector.protocol.status import PullStatus
from tests.support.waits import wait_until

TOPIC = "FailOver"


def create_topic_everywhere(cluster: LocalCluster) -> None:
    import httpx

    for b in cluster.brokers:
        r = httpx.put(
            f"http://{b.http_addr}/topics/{TOPIC}",
            json={"read_queue_nums": 4, "write_queue_nums": 4, "perm": 6},
            timeout=10,
        )
        assert r.status_code == 200, r.text


def route_brokers(producer: Producer) -> int:
    route = producer.namesrv.topic_route(TOPIC)
    return 0 if route is None else len(route.brokers)


def queue_contents(consumer: PullConsumer, mq: MessageQueue) -> dict[int, MessageExt]:
    out: dict[int, MessageExt] = {}
    offset = 0
    while True:
        res = consumer.pull(mq, offset, 2000)
        if res.status is not PullStatus.FOUND:
            return out
        for m in res.messages:
            out[m.queue_offset] = m
        offset = res.next_begin_offset


def test_kill_9_during_sync_sends_loses_nothing(cluster: LocalCluster) -> None:
    create_topic_everywhere(cluster)
    ns = cluster.namesrv_addr
    results: list[SendResult] = []
    failures: list[BaseException] = []
    with Producer(group="failover", namesrv=ns) as producer:
        wait_until(lambda: route_brokers(producer) == 2, 10, what="a route to both brokers")
        killed = threading.Event()

        def killer() -> None:
            while len(results) < 3000:
                time.sleep(0.01)
            cluster.broker("broker-b").kill()
            killed.set()

        t = threading.Thread(target=killer)
        t.start()
        for i in range(10_000):
            try:
                results.append(producer.send(Message(topic=TOPIC, body=b"n%05d" % i)))
            except PyMQError as exc:  # the assertion below reports them
                failures.append(exc)
        t.join(30)
        assert killed.is_set()
    assert failures == []
    assert len(results) == 10_000
    sent_to = {r.queue.broker_name for r in results[5000:]}
    assert sent_to == {"broker-a"}  # once the route dropped broker-b, or by retries

    cluster.restart_broker("broker-b")
    with PullConsumer(group="check", namesrv=ns) as consumer:
        wait_until(
            lambda: len({q.broker_name for q in consumer.fetch_queues(TOPIC)}) == 2,
            15,
            what="queues on both brokers",
        )
        stored: dict[tuple[str, int], dict[int, MessageExt]] = {}
        for mq in consumer.fetch_queues(TOPIC):
            stored[(mq.broker_name, mq.queue_id)] = queue_contents(consumer, mq)
    for i, r in enumerate(results):
        m = stored[(r.queue.broker_name, r.queue.queue_id)].get(r.queue_offset)
        assert m is not None, f"result {i} points at nothing: {r}"
        assert m.msg_id == r.msg_id and m.body == b"n%05d" % i


def test_kill_9_during_async_sends_retries_on_the_other_broker(cluster: LocalCluster) -> None:
    """Async sends also retry on another broker when the connection fails (rocketmq#3556)."""
    create_topic_everywhere(cluster)
    ns = cluster.namesrv_addr
    with Producer(group="failover-async", namesrv=ns) as producer:
        wait_until(lambda: route_brokers(producer) == 2, 15, what="a route to both brokers")
        first = [producer.send_async(Message(topic=TOPIC, body=b"a%05d" % i)) for i in range(500)]
        for f in first:
            f.result(30)
        cluster.broker("broker-b").kill()
        later = [producer.send_async(Message(topic=TOPIC, body=b"b%05d" % i)) for i in range(2000)]
        errors = [f.exception(60) for f in later]
    assert [e for e in errors if e is not None] == []
    assert {f.result().queue.broker_name for f in later} <= {"broker-a", "broker-b"}
    cluster.restart_broker("broker-b")


def test_kill_9_during_auto_batched_sends_loses_nothing(cluster: LocalCluster) -> None:
    """Auto-batches take the same send path: a batch that hits the dead broker is
    retried whole on the other, and every message's own result points at it."""
    create_topic_everywhere(cluster)
    ns = cluster.namesrv_addr
    sent: list[tuple[bytes, SendResult]] = []
    lock = threading.Lock()
    with Producer(group="failover-batch", namesrv=ns, auto_batch=True) as producer:
        wait_until(lambda: route_brokers(producer) == 2, 15, what="a route to both brokers")
        first = [producer.send_async(Message(topic=TOPIC, body=b"c%05d" % i)) for i in range(500)]
        for i, f in enumerate(first):
            sent.append((b"c%05d" % i, f.result(30)))
        cluster.broker("broker-b").kill()

        def sync_sender(k: int) -> None:
            for i in range(200):
                body = b"s%d-%05d" % (k, i)
                r = producer.send(Message(topic=TOPIC, body=body))
                with lock:
                    sent.append((body, r))

        threads = [threading.Thread(target=sync_sender, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        later = [producer.send_async(Message(topic=TOPIC, body=b"d%05d" % i)) for i in range(2000)]
        for t in threads:
            t.join(120)
        for i, f in enumerate(later):
            assert f.exception(60) is None
            sent.append((b"d%05d" % i, f.result()))
    assert len(sent) == 500 + 800 + 2000
    cluster.restart_broker("broker-b")
    with PullConsumer(group="check-batch", namesrv=ns) as consumer:
        wait_until(
            lambda: len({q.broker_name for q in consumer.fetch_queues(TOPIC)}) == 2,
            15,
            what="queues on both brokers",
        )
        stored = {
            (mq.broker_name, mq.queue_id): queue_contents(consumer, mq)
            for mq in consumer.fetch_queues(TOPIC)
        }
    for body, r in sent:
        m = stored[(r.queue.broker_name, r.queue.queue_id)].get(r.queue_offset)
        assert m is not None and m.body == body and m.msg_id == r.msg_id
