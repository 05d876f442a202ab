"""Brokers and NameServers as real processes: register, topic routes, expiry, unregister."""

from __future__ import annotations

import time
from functools import partial

from tests.support.processes import Servers
from tests.support.rest import (
    HTTP,
    QUEUE_CONFIG,
    broker_absent,
    broker_listed,
    clusters,
    create_topic,
    route,
    url,
)
from tests.support.waits import holds_for, wait_until

SHORT_EXPIRY_NS = {
    "PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": "200",
    "PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS": "2000",
}
FAST_HEARTBEAT = {"PYMQ_REGISTER_NAME_SERVER_PERIOD_MS": "500"}


def route_has_broker(ns: str, topic: str, name: str, addr: str) -> bool:
    r = route(ns, topic)
    if r.status_code != 200:
        return False
    data = r.json()
    queues = [q for q in data["queues"] if q["broker_name"] == name]
    brokers = [b for b in data["brokers"] if b["broker_name"] == name]
    return (
        len(queues) == 1
        and (queues[0]["read_queue_nums"], queues[0]["write_queue_nums"], queues[0]["perm"])
        == (QUEUE_CONFIG["read_queue_nums"], QUEUE_CONFIG["write_queue_nums"], QUEUE_CONFIG["perm"])
        and len(brokers) == 1
        and brokers[0]["addrs"] == {"0": addr}
    )


def route_gone(ns: str, topic: str) -> bool:
    r = route(ns, topic)
    return r.status_code == 404 and r.json()["code"] == "TOPIC_NOT_EXIST"


def test_register_route_then_expire_after_kill(servers: Servers) -> None:
    ns_proc = servers.namesrv(env=SHORT_EXPIRY_NS)
    ns = ns_proc.http_addr  # the NameServer's REST view, read by these checks
    broker = servers.broker(namesrv=ns_proc.addr, env=FAST_HEARTBEAT)
    name, addr = "broker-a", broker.addr  # registered: its remoting address

    # registered before its ready line, so it is listed at once
    wait_until(lambda: broker_listed(ns, name, addr), 2.0, what="broker in /clusters")
    assert route_gone(ns, "T")

    create_topic(broker.http_addr, "T")
    wait_until(lambda: route_has_broker(ns, "T", name, addr), 2.0, what="route of T")

    # heartbeats (every 0.5 s) keep it listed well past the 2 s expiry
    holds_for(lambda: broker_listed(ns, name, addr), 2.6, interval_s=0.1, what="broker listed")

    # the NameServer's view of the last heartbeat, read before the kill (a later one only
    # moves the expiry later)
    (entry,) = [b for b in clusters(ns)["live"] if b["addr"] == addr]
    last_heartbeat_ms = entry["last_update_timestamp"]
    broker.kill()
    t_kill = time.time()
    # no unregister from a crashed broker: it stays listed until the expiry scan
    assert broker_listed(ns, name, addr)
    wait_until(lambda: broker_absent(ns, name, addr), 6.0, what="broker expired")
    gone_ms = time.time() * 1000
    # expired by the 2 s silence rule (scanned every 0.2 s), not earlier
    assert gone_ms >= last_heartbeat_ms + 2000 - 50, gone_ms - last_heartbeat_ms
    assert gone_ms <= t_kill * 1000 + 2000 + 200 + 2000, gone_ms / 1000 - t_kill
    assert route_gone(ns, "T")


def test_topic_change_registers_at_once_and_sigterm_unregisters(servers: Servers) -> None:
    # a 60 s expiry and the default 30 s registration period: neither can explain what follows
    ns_proc = servers.namesrv(
        env={
            "PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": "200",
            "PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS": "60000",
        }
    )
    ns = ns_proc.http_addr
    broker = servers.broker(namesrv=ns_proc.addr)
    name, addr = "broker-a", broker.addr
    wait_until(lambda: broker_listed(ns, name, addr), 2.0, what="broker in /clusters")
    first_heartbeat = {b["addr"]: b["last_update_timestamp"] for b in clusters(ns)["live"]}[addr]

    t0 = time.monotonic()
    create_topic(broker.http_addr, "T")
    wait_until(lambda: route_has_broker(ns, "T", name, addr), 2.0, what="route of T")
    assert time.monotonic() - t0 < 2.0
    # the topic change itself re-registered the broker (30 s before its period would)
    assert {b["addr"]: b["last_update_timestamp"] for b in clusters(ns)["live"]}[
        addr
    ] > first_heartbeat

    store = servers.root / "broker-a"
    assert (store / "abort").exists()
    code = broker.terminate()
    t_exit = time.monotonic()
    assert code == 0, broker.last_log_line()
    assert not (store / "abort").exists()
    wait_until(lambda: broker_absent(ns, name, addr), 1.0, what="broker unregistered")
    wait_until(lambda: route_gone(ns, "T"), 1.0, what="route of T removed")
    assert time.monotonic() - t_exit < 1.5


def test_two_namesrvs_know_every_broker_and_route(servers: Servers) -> None:
    cluster = servers.cluster(brokers=2, namesrvs=2)
    namesrvs = [p.http_addr for p in cluster.namesrvs]
    brokers = {b.name: b.addr for b in cluster.brokers}
    assert set(brokers) == {"broker-a", "broker-b"}

    create_topic(cluster.broker("broker-a").http_addr, "OnlyA")
    for b in cluster.brokers:
        create_topic(b.http_addr, "Both")

    def knows_everything(ns: str) -> bool:
        return (
            all(broker_listed(ns, name, addr) for name, addr in brokers.items())
            and route_has_broker(ns, "OnlyA", "broker-a", brokers["broker-a"])
            and all(route_has_broker(ns, "Both", name, addr) for name, addr in brokers.items())
        )

    for ns in namesrvs:
        wait_until(partial(knows_everything, ns), 2.0, what=f"brokers and routes on {ns}")
        only_a = route(ns, "OnlyA").json()
        assert [q["broker_name"] for q in only_a["queues"]] == ["broker-a"]
        assert [b["broker_name"] for b in only_a["brokers"]] == ["broker-a"]

    # every topic any broker holds has one and the same route on both NameServers
    topics: set[str] = set()
    for b in cluster.brokers:
        r = HTTP.get(url(b.http_addr, "topics"))
        assert r.status_code == 200
        topics |= {t["topic"] for t in r.json()["topics"]}
    assert {"OnlyA", "Both"} <= topics

    def canonical(ns: str, topic: str) -> tuple[object, ...]:
        r = route(ns, topic)
        assert r.status_code == 200, (ns, topic, r.text)
        data = r.json()
        return (
            sorted(
                (q["broker_name"], q["read_queue_nums"], q["write_queue_nums"], q["perm"])
                for q in data["queues"]
            ),
            sorted((b["broker_name"], tuple(sorted(b["addrs"].items()))) for b in data["brokers"]),
        )

    for topic in sorted(topics):
        assert canonical(namesrvs[0], topic) == canonical(namesrvs[1], topic), topic
    for ns in namesrvs:
        r = HTTP.get(url(ns, "topics"))
        assert r.status_code == 200
        assert topics <= set(r.json()["topics"])
