"""Master/slave replication with real processes: byte-for-byte copies, SYNC_MASTER,
refused writes and handshakes, kill -9 of either side, a diverged slave."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from connector import Message, Producer, SendStatus
from connector.local import ServerProcess
from connector.protocol.msgid import decode_offset_msg_id
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.server.remoting import call
from tests.support.processes import Servers
from tests.support.rest import HTTP, create_topic, pull_all_records, send, send_batch, url
from tests.support.waits import wait_until

TOPIC = "HaTopic"
FAST = {"PYMQ_REGISTER_NAME_SERVER_PERIOD_MS": "1000", "PYMQ_LOG_LEVEL": "info"}
SMALL_SEGMENTS = {**FAST, "PYMQ_MAPPED_FILE_SIZE_COMMIT_LOG": "262144"}


def master(servers: Servers, ns: str, *, role: str = "ASYNC_MASTER", store: Path | None = None,
           env: dict[str, str] | None = None) -> ServerProcess:  # fmt: skip
    return servers.broker(
        namesrv=ns, store=store, env={**SMALL_SEGMENTS, **(env or {})}, args=["--role", role]
    )


def slave(servers: Servers, ns: str, store: Path, *, broker_id: int = 1,
          env: dict[str, str] | None = None) -> ServerProcess:  # fmt: skip
    return servers.broker(
        namesrv=ns, store=store, env={**SMALL_SEGMENTS, **(env or {})},
        args=["--role", "SLAVE", "--id", str(broker_id)],
    )  # fmt: skip


def queue_max(addr: str, topic: str = TOPIC) -> list[int] | None:
    r = HTTP.get(url(addr, "topics", topic))
    if r.status_code != 200:
        return None
    return [q["max_offset"] for q in r.json()["queues"]]


def caught_up(m: ServerProcess, s: ServerProcess) -> bool:
    return queue_max(s.http_addr) == queue_max(m.http_addr)


def records(addr: str, queues: int = 4) -> list[list[tuple[int, int, bytes, str]]]:
    """Each queue's messages: (queue offset, CommitLog offset, body, UNIQ_KEY)."""
    return [
        [
            (m.queue_offset, m.commit_log_offset, m.body, m.properties.get("UNIQ_KEY", ""))
            for m in pull_all_records(addr, TOPIC, q)
        ]
        for q in range(queues)
    ]


def test_a_slave_copies_its_master_byte_for_byte_and_refuses_writes(
    servers: Servers, tmp_path: Path
) -> None:
    ns = servers.namesrv()
    m = master(servers, ns.addr)
    s = slave(servers, ns.addr, tmp_path / "slave")
    create_topic(m.http_addr, TOPIC)
    for i in range(300):  # singles and batches across several 256 KiB segments
        send(m.http_addr, TOPIC, f"single {i} ".encode() * 40, queue_id=i % 4, keys=[f"k{i}"])
        if i % 50 == 0:
            send_batch(m.http_addr, TOPIC, [f"batch {i}-{j}".encode() * 30 for j in range(40)])
    wait_until(lambda: caught_up(m, s), 20, what="the slave has every message")
    assert records(s.http_addr) == records(m.http_addr)
    # the offset msgId a send answered names the master; the slave finds the same message
    sent = send(m.http_addr, TOPIC, b"looked up on the slave", queue_id=0)
    wait_until(lambda: caught_up(m, s), 20, what="the last message on the slave")
    got = HTTP.get(url(s.http_addr, "messages", sent["offset_msg_id"]))
    assert got.status_code == 200, got.text
    assert got.json()["msg_id"] == sent["msg_id"]
    keyed = HTTP.get(url(s.http_addr, "topics", TOPIC, "messages"), params={"key": "k7"})
    assert [v["keys"] for v in keyed.json()["messages"]] == [["k7"]]

    # writes go to the master only, with a clear code that names it
    r = HTTP.post(url(s.http_addr, "topics", TOPIC, "messages"), json={"body": "x"})
    assert r.status_code == 421, r.text
    assert r.json()["code"] == "NOT_MASTER"
    assert m.addr in r.json()["message"]
    one_queue = {"read_queue_nums": 1, "write_queue_nums": 1, "perm": 6}
    r = HTTP.put(url(s.http_addr, "topics", "Other"), json=one_queue)
    assert r.status_code == 421 and r.json()["code"] == "NOT_MASTER", r.text
    # over remoting: SERVICE_NOT_AVAILABLE (what RocketMQ's slave answers), naming the master
    ext = {"producerGroup": "p", "topic": TOPIC, "queueId": "0", "sysFlag": "0",
           "bornTimestamp": "0", "flag": "0", "properties": ""}  # fmt: skip
    req = RemotingCommand(RequestCode.SEND_MESSAGE, ext, b"over remoting")
    resp = asyncio.run(call(s.addr, req, 5.0))
    assert resp.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert resp.ext.get("errorCode") == "NOT_MASTER" and m.addr in (resp.remark or "")
    # a producer sends to the master (the route's id 0) and never to the slave
    with Producer(group="ha-p", namesrv=ns.addr) as producer:
        ok = producer.send(Message(topic=TOPIC, body=b"to the master"))
        assert ok.status is SendStatus.SEND_OK
    health = HTTP.get(url(s.http_addr, "health")).json()
    assert health["broker_id"] == 1

    # topics and consumer offsets reach the slave promptly (not every 60 s)
    create_topic(m.http_addr, "HaSecond")
    commit = HTTP.put(url(m.http_addr, "consumers", "g1", "offsets", TOPIC, 2),
                      json={"offset": 17})  # fmt: skip
    assert commit.status_code == 200, commit.text
    started = time.monotonic()
    wait_until(lambda: HTTP.get(url(s.http_addr, "topics", "HaSecond")).status_code == 200, 5,
               what="the new topic on the slave")  # fmt: skip
    wait_until(
        lambda: HTTP.get(url(s.http_addr, "consumers", "g1", "offsets", TOPIC, 2)).json()
        .get("offset") == 17,
        5, what="the committed offset on the slave",
    )  # fmt: skip
    assert time.monotonic() - started < 3.0

    # a slave killed -9 and restarted catches up with what it missed
    s.kill()
    for i in range(100):
        send(m.http_addr, TOPIC, f"while the slave was down {i}".encode(), queue_id=i % 4)
    s = servers.restart(s, crash=True)
    wait_until(lambda: caught_up(m, s), 20, what="the restarted slave caught up")
    assert records(s.http_addr) == records(m.http_addr)


def test_sync_master_answers_slave_not_available_without_a_slave(
    servers: Servers, tmp_path: Path
) -> None:
    ns = servers.namesrv()
    m = master(servers, ns.addr, role="SYNC_MASTER")
    create_topic(m.http_addr, TOPIC)
    r = HTTP.post(url(m.http_addr, "topics", TOPIC, "messages"), json={"body": "alone"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "SLAVE_NOT_AVAILABLE"  # stored, not replicated
    with Producer(group="ha-sync", namesrv=ns.addr) as producer:  # remoting: the same status
        res = producer.send(Message(topic=TOPIC, body=b"alone too"))
        assert res.status is SendStatus.SLAVE_NOT_AVAILABLE
        assert res.queue_offset >= 0  # stored: a queue offset like any send
    s = slave(servers, ns.addr, tmp_path / "slave")

    def replicated_send() -> bool:
        res = HTTP.post(url(m.http_addr, "topics", TOPIC, "messages"), json={"body": "with"})
        return res.json()["status"] == "SEND_OK"

    wait_until(replicated_send, 20, interval_s=0.2, what="SEND_OK once the slave is in sync")
    # a send that answered SEND_OK is on the slave already
    sent = send(m.http_addr, TOPIC, b"on both", queue_id=1)
    bodies = [m_.body for m_ in pull_all_records(s.http_addr, TOPIC, 1)]
    assert b"on both" in bodies, sent
    # a topic made just now: its config reached the slave before its first record (a
    # slave that took over at once serves it), not only at the next metadata tick
    create_topic(m.http_addr, "HaFresh")
    send(m.http_addr, "HaFresh", b"first")
    assert queue_max(s.http_addr, "HaFresh") is not None
    # the slave leaves: the next sends are stored, not replicated
    s.kill()
    wait_until(
        lambda: HTTP.post(url(m.http_addr, "topics", TOPIC, "messages"), json={"body": "x"})
        .json()["status"] == "SLAVE_NOT_AVAILABLE",
        10, what="SLAVE_NOT_AVAILABLE once the slave is gone",
    )  # fmt: skip


def _frame(kind: int, payload: bytes) -> bytes:
    return struct.pack(">IB", len(payload) + 1, kind) + payload


def _read_frame(sock: socket.socket) -> tuple[int, bytes] | None:
    buf = b""
    while len(buf) < 5:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    length, kind = struct.unpack(">IB", buf[:5])
    while len(buf) < 4 + length:
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    return kind, buf[5 : 4 + length]


def test_forged_and_wrong_broker_handshakes_are_refused_and_logged(servers: Servers) -> None:
    ns = servers.namesrv()
    m = master(servers, ns.addr)
    host, _, port = m.ha_addr.rpartition(":")
    hello = {"magic": "pymq-ha", "version": 1, "cluster": "DefaultCluster",
             "broker_name": "broker-b", "broker_id": 1, "segment_size": 262144,
             "max_offset": 0, "epochs": []}  # fmt: skip
    ours = {**hello, "broker_name": "broker-a"}
    cases = {
        "wrong broker": _frame(1, json.dumps(hello).encode()),
        "master id": _frame(1, json.dumps({**ours, "broker_id": 0}).encode()),
        "segment size": _frame(1, json.dumps({**ours, "segment_size": 4096}).encode()),
        "not hello": _frame(6, struct.pack(">q", 0)),
        "garbage": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "huge frame": struct.pack(">IB", 1 << 30, 1),
    }
    for case, data in cases.items():
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(data)
            answer = _read_frame(sock)
            if answer is not None:  # refused with a reason, then closed
                kind, payload = answer
                assert kind == 3, case
                assert json.loads(payload)["code"], case
                assert _read_frame(sock) is None, case
    # a well-formed slave that acknowledges bytes it was never sent (RocketMQ's master
    # believes any 8-byte ack: #1155, #3015) is dropped, and never counts as in sync
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(_frame(1, json.dumps({**ours, "broker_id": 2}).encode()))
        answer = _read_frame(sock)
        assert answer is not None and answer[0] == 2  # WELCOME
        sock.sendall(_frame(6, struct.pack(">q", 1 << 40)))
        while _read_frame(sock) is not None:  # META, BEAT ... until the master closes
            pass
    log_text = m.log_path.read_text()
    assert "refused the handshake" in log_text and "broker-b" in log_text
    assert "past the 0 bytes sent" in log_text
    # the master is fine and its real slaves are unaffected
    create_topic(m.http_addr, TOPIC)
    send(m.http_addr, TOPIC, b"still serving")


def test_every_send_ok_of_a_sync_master_survives_its_kill_9_on_the_slave(
    servers: Servers, tmp_path: Path
) -> None:
    """Rounds of: producers sending to a SYNC_MASTER, the master killed -9 at a random
    moment, every SEND_OK message read back from the slave, in order, byte for byte."""
    ns = servers.namesrv(env={"PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS": "120000"})
    m = master(servers, ns.addr, role="SYNC_MASTER")
    s = slave(servers, ns.addr, tmp_path / "slave")
    create_topic(m.http_addr, TOPIC)
    wait_until(
        lambda: HTTP.post(url(m.http_addr, "topics", TOPIC, "messages"), json={"body": "warm"})
        .json()["status"] == "SEND_OK",
        20, interval_s=0.2, what="the slave in sync",
    )  # fmt: skip
    rng = random.Random(37)
    acked: dict[int, list[tuple[bytes, int]]] = {q: [] for q in range(4)}
    lock = threading.Lock()
    for round_ in range(3):
        stop = threading.Event()

        def produce(worker: int, base: str, addr: str, stop: threading.Event) -> None:
            client = httpx.Client(timeout=10)
            n = 0
            while not stop.is_set():
                body = f"{base} w{worker} n{n} ".encode() * (1 + n % 7)
                q = (worker + n) % 4
                n += 1
                try:
                    r = client.post(url(addr, "topics", TOPIC, "messages"),
                                    json={"body": body.decode(), "queue_id": q})  # fmt: skip
                except httpx.HTTPError:
                    return  # the master died under it
                if r.status_code == 200 and r.json()["status"] == "SEND_OK":
                    with lock:
                        acked[q].append((body, r.json()["queue_offset"]))

        workers = [
            threading.Thread(target=produce, args=(w, f"r{round_}", m.http_addr, stop), daemon=True)
            for w in range(4)
        ]
        for w in workers:
            w.start()
        time.sleep(rng.uniform(0.3, 1.5))  # the kill lands at a random moment of the load
        m.kill()
        stop.set()
        for w in workers:
            w.join(15)
        on_slave = {q: {(r.queue_offset, r.body) for r in pull_all_records(s.http_addr, TOPIC, q)}
                    for q in range(4)}  # fmt: skip
        for q in range(4):
            missing = [(o, b[:40]) for b, o in acked[q] if (o, b) not in on_slave[q]]
            assert not missing, f"round {round_}: SEND_OK messages missing on the slave: {missing}"
            offsets = sorted(o for o, _ in on_slave[q])
            assert offsets == list(range(len(offsets))), "the slave's queue has a gap"
        assert sum(len(v) for v in acked.values()) > 0
        m = servers.restart(m, crash=True)  # same store, new ports
        wait_until(
            lambda addr=m.http_addr: HTTP.post(
                url(addr, "topics", TOPIC, "messages"), json={"body": "again"}
            ).json()["status"] == "SEND_OK",
            30, interval_s=0.2, what="the slave back in sync with the restarted master",
        )  # fmt: skip
    wait_until(lambda: caught_up(m, s), 20, what="master and slave agree")
    assert records(s.http_addr) == records(m.http_addr)


def test_a_diverged_slave_truncates_to_the_new_masters_history(
    servers: Servers, tmp_path: Path
) -> None:
    """A and B replicate; B stops; A takes writes B never sees; then the roles swap (the
    operator promotes B): A, now a slave, drops its tail past B's history, logging it."""
    ns = servers.namesrv(env={"PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS": "3000",
                              "PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": "500"})  # fmt: skip
    a_store, b_store = tmp_path / "a", tmp_path / "b"
    a = master(servers, ns.addr, store=a_store)
    b = slave(servers, ns.addr, b_store)
    create_topic(a.http_addr, TOPIC)
    for i in range(60):
        send(a.http_addr, TOPIC, f"common {i}".encode(), queue_id=i % 4)
    wait_until(lambda: caught_up(a, b), 20, what="B has the common history")
    assert b.terminate() == 0
    for i in range(40):
        send(a.http_addr, TOPIC, f"only on A {i}".encode(), queue_id=i % 4)
    assert a.terminate() == 0
    b2 = master(servers, ns.addr, store=b_store)  # promoted: epoch 2 begins at its end
    for i in range(10):
        send(b2.http_addr, TOPIC, f"new master {i}".encode(), queue_id=i % 4)
    a2 = slave(servers, ns.addr, a_store)
    wait_until(lambda: caught_up(b2, a2), 20, what="A follows the new history")
    assert records(a2.http_addr) == records(b2.http_addr)
    bodies = [r[2] for q in records(a2.http_addr) for r in q]
    assert not any(b_.startswith(b"only on A") for b_ in bodies)
    assert sum(b_.startswith(b"common") for b_ in bodies) == 60
    log_text = a2.log_path.read_text()
    assert "truncating the CommitLog" in log_text, log_text[-2000:]


def _status(addr: str) -> str:
    res = HTTP.post(url(addr, "topics", TOPIC, "messages"), json={"body": "probe"}, timeout=30)
    assert res.status_code == 200, res.text
    status: str = res.json()["status"]
    return status


def _metric(addr: str, name: str) -> float | None:
    for line in HTTP.get(url(addr, "metrics")).text.splitlines():
        if line.startswith((name + "{", name + " ")):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_stopped_slave_leaves_the_in_sync_set_and_rejoins_when_caught_up(
    servers: Servers, tmp_path: Path
) -> None:
    env = {"PYMQ_HA_MAX_TIME_SLAVE_NOT_CATCHUP_MS": "2000", "PYMQ_SYNC_FLUSH_TIMEOUT_MS": "1000"}
    ns = servers.namesrv()
    m = master(servers, ns.addr, role="SYNC_MASTER", env=env)
    s = slave(servers, ns.addr, tmp_path / "slave", env=env)
    create_topic(m.http_addr, TOPIC)
    wait_until(lambda: _status(m.http_addr) == "SEND_OK", 20, interval_s=0.2, what="in sync")
    assert _metric(m.http_addr, "pymq_ha_slave_in_sync") == 1
    assert s.proc is not None
    readable = sum(queue_max(m.http_addr) or [])
    s.proc.send_signal(signal.SIGSTOP)
    try:
        # still in the set, but silent: the send waits for it, then gives up
        assert _status(m.http_addr) == "FLUSH_SLAVE_TIMEOUT"
        # stored, but not readable on the master either: its slave may not have it, and a
        # reader that moved there would find less than it saw
        assert sum(queue_max(m.http_addr) or []) == readable
        wait_until(lambda: _status(m.http_addr) == "SLAVE_NOT_AVAILABLE", 10,
                   what="the stopped slave out of the in-sync set")  # fmt: skip
        # alone, the master serves what it has
        assert sum(queue_max(m.http_addr) or []) >= readable + 2
        assert _metric(m.http_addr, "pymq_ha_slave_in_sync") == 0
        for i in range(200):  # the master moves on without it
            HTTP.post(url(m.http_addr, "topics", TOPIC, "messages"), json={"body": f"n{i}"})
        lag = _metric(m.http_addr, "pymq_ha_slave_lag_bytes")
        assert lag is not None and lag > 0
    finally:
        s.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: _status(m.http_addr) == "SEND_OK", 20, interval_s=0.2,
               what="the resumed slave back in sync")  # fmt: skip
    wait_until(lambda: caught_up(m, s), 20, what="the resumed slave has everything")
    assert _metric(m.http_addr, "pymq_ha_slave_in_sync") == 1
    assert _metric(s.http_addr, "pymq_ha_master_connected") == 1


def test_a_local_cluster_with_slaves_and_cluster_list_shows_roles_and_lag(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    from connector.local import LocalCluster
    from tests.support.processes import env_with

    with LocalCluster(tmp_path / "local", brokers=2, slaves=1, env=env_with(FAST)) as cluster:
        names = [b.name for b in cluster.brokers]
        assert names == ["broker-a", "broker-b", "broker-a-s1", "broker-b-s1"]
        create_topic(cluster.broker("broker-a").http_addr, TOPIC)
        send(cluster.broker("broker-a").http_addr, TOPIC, b"replicated", queue_id=0)

        def listed() -> list[dict[str, Any]] | None:
            out = subprocess.run(
                [sys.executable, "-m", "connector.cli", "admin", "--namesrv",
                 cluster.namesrv_addr, "--json", "cluster", "list"],
                capture_output=True, text=True, timeout=60, check=True,
            )  # fmt: skip
            rows: list[dict[str, Any]] = json.loads(out.stdout)
            slave_a = [r for r in rows if (r["broker"], r["id"]) == ("broker-a", 1)]
            if len(rows) == 4 and slave_a and slave_a[0]["lag_bytes"] == 0:
                return rows
            return None

        rows = wait_until(listed, 20, interval_s=0.3, what="four brokers listed, slaves caught up")
        by = {(r["broker"], r["id"]): r for r in rows}
        assert by[("broker-a", 0)]["role"] == "ASYNC_MASTER"
        assert by[("broker-a", 1)]["role"] == "SLAVE"
        assert by[("broker-a", 0)]["in_sync"] == "1/1 slaves"
        assert by[("broker-a", 1)]["in_sync"] == "yes"
        assert by[("broker-a", 1)]["max_offset"] == by[("broker-a", 0)]["max_offset"] > 0
        assert by[("broker-a", 0)]["epoch"] == 1


def test_master_and_slave_both_killed_under_load_restart_and_agree(
    servers: Servers, tmp_path: Path
) -> None:
    ns = servers.namesrv()
    m = master(servers, ns.addr, role="SYNC_MASTER")
    s = slave(servers, ns.addr, tmp_path / "slave")
    create_topic(m.http_addr, TOPIC)
    wait_until(lambda: _status(m.http_addr) == "SEND_OK", 20, interval_s=0.2, what="in sync")
    stop = threading.Event()
    acked: list[tuple[int, int, bytes]] = []

    def produce(worker: int) -> None:
        client = httpx.Client(timeout=10)
        n = 0
        while not stop.is_set():
            body = f"w{worker}-{n}".encode() * 8
            n += 1
            try:
                r = client.post(url(m.http_addr, "topics", TOPIC, "messages"),
                                json={"body": body.decode()})  # fmt: skip
            except httpx.HTTPError:
                return
            if r.status_code == 200 and r.json()["status"] == "SEND_OK":
                acked.append((r.json()["queue_id"], r.json()["queue_offset"], body))

    workers = [threading.Thread(target=produce, args=(w,), daemon=True) for w in range(4)]
    for w in workers:
        w.start()
    wait_until(lambda: len(acked) > 300, 30, what="load")
    s.kill()  # the slave first, the master a moment later: each has a tail the other lacks
    m.kill()
    stop.set()
    for w in workers:
        w.join(15)
    m = servers.restart(m, crash=True)
    s = servers.restart(s, crash=True)
    wait_until(lambda: caught_up(m, s), 30, what="the two agree again")
    assert records(s.http_addr) == records(m.http_addr)
    on_master = {(q, r[0], r[2]) for q, rs in enumerate(records(m.http_addr)) for r in rs}
    assert all((q, o, b) in on_master for q, o, b in acked), "an acknowledged send is gone"
    ha = HTTP.get(url(m.http_addr, "health")).json()["ha"]
    assert ha["epoch"] == 2 and [e[0] for e in ha["epochs"]] == [1, 2]


def test_delay_progress_reaches_the_slave(servers: Servers, tmp_path: Path) -> None:
    env = {"PYMQ_MESSAGE_DELAY_LEVEL": "100ms 1s"}
    ns = servers.namesrv()
    m = master(servers, ns.addr, env=env)
    s = slave(servers, ns.addr, tmp_path / "slave", env=env)
    create_topic(m.http_addr, TOPIC)
    send(m.http_addr, TOPIC, b"later", queue_id=0, delay_level=1)
    wait_until(lambda: queue_max(m.http_addr) == [1, 0, 0, 0], 10, what="delivered on the master")
    wait_until(lambda: queue_max(s.http_addr) == [1, 0, 0, 0], 10, what="delivered on the slave")

    def slave_progress() -> dict[str, int] | None:
        path = tmp_path / "slave" / "config" / "delayOffset.json"
        try:
            table: dict[str, int] = json.loads(path.read_text())["offset_table"]
        except (OSError, ValueError, KeyError):
            return None
        return table if table.get("1") == 1 else None

    # kept by the slave, so a promoted slave does not deliver the message a second time
    wait_until(slave_progress, 15, what="the delay progress in the slave's store")


def test_a_sync_masters_transaction_decision_is_on_the_slave_when_answered(
    servers: Servers, tmp_path: Path
) -> None:
    """END_TRANSACTION on a SYNC_MASTER answers once the in-sync slave has the decision:
    a master killed right after the answer leaves the committed message on the slave."""
    ns = servers.namesrv()
    m = master(servers, ns.addr, role="SYNC_MASTER")
    s = slave(servers, ns.addr, tmp_path / "slave")
    create_topic(m.http_addr, TOPIC)
    wait_until(
        lambda: HTTP.post(url(m.http_addr, "topics", TOPIC, "messages"), json={"body": "warm"})
        .json()["status"] == "SEND_OK",
        20, interval_s=0.2, what="the slave in sync",
    )  # fmt: skip
    half = HTTP.post(
        url(m.http_addr, "topics", TOPIC, "messages"),
        json={"body": "decided", "transaction_group": "tx-ha", "queue_id": 2},
    ).json()
    end = HTTP.post(
        url(m.http_addr, "transactions", "end"),
        json={"producer_group": "tx-ha", "offset_msg_id": half["offset_msg_id"],
              "queue_offset": half["queue_offset"], "action": "commit"},
    )  # fmt: skip
    assert end.status_code == 200, end.text
    m.kill()
    wait_until(
        lambda: b"decided" in [r.body for r in pull_all_records(s.http_addr, TOPIC, 2)], 10,
        what="the committed message readable on the slave",
    )  # fmt: skip


def test_a_batch_commit_reaches_the_slave_byte_for_byte(servers: Servers, tmp_path: Path) -> None:
    """Batch halves (records of ~130 KB, pwritten) and their batch commit (the halves'
    batches appended to their queues, the op records) reach the slave as the master
    wrote them: the same CommitLog bytes and the same readable messages."""
    ns = servers.namesrv()
    m = master(servers, ns.addr, store=tmp_path / "master")
    s = slave(servers, ns.addr, tmp_path / "slave")
    create_topic(m.http_addr, TOPIC)
    with Producer(group="tx-ha-batch", namesrv=ns.addr) as producer:
        queues = [mq for mq in producer.publish_info(TOPIC).message_queues if mq.queue_id < 3]
        halves = []
        for n, mq in enumerate(queues):
            msgs = [Message(topic=TOPIC, body=b"h%d-%04d " % (n, i) * 12) for i in range(1000)]
            sent = producer.send_batch(msgs, queue=mq, half=("w-ha", 7))
            assert sent.status is SendStatus.SEND_OK
            halves.append([sent.queue_offset, decode_offset_msg_id(sent.offset_msg_id)[1]])
        broker = queues[0].broker_name
        done = producer.commit_batch(broker, "w-ha", 7, halves, manifest={broker: halves})
        assert done["messages"] == 3000 and not done.get("already")
    wait_until(
        lambda: caught_up(m, s) and sum(queue_max(s.http_addr) or []) == 3000, 20,
        what="the slave has the committed batch",
    )  # fmt: skip
    assert records(s.http_addr) == records(m.http_addr)

    def log_bytes(store: Path) -> bytes:
        files = sorted((store / "commitlog").iterdir())
        return b"".join(f.read_bytes() for f in files).rstrip(b"\0")

    on_slave = log_bytes(tmp_path / "slave")
    assert len(on_slave) > 3 * 100_000  # the halves are there
    assert log_bytes(tmp_path / "master")[: len(on_slave)] == on_slave
