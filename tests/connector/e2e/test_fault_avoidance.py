"""Latency fault avoidance with real processes: a dead broker is avoided, then used again."""

from __future__ import annotations

import threading

import httpx

from connector import Message, Producer
from connector.client.results import SendContext
from connector.local import LocalCluster
from tests.support.waits import wait_until

TOPIC = "Avoid"


class Attempts:
    def __init__(self) -> None:
        self.log: list[tuple[str, bool]] = []  # (broker, failed)
        self.lock = threading.Lock()

    def send_message_before(self, ctx: SendContext) -> None:
        pass

    def send_message_after(self, ctx: SendContext) -> None:
        with self.lock:
            self.log.append((ctx.broker_name, ctx.exception is not None))


def create_topic(cluster: LocalCluster) -> None:
    for b in cluster.brokers:
        r = httpx.put(
            f"http://{b.http_addr}/topics/{TOPIC}",
            json={"read_queue_nums": 2, "write_queue_nums": 2, "perm": 6},
            timeout=10,
        )
        assert r.status_code == 200, r.text


def route_brokers(producer: Producer) -> set[str]:
    route = producer.namesrv.topic_route(TOPIC)
    return set() if route is None else {q.broker_name for q in route.queues}


def test_dead_broker_is_avoided_then_used_again(cluster: LocalCluster) -> None:
    create_topic(cluster)
    attempts = Attempts()
    with Producer(
        group="avoid",
        namesrv=cluster.namesrv_addr,
        send_latency_fault_enable=True,
        poll_name_server_interval_ms=500,
    ) as producer:
        producer.register_send_hook(attempts)
        wait_until(
            lambda: route_brokers(producer) == {"broker-a", "broker-b"},
            10,
            what="a route to both brokers",
        )
        for i in range(20):
            producer.send(Message(topic=TOPIC, body=b"warm %d" % i))
        assert {b for b, _ in attempts.log} == {"broker-a", "broker-b"}

        cluster.broker("broker-b").kill()
        attempts.log.clear()
        for i in range(200):
            producer.send(Message(topic=TOPIC, body=b"during %d" % i))  # never raises
        failed = [i for i, (b, bad) in enumerate(attempts.log) if bad]
        assert failed and all(attempts.log[i][0] == "broker-b" for i in failed)
        after_first = attempts.log[failed[0] + 1 :]
        assert after_first and all(b == "broker-a" for b, _ in after_first)

        # broker-b comes back (on a new port): the route refresh and the probe bring it back
        cluster.restart_broker("broker-b")
        attempts.log.clear()

        def used_again() -> bool:
            producer.send(Message(topic=TOPIC, body=b"after"))
            return any(b == "broker-b" and not bad for b, bad in attempts.log)

        wait_until(used_again, 30, what="broker-b used again")


def test_one_namesrv_down_does_not_stop_sends(cluster: LocalCluster) -> None:
    create_topic(cluster)
    with Producer(group="ns-down", namesrv=cluster.namesrv_addr) as producer:
        wait_until(lambda: len(route_brokers(producer)) == 2, 15, what="a route to both brokers")
        cluster.namesrvs[0].kill()
        # a producer that never saw the topic must still find it, through the other one
        with Producer(group="fresh", namesrv=cluster.namesrv_addr) as fresh:
            r = fresh.send(Message(topic=TOPIC, body=b"via the second NameServer"))
        assert r.status.value == "SEND_OK"
        for i in range(20):
            producer.send(Message(topic=TOPIC, body=b"still %d" % i))
