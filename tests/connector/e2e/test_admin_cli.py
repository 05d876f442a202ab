"""``pymq admin`` as an operator types it, against a live cluster: options before and
after the subcommand, tables and ``--json``."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import httpx
import orjson

from connector import Admin, Message, Producer, PullConsumer
from connector.client.connection import RemotingConnection
from connector.local import LocalCluster
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

PYMQ = [sys.executable, "-m", "connector.cli"]


def pymq(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    return subprocess.run(
        [*PYMQ, *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_options_before_and_after_the_subcommand(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliAnywhere", "--namesrv", ns, "--queues", "2"))
    before = json.loads(ok(pymq("admin", "--namesrv", ns, "--json", "topic", "list")))
    after = json.loads(ok(pymq("admin", "topic", "list", "--namesrv", ns, "--json")))
    middle = json.loads(ok(pymq("admin", "topic", "--json", "list", "--namesrv", ns)))
    assert {"topic": "CliAnywhere"} in before
    assert before == after == middle
    table = ok(pymq("admin", "topic", "list", "--namesrv", ns)).splitlines()
    assert table[0].split() == ["TOPIC"] and "CliAnywhere" in [r.strip() for r in table]


def test_a_remoting_command_at_an_http_port_says_so(cluster: LocalCluster) -> None:
    http = cluster.namesrvs[0].http_addr
    res = pymq("admin", "topic", "list", "--namesrv", http)
    assert res.returncode == 1
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert f"{http} is an HTTP (REST) port, not a remoting port" in lines[0]


def test_times_are_readable_and_json_keeps_epoch_ms(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliTimes", "--queues", "1", "--namesrv", ns))
    ok(pymq("admin", "message", "send", "CliTimes", "tick", "--namesrv", ns))
    lines = ok(pymq("admin", "topic", "status", "CliTimes", "--namesrv", ns)).splitlines()
    assert "LAST_UPDATE_TIMESTAMP" in lines[0]
    assert any(" ago)" in line for line in lines[1:]) and any("never" in x for x in lines[1:])
    rows = json.loads(ok(pymq("admin", "topic", "status", "CliTimes", "--namesrv", ns, "--json")))
    assert all(isinstance(r["last_update_timestamp"], int) for r in rows)
    assert max(r["last_update_timestamp"] for r in rows) > 1_700_000_000_000
    lines = ok(pymq("admin", "cluster", "list", "--namesrv", ns)).splitlines()
    assert "LAST_HEARTBEAT" in lines[0] and all(" ago)" in line for line in lines[1:])


def test_consumer_reset_takes_now_an_iso_time_or_epoch_ms(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliReset", "--queues", "1", "--namesrv", ns))
    for i in range(3):
        ok(pymq("admin", "message", "send", "CliReset", f"m{i}", "--namesrv", ns))

    def reset(when: str) -> int:
        out = pymq(
            "admin",
            "consumer",
            "reset",
            "cli-reset",
            "CliReset",
            "--timestamp",
            when,
            "--namesrv",
            ns,
            "--json",
        )
        return sum(r["offset"] for r in json.loads(ok(out)))

    assert reset("now") == 3  # past the last message
    assert reset("2000-01-01T00:00:00") == 0
    assert reset("2000-01-01T00:00:00Z") == 0
    assert reset("0") == 0
    assert reset("4102444800000") == 3  # 2100-01-01
    bad = pymq("admin", "consumer", "reset", "g", "CliReset", "--timestamp", "soon")
    assert bad.returncode == 2 and "ISO date-time" in bad.stderr.splitlines()[-1]


def send_one(ns: str, topic: str, body: str, *extra: str) -> dict[str, object]:
    out = ok(pymq("admin", "message", "send", topic, body, *extra, "--namesrv", ns, "--json"))
    row: dict[str, object] = json.loads(out)[0]
    return row


def test_message_get_takes_either_msg_id(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliGet", "--queues", "2", "--namesrv", ns))
    sent = send_one(ns, "CliGet", "hello get", "--keys", "kg")
    for msg_id in (sent["msg_id"], sent["offset_msg_id"]):
        got = json.loads(
            ok(pymq("admin", "message", "get", str(msg_id), "--namesrv", ns, "--json"))
        )
        assert got["msg_id"] == sent["msg_id"] and got["offset_msg_id"] == sent["offset_msg_id"]
        assert got["body"] == "hello get" and got["body_base64"] == "aGVsbG8gZ2V0"
        assert isinstance(got["store_timestamp"], int)
        lines = ok(pymq("admin", "--namesrv", ns, "message", "get", str(msg_id))).splitlines()
        assert ["body", "hello", "get"] in [line.split() for line in lines]
        assert any(line.startswith("store_timestamp") and " ago)" in line for line in lines)
    got = json.loads(
        ok(
            pymq(
                "admin",
                "message",
                "get",
                str(sent["msg_id"]),
                "--topic",
                "CliGet",
                "--namesrv",
                ns,
                "--json",
            )
        )
    )
    assert got["offset_msg_id"] == sent["offset_msg_id"]
    missing = pymq("admin", "message", "get", "0" * 32, "--namesrv", ns)
    assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 1
    assert "no broker has a message with msgId" in missing.stderr
    bad = pymq("admin", "message", "get", "xyz", "--namesrv", ns)
    assert bad.returncode == 1 and "not a msgId" in bad.stderr


def test_bodies_are_text_when_utf8_else_base64(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    with Admin(namesrv=ns) as admin:
        admin.create_topic("CliBodies", read_queue_nums=1, write_queue_nums=1)
    with Producer(group="cli-bodies", namesrv=ns) as producer:
        text = producer.send(Message(topic="CliBodies", body="héllo".encode(), keys=["kb"]))
        binary = producer.send(Message(topic="CliBodies", body=b"\xff\x00\x01", keys=["kb"]))
    got = ok(pymq("admin", "message", "get", binary.msg_id, "--namesrv", ns))
    assert ["body_base64", "/wAB"] in [line.split() for line in got.splitlines()]
    got = json.loads(ok(pymq("admin", "message", "get", text.msg_id, "--namesrv", ns, "--json")))
    assert got["body"] == "héllo"
    table = ok(pymq("admin", "message", "query", "CliBodies", "--key", "kb", "--namesrv", ns))
    assert "héllo" in table and "base64:/wAB" in table
    rows = json.loads(
        ok(pymq("admin", "message", "query", "CliBodies", "--key", "kb", "--namesrv", ns, "--json"))
    )
    assert sorted(r["body"] or "" for r in rows) == ["", "héllo"]
    lines = ok(pymq("admin", "message", "print", "CliBodies", "--namesrv", ns)).splitlines()
    assert sorted(line.split("  ")[-1] for line in lines) == ["base64:/wAB", "héllo"]


def test_message_print_reads_queues_without_committing(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    with Admin(namesrv=ns) as admin:
        admin.create_topic("CliPrint", read_queue_nums=2, write_queue_nums=2)
        wait_route(admin, "CliPrint")
        with Producer(group="cli-print", namesrv=ns) as producer:
            sent = [producer.send(Message(topic="CliPrint", body=b"p%d" % i)) for i in range(10)]
        everything = ok(pymq("admin", "message", "print", "CliPrint", "--namesrv", ns))
        assert sorted(line.split()[-1] for line in everything.splitlines()) == sorted(
            f"p{i}" for i in range(10)
        )
        rows = [
            json.loads(x)
            for x in ok(
                pymq("admin", "--json", "message", "print", "CliPrint", "--namesrv", ns)
            ).splitlines()
        ]
        assert {r["msg_id"] for r in rows} == {r.msg_id for r in sent}
        first = ok(pymq("admin", "message", "print", "CliPrint", "--count", "3", "--namesrv", ns))
        assert len(first.splitlines()) == 3
        mq = sent[0].queue
        one = ok(
            pymq(
                "admin",
                "message",
                "print",
                "CliPrint",
                "--queue",
                str(mq.queue_id),
                "--from",
                "1",
                "--namesrv",
                ns,
                "--json",
            )
        )
        one_rows = [json.loads(x) for x in one.splitlines()]
        assert one_rows and all(
            r["queue_id"] == mq.queue_id and r["queue_offset"] >= 1 for r in one_rows
        )
        assert (
            ok(pymq("admin", "message", "print", "CliPrint", "--since", "now", "--namesrv", ns))
            == ""
        )
        since = pymq(
            "admin", "message", "print", "CliPrint", "--since", "2000-01-01T00:00", "--namesrv", ns
        )
        assert len(ok(since).splitlines()) == 10
        # nothing was committed for anyone
        assert not any(r["topic"] == "CliPrint" for r in admin.consumer_progress("pymq-admin"))


def wait_route(admin: Admin, topic: str) -> None:
    deadline = time.monotonic() + 10
    while admin.namesrv.topic_route(topic) is None:
        assert time.monotonic() < deadline, f"no route of {topic}"
        time.sleep(0.05)


def test_message_print_follow_stops_cleanly_on_ctrl_c(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliFollow", "--queues", "2", "--namesrv", ns))
    send_one(ns, "CliFollow", "before")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    proc = subprocess.Popen(
        [*PYMQ, "admin", "message", "print", "CliFollow", "--follow", "--namesrv", ns],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines: queue.Queue[str] = queue.Queue()
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True)
        reader.start()
        assert lines.get(timeout=30).rstrip().endswith("before")
        send_one(ns, "CliFollow", "while following")
        assert lines.get(timeout=30).rstrip().endswith("while following")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        stderr = proc.stderr.read() if proc.stderr else ""
        assert "Traceback" not in stderr and stderr.strip() == "pymq admin: 2 message(s)"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_message_dlq_lists_a_groups_dead_letters(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    empty = json.loads(ok(pymq("admin", "message", "dlq", "cli-dlq", "--namesrv", ns, "--json")))
    assert empty == []
    ok(pymq("admin", "topic", "create", "CliDlq", "--queues", "1", "--namesrv", ns))
    sent = send_one(ns, "CliDlq", "dead letter")
    broker = next(b for b in cluster.brokers if b.name == sent["broker"])
    answer = httpx.post(
        f"http://{broker.http_addr}/consumers/cli-dlq/send-back",
        json={"offset_msg_id": sent["offset_msg_id"], "max_reconsume_times": 0},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text

    def dead() -> list[dict[str, object]]:
        out = pymq("admin", "message", "dlq", "cli-dlq", "--namesrv", ns, "--json")
        rows: list[dict[str, object]] = json.loads(ok(out))
        return rows

    deadline = time.monotonic() + 30
    while not (rows := dead()):
        assert time.monotonic() < deadline, "no message in the DLQ within 30 s"
        time.sleep(0.2)
    assert [(r["msg_id"], r["body"], r["origin_topic"]) for r in rows] == [
        (sent["msg_id"], "dead letter", "CliDlq")
    ]
    table = ok(pymq("admin", "message", "dlq", "cli-dlq", "--namesrv", ns)).splitlines()
    assert "ORIGIN_TOPIC" in table[0] and table[1].endswith("dead letter")


class Client:
    """A RocketMQ-style client: one connection to every broker, heartbeating a consumer
    group (subscribed to ``topic``) and a producer group."""

    def __init__(
        self, cluster: LocalCluster, client_id: str, consumer: str, producer: str, topic: str
    ) -> None:
        self.conns = [RemotingConnection(b.addr) for b in cluster.brokers]
        self.body = orjson.dumps(
            {
                "clientID": client_id,
                "producerDataSet": [{"groupName": producer}],
                "consumerDataSet": [
                    {
                        "groupName": consumer,
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "subscriptionDataSet": [{"topic": topic, "subString": "TagA || TagB"}],
                    }
                ],
            }
        )

    def heartbeat(self) -> None:
        for conn in self.conns:
            cmd = RemotingCommand(RequestCode.HEART_BEAT, body=self.body)
            assert conn.invoke(cmd, 10).code == ResponseCode.SUCCESS

    def close(self) -> None:
        for conn in self.conns:
            conn.close()


def test_consumer_and_producer_connections_and_consumer_list(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliConns", "--queues", "2", "--namesrv", ns))
    clients = [
        Client(cluster, f"10.0.0.{i}@cli", "cli-conns-app", "cli-conns-prod", "CliConns")
        for i in (1, 2)
    ]
    try:
        for c in clients:
            c.heartbeat()
        with Admin(namesrv=ns) as admin, PullConsumer(group="cli-conns-app", namesrv=ns) as pc:
            mq = next(iter(pc.fetch_queues("CliConns")))
            with Producer(group="cli-conns-send", namesrv=ns) as producer:
                for _ in range(3):
                    producer.send(Message(topic="CliConns", body=b"x"), queue=mq)
            pc.commit_offset(mq, 1)
            assert admin.consumer_progress("cli-conns-app")

        view = json.loads(
            ok(pymq("admin", "consumer", "connections", "cli-conns-app", "--namesrv", ns, "--json"))
        )
        assert [c["client_id"] for c in view["connections"]] == ["10.0.0.1@cli", "10.0.0.2@cli"]
        assert all(
            c["addr"].startswith("127.0.0.1:")
            and c["language"] == "PYTHON"
            and isinstance(c["version"], int)
            for c in view["connections"]
        )
        assert view["subscriptions"] == {"CliConns": "TagA || TagB"}
        assert view["message_model"] == "CLUSTERING"
        table = ok(pymq("admin", "--namesrv", ns, "consumer", "connections", "cli-conns-app"))
        lines = table.splitlines()
        assert lines[0].split() == ["CLIENT_ID", "ADDR", "LANGUAGE", "VERSION", "LAST_HEARTBEAT"]
        assert "10.0.0.1@cli" in lines[1] and " ago)" in lines[1]
        assert lines[-1].startswith("2 client(s) online") and "CliConns (TagA || TagB)" in lines[-1]

        view = json.loads(
            ok(
                pymq(
                    "admin", "producer", "connections", "cli-conns-prod", "--json", "--namesrv", ns
                )
            )
        )
        assert [c["client_id"] for c in view["connections"]] == ["10.0.0.1@cli", "10.0.0.2@cli"]
        empty = ok(pymq("admin", "producer", "connections", "nobody", "--namesrv", ns))
        assert empty.splitlines()[-1] == "0 client(s) online"

        groups = json.loads(ok(pymq("admin", "consumer", "list", "--namesrv", ns, "--json")))
        mine = next(g for g in groups if g["group"] == "cli-conns-app")
        assert mine["clients"] == 2 and mine["total_lag"] == 2 and "CliConns" in mine["topics"]
        table = ok(pymq("admin", "consumer", "list", "--namesrv", ns))
        row = next(x for x in table.splitlines() if x.startswith("cli-conns-app "))
        assert row.split()[1:3] == ["online", "2"] and row.split()[-1] == "2"
    finally:
        for c in clients:
            c.close()


def test_topic_update_changes_the_permission_everywhere(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliPerm", "--queues", "2", "--namesrv", ns))
    rows = json.loads(
        ok(pymq("admin", "topic", "update", "CliPerm", "--perm", "r", "--namesrv", ns, "--json"))
    )
    assert sorted((r["broker_name"], r["perm"], r["write_queue_nums"]) for r in rows) == [
        ("broker-a", 4, 2),
        ("broker-b", 4, 2),
    ]
    with Admin(namesrv=ns) as admin:
        route = admin.topic_route("CliPerm")  # the brokers registered the change at once
        assert {q.perm for q in route.queues} == {4}
    table = ok(pymq("admin", "--namesrv", ns, "topic", "update", "CliPerm", "--perm", "6"))
    assert table.splitlines()[0].split()[-1] == "PERM" and table.splitlines()[1].endswith("6")
    bad = pymq("admin", "topic", "update", "CliPerm", "--perm", "x", "--namesrv", ns)
    assert bad.returncode == 2 and "not a permission" in bad.stderr


def test_broker_config_get_and_set(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    broker = cluster.brokers[0]
    full = json.loads(
        ok(pymq("admin", "broker", "config", "get", broker.addr, "--namesrv", ns, "--json"))
    )
    assert full["broker_name"] == broker.name and "flush_disk_type" in full
    got = ok(
        pymq(
            "admin", "broker", "config", "get", broker.name, "max_reconsume_times", "--namesrv", ns
        )
    )
    assert got.splitlines()[1].split() == ["max_reconsume_times", "16"]
    try:
        out = json.loads(
            ok(
                pymq(
                    "admin",
                    "broker",
                    "config",
                    "set",
                    broker.name,
                    "max_reconsume_times",
                    "3",
                    "--namesrv",
                    ns,
                    "--json",
                )
            )
        )
        assert out == {"max_reconsume_times": 3}
        again = json.loads(
            ok(
                pymq(
                    "admin",
                    "--json",
                    "broker",
                    "config",
                    "get",
                    f"http://{broker.http_addr}",
                    "--namesrv",
                    ns,
                )
            )
        )
        assert again["max_reconsume_times"] == 3
    finally:
        ok(
            pymq(
                "admin",
                "broker",
                "config",
                "set",
                broker.name,
                "max_reconsume_times",
                "16",
                "--namesrv",
                ns,
            )
        )
    for pairs, said in [
        (["store_dir", "/elsewhere"], "read at start only"),
        (["max_reconsume_times", "many"], "bad value for max_reconsume_times"),
        (["no_such_key", "1"], "unknown setting"),
        (["max_reconsume_times"], "KEY VALUE pairs"),
    ]:
        bad = pymq("admin", "broker", "config", "set", broker.name, *pairs, "--namesrv", ns)
        assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1, bad.stderr
        assert said in bad.stderr
