"""One client instance per process and NameServers: the producer, the pull consumer
and the push consumer of a process share its routes, connections and heartbeat, and
the brokers see one client (RocketMQ's MQClientInstance)."""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from connector import (
    Admin,
    ConsumeStatus,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    TransactionProducer,
)
from connector.client.instance import _TICK_S, ClientInstance
from connector.errors import ConfigError
from connector.local import LocalCluster

TOPIC = "InstanceShared"


def _wait(what: str, check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f} s: {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    with Admin(namesrv=cluster.namesrv_addr) as admin:
        admin.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
        _wait(
            "the topic routed to both brokers",
            lambda: len({q.broker_name for q in admin.topic_route(TOPIC).queues}) == 2,
        )
    return TOPIC


def _connections(cluster: LocalCluster, kind: str, group: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for broker in cluster.brokers:
        r = httpx.get(f"http://{broker.http_addr}/{kind}/{group}/connections", timeout=10)
        r.raise_for_status()
        out.extend(r.json()["connections"])
    return out


def test_producer_and_consumers_share_one_instance(cluster: LocalCluster, topic: str) -> None:
    ns = cluster.namesrv_addr
    got: list[bytes] = []
    lock = threading.Lock()

    def listener(msgs: list[Any], _ctx: Any) -> ConsumeStatus:
        with lock:
            got.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    with (
        Producer(group="inst-p", namesrv=ns) as producer,
        PullConsumer(group="inst-pull", namesrv=ns) as puller,
        PushConsumer(
            group="inst-push", namesrv=ns, listener=listener,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        ) as pusher,
    ):  # fmt: skip
        pusher.subscribe(topic)
        instance = producer.instance
        assert puller.instance is instance and pusher.instance is instance
        assert pusher.puller.instance is instance
        assert producer.client_id == pusher.client_id == instance.client_id
        assert producer.rpc is puller.rpc is pusher.puller.rpc  # one set of connections

        bodies = [b"m%d" % i for i in range(40)]
        for body in bodies:
            producer.send(Message(topic=topic, body=body))
        _wait("the push consumer got every message", lambda: sorted(got) == sorted(bodies))
        queues = puller.fetch_queues(topic)
        assert sum(len(puller.pull(mq, 0, 64).messages) for mq in queues) == 40

        # one route table: the producer's publish info is made from the instance's route
        assert producer.publish_info(topic).route.topic == topic
        assert instance.route(topic) is not None
        # one connection per server for all three
        addrs = [c.addr for c in instance.rpc.client.connections()]
        assert len(addrs) == len(set(addrs))
        assert {b.addr for b in cluster.brokers} <= set(addrs)

        # the brokers see one client, a producer of inst-p and a consumer of inst-push
        instance.heartbeat_all()
        producers = _connections(cluster, "producers", "inst-p")
        consumers = _connections(cluster, "consumers", "inst-push")
        assert {c["client_id"] for c in producers} == {instance.client_id}
        assert {c["client_id"] for c in consumers} == {instance.client_id}
        assert len(producers) == len(consumers) == len(cluster.brokers)
    # the last member left: the instance is closed and forgotten
    assert instance.closed
    fresh = PullConsumer(group="inst-pull", namesrv=ns)
    try:
        assert fresh.instance is not instance
    finally:
        fresh.shutdown()


def test_a_group_is_registered_once_per_instance(cluster: LocalCluster) -> None:
    """A second producer of a group gets an instance (and client id) of its own, as
    in another process; with an explicit instance name it is refused."""
    ns = cluster.namesrv_addr
    with (
        Producer(group="inst-twice", namesrv=ns) as one,
        Producer(group="inst-twice", namesrv=ns) as two,
    ):
        assert one.instance is not two.instance
        assert one.client_id != two.client_id
        assert two.instance.instance_name == f"{one.instance.instance_name}-1"
        with Producer(group="inst-other", namesrv=ns) as other:
            assert other.instance is one.instance
    with Producer(group="inst-named", namesrv=ns, instance_name="svc") as named:
        assert named.client_id.endswith("@svc")
        with pytest.raises(ConfigError, match="instance_name"):
            Producer(group="inst-named", namesrv=ns, instance_name="svc")


def test_leaving_unregisters_only_that_group(cluster: LocalCluster, topic: str) -> None:
    """A producer that shuts down is dropped from its group on the brokers at once
    (UNREGISTER_CLIENT); the other members of the instance stay registered."""
    ns = cluster.namesrv_addr
    keep = TransactionProducer(group="inst-keep", namesrv=ns, listener=_NoChecks())
    leave = Producer(group="inst-leave", namesrv=ns)
    try:
        assert keep.instance is leave.instance
        for p in (keep, leave):
            p.send(Message(topic=topic, body=b"hello"))
        keep.instance.heartbeat_all()
        _wait(
            "both groups registered", lambda: bool(_connections(cluster, "producers", "inst-leave"))
        )
        leave.shutdown()
        # before the brokers' 3 s expiry of a silent client could drop it
        _wait(
            "inst-leave gone",
            lambda: not _connections(cluster, "producers", "inst-leave"),
            timeout_s=2.0,
        )
        assert {c["client_id"] for c in _connections(cluster, "producers", "inst-keep")} == {
            keep.client_id
        }
        assert not keep.instance.closed
    finally:
        leave.shutdown()
        keep.shutdown()
    assert keep.instance.closed


def test_the_last_member_leaving_closes_the_instance_at_once(
    cluster: LocalCluster, topic: str
) -> None:
    """The instance's thread sleeps between ticks (``_TICK_S``); the last member's
    leave wakes it instead of joining it for up to a tick, so a short-lived producer
    (the exactly-once sink's commit opens one a micro-batch) shuts down in
    milliseconds. Best of 3: the machine is shared."""
    took = []
    for n in range(3):
        producer = Producer(group=f"inst-quick-{n}", namesrv=cluster.namesrv_addr)
        producer.send(Message(topic=topic, body=b"x"))  # the instance's thread runs
        instance = producer.instance
        t0 = time.monotonic()
        producer.shutdown()
        took.append(time.monotonic() - t0)
        assert instance.closed
    assert min(took) < _TICK_S / 2, took


def test_members_differ_by_account_and_tls(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    plain = PullConsumer(group="inst-acct", namesrv=ns)
    signed = PullConsumer(group="inst-acct", namesrv=ns, access_key="ak", secret_key="sk123456")
    try:
        assert plain.instance is not signed.instance
        assert "sk123456" not in repr(signed.instance)
        assert isinstance(plain.instance, ClientInstance)
    finally:
        plain.shutdown()
        signed.shutdown()


class _NoChecks:
    def execute_local_transaction(self, msg: Message, arg: Any) -> Any:
        raise AssertionError("no transaction is sent here")

    def check_local_transaction(self, msg: Any) -> Any:
        raise AssertionError("no half is left to check")


def test_a_forked_child_gets_instances_of_its_own(cluster: LocalCluster, topic: str) -> None:
    """The parent's instance (its thread, its sockets) is not the child's, even under an
    explicit instance name (the default one is the process id: another one anyway)."""
    named = {"namesrv": cluster.namesrv_addr, "instance_name": "forked"}
    with PullConsumer(group="inst-fork", **named) as parent:
        assert parent.instance.fetch_route(topic) is not None
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a client of its own, working
            code = 1
            try:
                with PullConsumer(group="inst-fork", **named) as child:
                    fresh = child.instance is not parent.instance
                    code = 0 if fresh and child.instance.fetch_route(topic) else 2
            finally:
                os.write(write, bytes([code]))
                os._exit(0)
        os.close(write)
        try:
            ready, _, _ = select.select([read], [], [], 30)
            got = os.read(read, 1) if ready else b"timeout"
        finally:
            if not ready:
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
        assert got == b"\x00"
        assert parent.instance.fetch_route(topic) is not None  # the parent's still works
