"""Apache's C++ client (PyPI rocketmq 0.4.4) with session credentials against servers
with ACL on: its signatures (AccessKey, Signature, OnsChannel ext fields; HMAC-SHA1 over
its own header fields) are accepted, its producer and push consumer work with accounts
that may, and a wrong secret or a missing permission is refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector import PullConsumer
from connector.local import LocalCluster
from tests.support.acl import ADMIN, PUB_ONLY, SUB_ONLY, create_topic, start_acl_cluster
from tests.support.rocketmq_cpp import CppClient

TOPIC = "CppAcl"
COUNT = 40


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster, _ = start_acl_cluster(tmp_path_factory.mktemp("cpp-acl"))
    try:
        create_topic(cluster, TOPIC)
        yield cluster
    finally:
        cluster.stop()


def test_its_signed_producer_and_push_consumer_work(
    acl_cluster: LocalCluster, cpp_client: CppClient
) -> None:
    ns = acl_cluster.namesrv_addr
    sent = cpp_client.produce(namesrv=ns, topic=TOPIC, count=COUNT, tags="A",
                              credentials=list(PUB_ONLY))  # fmt: skip
    assert sent["error"] is None and [s["status"] for s in sent["sent"]] == ["OK"] * COUNT, sent
    got = cpp_client.push(namesrv=ns, topic=TOPIC, group="CID_CPP_ACL", expected=COUNT,
                          credentials=list(SUB_ONLY), count_distinct=True)  # fmt: skip
    assert got["error"] is None, got
    assert {m["body"] for m in got["messages"]} == {f"body-{i}" for i in range(COUNT)}


def test_a_wrong_secret_or_a_missing_permission_is_refused(
    acl_cluster: LocalCluster, cpp_client: CppClient, tmp_path: Path
) -> None:
    ns = acl_cluster.namesrv_addr
    # a wrong secret: the NameServer refuses its route lookup (the client says "No route")
    res = cpp_client.produce(namesrv=ns, topic=TOPIC, count=1, send_retries=0,
                             credentials=[PUB_ONLY[0], "notTheSecret"], timeout_s=60)  # fmt: skip
    assert res["sent"] == [] and "No route info" in str(res["failed"]), res
    # an account without PUB: the route is given, the broker refuses each send (NO_PERMISSION;
    # the client, its retries spent, reports "No route info" too); nothing is stored
    before = stored(ns)
    res = cpp_client.produce(namesrv=ns, topic=TOPIC, count=1, send_retries=0,
                             credentials=list(SUB_ONLY), timeout_s=60)  # fmt: skip
    assert res["sent"] == [] and res["failed"], res
    assert stored(ns) == before


def stored(ns: str) -> int:
    with PullConsumer(group="CID_COUNT", namesrv=ns, access_key=ADMIN[0],
                      secret_key=ADMIN[1]) as c:  # fmt: skip
        return sum(c.max_offset(q) for q in c.fetch_queues(TOPIC))
