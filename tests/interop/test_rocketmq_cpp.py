"""PyPI ``rocketmq`` 0.4.4 (Apache's C++ client core, SEND_MESSAGE 10, language CPP) against
a pymq cluster of 2 brokers: its Producer, PullConsumer and PushConsumer, and messages crossing
between it and pymq's own client with bodies, keys, tags and properties intact.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from connector.client.producer import Producer
from connector.local import LocalCluster
from connector.protocol.message import Message
from connector.protocol.status import SendStatus
from tests.support.cluster import QUEUES, consumer_progress, create_topic, pull_all
from tests.support.rocketmq_cpp import CppClient

TOPIC = "CppInterop"
COUNT = 1000
TAGS = ("TagA", "TagB")
PROPERTIES = {"color": "red-{i}", "seq": "{i}", "note": "ünïcode-{i}"}
PROPERTY_NAMES = sorted(PROPERTIES)


def expected(i: int) -> dict[str, Any]:
    """What message ``i`` of the C++ producer carries, as the C++ consumer reports it."""
    return {
        "body": f"body-{i}-é",
        "keys": f"key-{i} alt-{i}",
        "tags": TAGS[i % len(TAGS)],
        "properties": {name: pattern.format(i=i) for name, pattern in PROPERTIES.items()},
    }


def describe(res: dict[str, Any]) -> str:
    """The part of a run's report that explains a failure."""
    keep = ("op", "ok", "error", "timed_out", "returncode", "elapsed_s", "done", "home")
    head = {k: res.get(k) for k in keep}
    counts = {k: len(res.get(k) or []) for k in ("sent", "retries", "failed", "messages")}
    return (
        f"{json.dumps(head)} {counts}\nstderr: {res.get('stderr', '')[-1500:]}\n"
        f"client log: {res.get('cpp_log', '')[-2500:]}"
    )


@pytest.fixture(scope="module")
def produced(cluster: LocalCluster, cpp_client: CppClient) -> dict[str, Any]:
    """COUNT messages sent by the C++ Producer, one at a time, to TOPIC on both brokers."""
    create_topic(cluster, TOPIC)
    res = cpp_client.produce(
        namesrv=cluster.namesrv_addr,
        topic=TOPIC,
        count=COUNT,
        group="PID_CPP_INTEROP",
        tags=TAGS,
        keys="key-{i} alt-{i}",
        body="body-{i}-é",
        properties=PROPERTIES,
        timeout_s=180,
    )
    assert res["ok"], describe(res)
    return res


def test_cpp_producer_sends_every_message(produced: dict[str, Any]) -> None:
    sent = produced["sent"]
    assert [s["i"] for s in sent] == list(range(COUNT))
    assert {s["status"] for s in sent} == {"OK"}
    assert len({s["msg_id"] for s in sent}) == COUNT
    assert not produced["failed"]


def test_cpp_pull_consumer_reads_everything_back(
    produced: dict[str, Any], cluster: LocalCluster, cpp_client: CppClient
) -> None:
    res = cpp_client.pull(
        namesrv=cluster.namesrv_addr,
        topic=TOPIC,
        expected=COUNT,
        group="CID_CPP_INTEROP_PULL",
        property_names=PROPERTY_NAMES,
        timeout_s=120,
    )
    assert res["ok"], describe(res)
    got = res["messages"]
    assert len(got) == COUNT, describe(res)
    by_id = {m["msg_id"]: m for m in got}
    for s in produced["sent"]:
        m = by_id[s["msg_id"]]
        want = expected(s["i"])
        assert {k: m[k] for k in ("body", "keys", "tags")} == {
            k: want[k] for k in ("body", "keys", "tags")
        }
        assert m["properties"] == {"UNIQ_KEY": s["msg_id"], **want["properties"]}
        assert m["topic"] == TOPIC and m["queue_offset"] == s["offset"]
    # both brokers, every queue, offsets 0..n-1 without a gap or a repeat
    assert {m["broker"] for m in got} == {"broker-a", "broker-b"}
    per_queue: dict[tuple[str, int], list[int]] = {}
    for m in got:
        per_queue.setdefault((m["broker"], m["queue_id"]), []).append(m["queue_offset"])
    assert len(per_queue) == 2 * QUEUES
    for offsets in per_queue.values():
        assert sorted(offsets) == list(range(len(offsets)))


def test_cpp_push_consumer_consumes_all_and_commits(
    produced: dict[str, Any], cluster: LocalCluster, cpp_client: CppClient
) -> None:
    ns, group = cluster.namesrv_addr, "CID_CPP_INTEROP_PUSH"
    res = cpp_client.push(
        namesrv=ns,
        topic=TOPIC,
        group=group,
        expected=COUNT,
        expression="TagA || TagB",
        property_names=PROPERTY_NAMES,
        # longer than the client's offset persist period (5 s): the offsets reach the
        # broker by that, not only by the shutdown's commit, which the client itself
        # sometimes skips for a queue whose last batch it was still processing
        settle_s=6.0,
        timeout_s=120,
    )
    assert res["ok"], describe(res)
    bodies = [m["body"] for m in res["messages"]]
    assert set(bodies) == {expected(i)["body"] for i in range(COUNT)}
    assert len(bodies) == COUNT  # no redelivery in a clean run
    # the offsets arrive by UPDATE_CONSUMER_OFFSET (periodic and at shutdown): bounded wait
    deadline = time.monotonic() + 15
    while True:
        rows = [r for r in consumer_progress(ns, group) if r["topic"] == TOPIC]
        if len(rows) == 2 * QUEUES and all(r["lag"] == 0 for r in rows):
            break
        assert time.monotonic() < deadline, f"offsets not committed: {rows}\n{describe(res)}"
        time.sleep(0.2)
    assert sum(r["consumer_offset"] for r in rows) == COUNT


def test_cpp_push_consumer_filters_by_tag(
    produced: dict[str, Any], cluster: LocalCluster, cpp_client: CppClient
) -> None:
    res = cpp_client.push(
        namesrv=cluster.namesrv_addr,
        topic=TOPIC,
        group="CID_CPP_INTEROP_TAG_B",
        expected=COUNT // 2,
        expression="TagB",
        settle_s=2.0,  # time for a wrongly delivered TagA message to show up
        timeout_s=120,
    )
    assert res["ok"], describe(res)
    assert {m["tags"] for m in res["messages"]} == {"TagB"}
    assert len(res["messages"]) == COUNT // 2


def test_cpp_producer_to_pymq_consumer(produced: dict[str, Any], cluster: LocalCluster) -> None:
    got = {m.msg_id: m for m in pull_all(cluster.namesrv_addr, TOPIC)}
    assert len(got) == COUNT
    for s in produced["sent"]:
        m, want = got[s["msg_id"]], expected(s["i"])
        assert m.body == want["body"].encode()
        assert m.keys == want["keys"].split()
        assert m.tags == want["tags"]
        assert {k: m.properties[k] for k in PROPERTY_NAMES} == want["properties"]
        assert m.queue_offset == s["offset"]


def test_pymq_producer_to_cpp_consumers(cluster: LocalCluster, cpp_client: CppClient) -> None:
    ns, topic, n = cluster.namesrv_addr, "PymqToCpp", 200
    create_topic(cluster, topic)
    sent: dict[str, int] = {}
    with Producer(group="pymq_interop", namesrv=ns) as producer:
        for i in range(n):
            r = producer.send(
                Message(
                    topic=topic,
                    body=f"pymq-{i}-é".encode(),
                    tags=TAGS[i % len(TAGS)],
                    keys=[f"key-{i}", f"alt-{i}"],
                    properties={"color": f"red-{i}", "note": f"ünïcode-{i}"},
                )
            )
            assert r.status is SendStatus.SEND_OK
            sent[r.msg_id] = i
    names = ["color", "note"]
    pulled = cpp_client.pull(
        namesrv=ns, topic=topic, expected=n, group="CID_PYMQ_TO_CPP", property_names=names
    )
    assert pulled["ok"], describe(pulled)
    pushed = cpp_client.push(
        namesrv=ns, topic=topic, group="CID_PYMQ_TO_CPP_PUSH", expected=n, property_names=names
    )
    assert pushed["ok"], describe(pushed)
    for res in (pulled, pushed):
        assert len(res["messages"]) == n
        for m in res["messages"]:
            i = sent[m["msg_id"]]
            assert m["body"] == f"pymq-{i}-é"
            assert m["keys"] == f"key-{i} alt-{i}"
            assert m["tags"] == TAGS[i % len(TAGS)]
            assert m["properties"] == {
                "UNIQ_KEY": m["msg_id"],
                "color": f"red-{i}",
                "note": f"ünïcode-{i}",
            }
