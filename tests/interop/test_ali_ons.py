"""ali-ons 3.12.0 (npm) against a pymq cluster of 2 brokers: a RocketMQ remoting client
written in JavaScript, with its own frame codec, that speaks as a Java client does
(language JAVA, SEND_MESSAGE_V2 with short field names, which the C++ client never
sends). Its Producer sends and pymq reads every message back; its push Consumer consumes
a group's messages, pymq's own included, and its offsets reach the brokers; a message it
asks again (ACTION_RETRY, sent back with CONSUMER_SEND_MSG_BACK) comes back from
``%RETRY%group``.

node and npm are not prerequisites of pymq: without them these tests skip, saying so.
With them the client is installed from npm (``js/package-lock.json``) into
``build/interop-js``, and a failure to install fails the tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connector import PullConsumer
from connector.client.producer import Producer
from connector.local import LocalCluster
from connector.protocol.message import Message
from tests.support.acl import ADMIN, PUB_ONLY, SUB_ONLY, start_acl_cluster
from tests.support.acl import create_topic as create_acl_topic
from tests.support.cluster import QUEUES, consumer_progress, create_topic, pull_all

JS = Path(__file__).parent / "js"
TOPIC = "AliOnsInterop"
COUNT = 200
FROM_PYMQ = 50
RETRIED = 8


@pytest.fixture(scope="module")
def node_client() -> Path:
    """A directory holding ``client.js`` and its ``node_modules``."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed: the ali-ons client is not run")
    lock = (JS / "package-lock.json").read_bytes()
    where = JS.parents[2] / "build" / "interop-js"
    stamp = where / ".installed"
    digest = hashlib.sha256(lock + (JS / "package.json").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(JS / name, where / name)
        proc = subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=where,
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"npm ci failed: {proc.stderr[-2000:]}"
        stamp.write_text(digest)
    shutil.copy(JS / "client.js", where / "client.js")
    return where


def run(
    client: Path, home: Path, *args: str, keys: tuple[str, str] | None = None, ok: bool = True
) -> dict[str, Any]:
    """``node client.js args...`` (bounded; a fresh ``HOME``: the client writes its offsets
    and logs there); its one-line JSON report. ``keys``: the account it signs with;
    ``ok`` False: a failed run is what the caller expects."""
    account = {"ALI_ONS_ACCESS_KEY": keys[0], "ALI_ONS_SECRET_KEY": keys[1]} if keys else {}
    proc = subprocess.run(
        ["node", "client.js", *args],
        cwd=client,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home), **account},
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    report: dict[str, Any] = json.loads(lines[-1])
    assert not report.get("timedOut"), report
    assert not ok or not report.get("failed"), report
    return report


@pytest.fixture(scope="module")
def produced(node_client: Path, cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
             ) -> list[dict[str, Any]]:  # fmt: skip
    create_topic(cluster, TOPIC)
    home = tmp_path_factory.mktemp("ali-ons-home")
    report = run(node_client, home, "produce", cluster.namesrv_addr, TOPIC, str(COUNT))
    sent: list[dict[str, Any]] = report["sent"]
    return sent


def test_its_producer_sends_and_pymq_reads_every_message_intact(
    produced: list[dict[str, Any]], cluster: LocalCluster
) -> None:
    assert [s["i"] for s in produced] == list(range(COUNT))
    assert {s["status"] for s in produced} == {"SEND_OK"}
    got = {m.body.decode(): m for m in pull_all(cluster.namesrv_addr, TOPIC)}
    assert len(got) == COUNT
    for i in range(COUNT):
        m = got[f"ali-ons-{i}-é"]
        assert (m.tags, m.keys, m.properties["seq"]) == ("TagB" if i % 2 else "TagA",
                                                         [f"key-{i}"], str(i))  # fmt: skip
    assert len({(s["broker"], s["queue"]) for s in produced}) == 2 * QUEUES  # every queue


def test_its_push_consumer_consumes_a_group_pymq_messages_too_and_commits(
    produced: list[dict[str, Any]],
    node_client: Path,
    cluster: LocalCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    ns = cluster.namesrv_addr
    with Producer(group="PID_PYMQ_TO_ALI_ONS", namesrv=ns) as producer:
        for i in range(FROM_PYMQ):
            msg = Message(topic=TOPIC, body=f"pymq-{i}".encode(), tags="TagC",
                          keys=[f"pk-{i}"], properties={"color": "red"})  # fmt: skip
            producer.send(msg)
    group = "CID_ALI_ONS"
    home = tmp_path_factory.mktemp("ali-ons-home")
    report = run(node_client, home, "consume", ns, TOPIC, group, str(COUNT + FROM_PYMQ))
    messages = {m["body"]: m for m in report["messages"]}
    assert len(messages) == COUNT + FROM_PYMQ
    assert messages["ali-ons-7-é"]["tags"] == "TagB" and messages["ali-ons-7-é"]["keys"] == "key-7"
    ours = messages["pymq-3"]
    assert (ours["tags"], ours["keys"], ours["properties"]["color"]) == ("TagC", "pk-3", "red")
    # it found its group's retry topic (made by the broker at its first heartbeat)
    assert not [e for e in report["errors"] if "%RETRY%" in e], report["errors"]
    rows = [r for r in consumer_progress(ns, group) if r["topic"] == TOPIC]
    assert len(rows) == 2 * QUEUES
    assert all(r["consumer_offset"] == r["broker_offset"] for r in rows), rows


def test_a_message_its_push_consumer_asks_again_comes_back_from_the_retry_topic(
    node_client: Path, cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """ACTION_RETRY: CONSUMER_SEND_MSG_BACK from a Java-style client; the broker keeps
    the message in %RETRY%group for the first retry delay (10 s) and the consumer,
    subscribed to that topic since it started, gets it again with its own topic."""
    ns = cluster.namesrv_addr
    topic = "AliOnsRetry"
    create_topic(cluster, topic)
    with Producer(group="PID_PYMQ_TO_ALI_ONS", namesrv=ns) as producer:
        for i in range(RETRIED):
            producer.send(Message(topic=topic, body=f"again-{i}".encode(), tags="TagR"))
    home = tmp_path_factory.mktemp("ali-ons-home")
    report = run(node_client, home, "retry", ns, topic, "CID_ALI_ONS_RETRY", str(RETRIED))
    again = {m["body"]: m for m in report["messages"]}
    assert set(again) == {f"again-{i}" for i in range(RETRIED)}
    for m in again.values():
        assert (m["topic"], m["tags"], m["reconsumeTimes"]) == (topic, "TagR", 1), m
        assert m["properties"]["RETRY_TOPIC"] == topic
    assert not report["errors"], report["errors"]


def test_its_transactional_halves_stay_hidden_until_pymq_decides_them(
    node_client: Path, cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """ali-ons sends halves (a message with TRAN_MSG set goes prepared) but has no
    END_TRANSACTION of its own nor a check-back listener: the decisions are made here,
    over REST, with the offset msgId and queue offset its send results carry."""
    topic = "AliOnsHalves"
    create_topic(cluster, topic)
    home = tmp_path_factory.mktemp("ali-ons-half-home")
    sent = run(node_client, home, "half", cluster.namesrv_addr, topic, "20")["sent"]
    assert {s["status"] for s in sent} == {"SEND_OK"}
    assert pull_all(cluster.namesrv_addr, topic) == []  # halves: nothing readable
    http = {b.name: f"http://{b.http_addr}" for b in cluster.brokers}
    for s in sent:
        r = httpx.post(
            f"{http[s['broker']]}/transactions/end",
            json={"producer_group": "PID_ALI_ONS_TX", "offset_msg_id": s["msgId"],
                  "queue_offset": s["offset"], "action": "rollback" if s["i"] % 2 else "commit"},
            timeout=10,
        )  # fmt: skip
        assert r.status_code == 200, r.text
    got = sorted(m.body.decode() for m in pull_all(cluster.namesrv_addr, topic))
    assert got == sorted(f"ali-ons-{i}-é" for i in range(0, 20, 2))


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster, _ = start_acl_cluster(tmp_path_factory.mktemp("ali-ons-acl"))
    try:
        create_acl_topic(cluster, "AliOnsAcl")
        yield cluster
    finally:
        cluster.stop()


def test_with_an_account_it_signs_as_rocketmq_checks(
    node_client: Path, acl_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """accessKey / secretKey: every request carries AccessKey, Signature and OnsChannel,
    signed over its header fields, which pymq's servers check as RocketMQ's ACL does."""
    ns, home = acl_cluster.namesrv_addr, tmp_path_factory.mktemp("ali-ons-home")
    sent = run(node_client, home, "produce", ns, "AliOnsAcl", "20", keys=PUB_ONLY)["sent"]
    assert {s["status"] for s in sent} == {"SEND_OK"} and len(sent) == 20
    got = run(node_client, home, "consume", ns, "AliOnsAcl", "CID_ALI_ACL", "20", keys=SUB_ONLY)
    assert len({m["body"] for m in got["messages"]}) == 20
    # a wrong secret: the route lookup is refused; an account without PUB: every send is
    # refused (the client reports its retries spent, not the broker's reason); nothing
    # more is stored
    for keys, why in (
        ((PUB_ONLY[0], "notTheSecret"), "does not match"),
        (SUB_ONLY, "still failed"),
    ):
        fresh = tmp_path_factory.mktemp("ali-ons-home")  # no route kept from a run before
        refused = run(node_client, fresh, "produce", ns, "AliOnsAcl", "1", keys=keys, ok=False)
        assert refused.get("failed") and why in str(refused["errors"]), refused
    with PullConsumer(group="CID_COUNT", namesrv=ns, access_key=ADMIN[0],
                      secret_key=ADMIN[1]) as c:  # fmt: skip
        assert sum(c.max_offset(q) for q in c.fetch_queues("AliOnsAcl")) == 20
