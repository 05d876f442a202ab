"""Executors keep their pymq clients: the cache alone, then across a stream's micro-batches."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connector import Message
from connector.local import LocalCluster
from connector.spark.clients import ClientCache, producer, pull_consumer, shared_cache
from tests.support.cluster import create_topic
from tests.support.spark import fill_queues


class FakeClient:
    def __init__(self) -> None:
        self.closed = 0

    def shutdown(self) -> None:
        self.closed += 1


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def cache() -> Iterator[tuple[ClientCache, Clock]]:
    clock = Clock()
    c = ClientCache(idle_ms=60_000, clock=clock)
    yield c, clock
    c.close_all()


def test_one_client_per_key_reused(cache: tuple[ClientCache, Clock]) -> None:
    c, _ = cache
    made: list[FakeClient] = []

    def make() -> FakeClient:
        made.append(FakeClient())
        return made[-1]

    for _ in range(3):
        with c.lease(("ns", "g1"), make) as a:
            assert a is made[0]
    with c.lease(("ns", "g2"), make) as b:
        assert b is made[1]
    stats = c.stats()
    assert (stats.created, stats.leases, stats.open, stats.pid) == (2, 4, 2, os.getpid())
    assert not any(m.closed for m in made)


def test_idle_clients_closed_busy_ones_kept(cache: tuple[ClientCache, Clock]) -> None:
    c, clock = cache
    idle, busy = FakeClient(), FakeClient()
    with c.lease("idle", lambda: idle):
        pass
    with c.lease("busy", lambda: busy):
        clock.now += 61
        assert c.close_idle() == 1  # "busy" is in use: never closed under a task
        assert (idle.closed, busy.closed) == (1, 0)
    assert c.close_idle() == 0  # just released: idle for 0 s
    clock.now += 59
    with c.lease("busy", FakeClient) as again:  # a lease also closes what is idle
        assert again is busy
    assert c.stats().closed_idle == 1


def test_a_failed_lease_drops_its_client(cache: tuple[ClientCache, Clock]) -> None:
    c, _ = cache
    first = FakeClient()
    with pytest.raises(ConnectionError), c.lease("k", lambda: first):
        raise ConnectionError("broker went away")
    assert first.closed == 1
    with c.lease("k", FakeClient) as second:
        assert second is not first
    assert c.stats().dropped_broken == 1


def test_a_generator_closed_early_keeps_its_client(cache: tuple[ClientCache, Clock]) -> None:
    c, _ = cache
    client = FakeClient()

    def rows() -> Iterator[int]:
        with c.lease("k", lambda: client):
            yield from range(10)

    it = rows()
    next(it)
    it.close()  # GeneratorExit inside the lease: a reader stopped by a LIMIT
    assert client.closed == 0 and c.stats().open == 1


def test_close_all(cache: tuple[ClientCache, Clock]) -> None:
    c, _ = cache
    clients = [FakeClient() for _ in range(3)]
    for i, client in enumerate(clients):
        with c.lease(i, lambda client=client: client):  # type: ignore[misc]
            pass
    c.close_all()
    assert [x.closed for x in clients] == [1, 1, 1] and c.stats().open == 0


def _sockets_to(ports: set[int]) -> Counter[str]:
    """TCP sockets of this machine whose far end is one of ``ports``, by state
    (``/proc/net/tcp``: 01 ESTABLISHED, 06 TIME_WAIT)."""
    states: Counter[str] = Counter()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) in ports:
                    states[fields[3]] += 1
    return states


ESTABLISHED, TIME_WAIT = "01", "06"


def test_micro_batches_reuse_executor_connections(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    """Seen from the brokers' side: the side that closes a TCP connection keeps it in
    TIME_WAIT for 60 s, so the TIME_WAIT sockets toward the brokers count the client
    connections closed meanwhile. Without the cache every task of every micro-batch
    opens and closes its own (20 here); with it, the executors' stay open."""
    ns = cluster.namesrv_addr
    ports = {int(b.addr.rsplit(":", 1)[1]) for b in cluster.brokers}
    create_topic(cluster, "CacheIn", queues=2)  # 4 queues: 4 tasks a micro-batch
    fill_queues(ns, "CacheIn", 40)  # 10 a queue
    before = _sockets_to(ports)
    query = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "CacheIn")
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "8")  # 5 micro-batches of 4 tasks
        .load()
        .select("body")
        .writeStream.format("memory")
        .queryName("cache_in")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(180)
    after = _sockets_to(ports)
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    assert len(batches) == 5 and spark.sql("select * from cache_in").count() == 40
    # closed meanwhile: the driver's own consumer (query stopped: 2 brokers) and little
    # else; every task opening its own client would close 20
    assert after[TIME_WAIT] - before[TIME_WAIT] <= 4, (before, after)
    # and the executors' connections are still open, for the next micro-batch
    assert after[ESTABLISHED] > before[ESTABLISHED], (before, after)


def test_producers_and_consumers_from_the_shared_cache(cluster: LocalCluster) -> None:
    """The helpers the source (and a sink) use: one started client per settings."""
    ns = cluster.namesrv_addr
    create_topic(cluster, "CacheOut", queues=1)
    before = shared_cache().stats()
    with producer(namesrv=ns, group="cache-test", send_msg_timeout_ms=5000) as p:
        mq = p.send(Message(topic="CacheOut", body=b"x")).queue
    with producer(namesrv=ns, group="cache-test", send_msg_timeout_ms=5000) as again:
        assert again is p
        again.send(Message(topic="CacheOut", body=b"y"), queue=mq)
    with producer(namesrv=ns, group="cache-test", send_msg_timeout_ms=3000) as other:
        assert other is not p  # other settings, another producer
    for _ in range(2):
        with pull_consumer(namesrv=ns, group="cache-test") as consumer:
            assert consumer.max_offset(mq) == 2
    after = shared_cache().stats()
    assert (after.created - before.created, after.leases - before.leases) == (3, 5)
    shared_cache().close_all()
    assert shared_cache().stats().open == 0


def test_long_lived_objects_frozen_once_per_process() -> None:
    # in a process of its own: freezing is for good (Spark's workers; not this test run)
    code = """
import gc, weakref
from connector.spark.clients import freeze_long_lived

class Node:
    pass

kept = [Node() for _ in range(1000)]
loop = Node()
loop.me = loop  # cyclic garbage at the time of freezing: collected, not frozen
gone = weakref.ref(loop)
del loop
assert freeze_long_lived()
assert gone() is None
frozen = gc.get_freeze_count()
assert frozen >= 1000, frozen
assert not freeze_long_lived()  # once per process
assert gc.get_freeze_count() == frozen
print("ok")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
