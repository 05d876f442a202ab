"""Admin and ``pymq admin`` against a live cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from connector import Admin, Message, Producer, PullConsumer
from connector.client.connection import RemotingClient
from connector.errors import TopicNotExistError
from connector.local import LocalCluster
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode


def admin_cli(ns: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    return subprocess.run(
        [sys.executable, "-m", "connector.cli", "admin", "--namesrv", ns, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def wait_for_route(admin: Admin, topic: str, brokers: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        route = admin.namesrv.topic_route(topic)
        if route is not None and len(route.queues) == brokers:
            return
        time.sleep(0.05)
    raise AssertionError(f"no route of {topic} on {brokers} brokers")


def test_admin_commands(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    with Admin(namesrv=ns) as admin:
        assert admin.create_topic("AdminT", read_queue_nums=3, write_queue_nums=3) == [
            "broker-a",
            "broker-b",
        ]
        wait_for_route(admin, "AdminT", 2)
        assert "AdminT" in admin.topic_list()
        with Producer(group="adm", namesrv=ns) as producer:
            sent = [
                producer.send(Message(topic="AdminT", body=b"v%d" % i, keys=["kk"]))
                for i in range(12)
            ]
        status = admin.topic_status("AdminT")
        assert len(status) == 6 and sum(r["max_offset"] for r in status) == 12
        assert {m["msg_id"] for m in admin.query_message("AdminT", "kk")} == {
            r.msg_id for r in sent
        }
        got = admin.get_message(sent[0].offset_msg_id)
        assert got["msg_id"] == sent[0].msg_id
        with PullConsumer(group="adm-g", namesrv=ns) as consumer:
            mq = sent[0].queue
            consumer.commit_offset(mq, 1)
        progress = admin.consumer_progress("adm-g")
        row = next(
            r
            for r in progress
            if r["queue_id"] == mq.queue_id and r["broker_name"] == mq.broker_name
        )
        assert row["consumer_offset"] == 1 and row["lag"] == row["broker_offset"] - 1
        reset = admin.reset_offset("adm-g", "AdminT", 0)
        assert all(r["offset"] == 0 for r in reset) and len(reset) == 6

        out = admin_cli(ns, "--json", "topic", "status", "AdminT")
        assert out.returncode == 0, out.stderr
        assert sum(r["max_offset"] for r in json.loads(out.stdout)) == 12
        out = admin_cli(ns, "cluster", "list")
        assert out.returncode == 0 and "broker-a" in out.stdout and "broker-b" in out.stdout
        out = admin_cli(ns, "message", "send", "AdminT", "from the cli", "--keys", "cli-key")
        assert out.returncode == 0 and "SEND_OK" in out.stdout, out.stderr
        out = admin_cli(ns, "--json", "message", "query", "AdminT", "--key", "cli-key")
        assert [m["body_base64"] for m in json.loads(out.stdout)] == ["ZnJvbSB0aGUgY2xp"]
        out = admin_cli(ns, "consumer", "progress", "adm-g")
        assert out.returncode == 0 and "AdminT" in out.stdout

        assert admin.delete_topic("AdminT") == ["broker-a", "broker-b"]
        out = admin_cli(ns, "topic", "route", "NoSuchTopic")
        assert out.returncode == 1
        assert out.stderr.strip().count("\n") == 0 and "NoSuchTopic" in out.stderr


def test_admin_without_namesrv_is_a_one_line_error() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    out = subprocess.run(
        [sys.executable, "-m", "connector.cli", "admin", "topic", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert out.returncode == 1
    assert out.stderr.strip().startswith("pymq admin:") and "\n" not in out.stderr.strip()


def test_a_created_topic_is_routed_when_the_creation_answers(cluster: LocalCluster) -> None:
    """Creating (or deleting) a topic answers once every NameServer knows it, through
    REST (``Admin.create_topic``) and remoting (UPDATE_AND_CREATE_TOPIC, 17), as
    RocketMQ's broker registers before it answers: a producer started right after
    gets the topic's own route, not TBW102's. No waiting in this test."""
    namesrvs = [Admin(namesrv=p.addr) for p in cluster.namesrvs]
    try:
        with Admin(namesrv=cluster.namesrv_addr) as admin:
            admin.create_topic("RoutedAtOnce", read_queue_nums=3, write_queue_nums=3)
            for ns in namesrvs:
                route = ns.topic_route("RoutedAtOnce")
                assert {(q.broker_name, q.write_queue_nums) for q in route.queues} == {
                    ("broker-a", 3),
                    ("broker-b", 3),
                }
        broker = cluster.brokers[0]
        client = RemotingClient()
        try:
            ext = {"topic": "RoutedAtOnceToo", "readQueueNums": "2", "writeQueueNums": "2"}
            cmd = RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
            assert client.invoke(broker.addr, cmd, 10).code == ResponseCode.SUCCESS
            for ns in namesrvs:
                route = ns.topic_route("RoutedAtOnceToo")
                assert [(q.broker_name, q.write_queue_nums) for q in route.queues] == [
                    (broker.name, 2)
                ]
            cmd = RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "RoutedAtOnceToo"})
            assert client.invoke(broker.addr, cmd, 10).code == ResponseCode.SUCCESS
            for ns in namesrvs:
                with pytest.raises(TopicNotExistError):
                    ns.topic_route("RoutedAtOnceToo")
        finally:
            client.close()
    finally:
        for ns in namesrvs:
            ns.close()
