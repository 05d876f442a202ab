"""ACL over remoting, with real servers: who may send, pull, administer, register;
signatures that are missing, unknown, wrong, replayed or expired; hot reload."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connector import Admin, Message, Producer, PullConsumer, SendStatus
from connector.client.connection import RemotingConnection
from connector.errors import AuthenticationFailedError, NoPermissionError, PyMQError
from connector.local import LocalCluster, ServerProcess
from connector.protocol.acl import SIGN_TIME, Credentials, SignSequence, sign_remoting
from connector.protocol.batch import encode_batch
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.server.remoting import ACL_OVERLAP_BODY
from tests.support.acl import (
    ADMIN,
    DENIED,
    PUB_ONLY,
    RULES,
    SUB_ONLY,
    acl_env,
    create_topic,
    start_acl_cluster,
)
from tests.support.waits import wait_until


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Path]]:
    cluster, acl_file = start_acl_cluster(tmp_path_factory.mktemp("acl"))
    try:
        create_topic(cluster, "T")
        create_topic(cluster, "Secret")
        yield cluster, acl_file
    finally:
        cluster.stop()


def send(cluster: LocalCluster, keys: tuple[str, str] | None, topic: str = "T") -> SendStatus:
    ak, sk = keys or (None, None)
    with Producer(namesrv=cluster.namesrv_addr, access_key=ak, secret_key=sk,
                  retry_times_when_send_failed=0) as p:  # fmt: skip
        return p.send(Message(topic=topic, body=b"x")).status


def pull_count(cluster: LocalCluster, keys: tuple[str, str] | None, topic: str = "T") -> int:
    ak, sk = keys or (None, None)
    with PullConsumer(group="g1", namesrv=cluster.namesrv_addr, access_key=ak,
                      secret_key=sk) as c:  # fmt: skip
        return sum(len(c.pull(q, 0, 32).messages) for q in c.fetch_queues(topic))


def test_unsigned_unknown_and_wrong_secret_are_refused(acl: tuple[LocalCluster, Path]) -> None:
    cluster, _ = acl
    for keys, why in (
        (None, "is not signed"),
        (("nobody123", "whatever1"), "access key nobody123 is not known"),
        ((PUB_ONLY[0], "notTheSecret"), "does not match"),
    ):
        with pytest.raises(AuthenticationFailedError, match=why) as err:
            send(cluster, keys)
        assert err.value.code == "AUTHENTICATION_FAILED"
        assert err.value.fields["response_code"] == ResponseCode.NO_PERMISSION
        with pytest.raises(AuthenticationFailedError):
            pull_count(cluster, keys)


def test_pub_only_sends_sub_only_pulls(acl: tuple[LocalCluster, Path]) -> None:
    cluster, _ = acl
    assert send(cluster, PUB_ONLY) is SendStatus.SEND_OK
    with pytest.raises(NoPermissionError, match="subOnly1 may not PUB topic T"):
        send(cluster, SUB_ONLY)
    with pytest.raises(NoPermissionError, match="pubOnly1 may not SUB topic T"):
        pull_count(cluster, PUB_ONLY)
    assert pull_count(cluster, SUB_ONLY) >= 1


def test_deny_wins_over_the_default(acl: tuple[LocalCluster, Path]) -> None:
    cluster, _ = acl
    assert send(cluster, DENIED, "T") is SendStatus.SEND_OK
    with pytest.raises(NoPermissionError, match="denyKey1 may not PUB topic Secret"):
        send(cluster, DENIED, "Secret")
    with pytest.raises(NoPermissionError, match="may not SUB topic Secret"):
        pull_count(cluster, DENIED, "Secret")
    assert send(cluster, ADMIN, "Secret") is SendStatus.SEND_OK  # admin, no grants: all


def test_only_an_admin_creates_and_deletes_topics(acl: tuple[LocalCluster, Path]) -> None:
    cluster, _ = acl
    with Admin(namesrv=cluster.namesrv_addr, access_key=DENIED[0], secret_key=DENIED[1]) as a:
        with pytest.raises(NoPermissionError, match="not an admin account"):
            a.create_topic("Other", read_queue_nums=1, write_queue_nums=1)
        with pytest.raises(NoPermissionError, match="not an admin account"):
            a.delete_topic("T")
        assert "T" in a.topic_list()  # reading the topic list needs any account


def raw_request(addr: str, cmd: RemotingCommand) -> RemotingCommand:
    conn = RemotingConnection(addr)
    try:
        return conn.invoke(cmd, 5.0)
    finally:
        conn.close()


def test_a_replayed_or_expired_request_is_refused(acl: tuple[LocalCluster, Path]) -> None:
    cluster, _ = acl
    addr = cluster.namesrvs[0].addr
    creds, seq = Credentials(*SUB_ONLY), SignSequence()
    ext = {"topic": "T"}
    sign_remoting(ext, b"", creds, seq)
    first = raw_request(addr, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(ext)))
    assert first.code == ResponseCode.SUCCESS
    again = raw_request(addr, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, dict(ext)))
    assert again.code == ResponseCode.NO_PERMISSION
    assert again.ext["errorCode"] == "AUTHENTICATION_FAILED"
    assert "replay" in (again.remark or "")
    # signed now, but with a time ten minutes old (the signature covers the time)
    old = {"topic": "T"}
    sign_remoting(old, b"", creds, seq)
    old[SIGN_TIME] = str(int(time.time() * 1000) - 600_000)
    sign_remoting(old, b"", creds)  # signed again over the old time, same number
    expired = raw_request(addr, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, old))
    assert expired.code == ResponseCode.NO_PERMISSION
    assert "away from this server's clock" in (expired.remark or "")
    # a request whose signed fields were changed after signing
    forged = {"topic": "T"}
    sign_remoting(forged, b"", creds, seq)
    forged["topic"] = "Secret"
    answer = raw_request(addr, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, forged))
    assert answer.code == ResponseCode.NO_PERMISSION
    assert "does not match" in (answer.remark or "")


def test_a_large_batch_is_stored_only_once_its_signature_checks(
    acl: tuple[LocalCluster, Path],
) -> None:
    """A batch body this large is hashed beside the broker's scan of it: a request that
    fails the check (any part of it) is refused as a small one is, its batch not stored,
    whatever the scan found; the answer names the refusal, not what the scan found."""
    cluster, _ = acl
    create_topic(cluster, "Big")
    broker = cluster.brokers[0].addr
    body = encode_batch([(bytes([i % 251]) * 100, 0, b"") for i in range(400)])
    assert len(body) >= ACL_OVERLAP_BODY
    seq = SignSequence()

    def batch(keys: tuple[str, str], topic: str = "Big", **change: Any) -> RemotingCommand:
        ext = {"producerGroup": "pg", "topic": topic, "queueId": "0", "sysFlag": "0",
               "batch": "true", "bornTimestamp": str(int(time.time() * 1000))}  # fmt: skip
        sign_remoting(ext, body, Credentials(*keys), seq)
        sent = change.pop("body", body)
        ext.update(change)
        return raw_request(broker, RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, ext, sent))

    def stored(topic: str = "Big") -> int:
        with Admin(namesrv=cluster.namesrv_addr, access_key=ADMIN[0], secret_key=ADMIN[1]) as a:
            return sum(q["max_offset"] - q["min_offset"] for q in a.topic_status(topic))

    assert batch(PUB_ONLY).code == ResponseCode.SUCCESS
    assert stored() == 400
    refused = {
        "the body changed": batch(PUB_ONLY, body=body[:-1] + b"?"),
        "a field changed": batch(PUB_ONLY, queueId="1"),
        "the wrong secret": batch((PUB_ONLY[0], "notTheSecret")),
        "a broken batch, wrongly signed": batch((PUB_ONLY[0], "nope"), body=b"\0" * 20_000),
        "no such topic, wrongly signed": batch((PUB_ONLY[0], "nope"), topic="NoSuchTopic"),
    }
    for why, answer in refused.items():
        assert answer.code == ResponseCode.NO_PERMISSION, why
        assert answer.ext["errorCode"] == "AUTHENTICATION_FAILED", why
    ext = {"producerGroup": "pg", "topic": "Big", "queueId": "0", "sysFlag": "0",
           "batch": "true", "bornTimestamp": str(int(time.time() * 1000))}  # fmt: skip
    sign_remoting(ext, body, Credentials(*PUB_ONLY), seq)
    cmd = RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, ext, body)
    assert raw_request(broker, cmd).code == ResponseCode.SUCCESS
    replayed = raw_request(broker, RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, dict(ext), body))
    assert replayed.code == ResponseCode.NO_PERMISSION and "replay" in (replayed.remark or "")
    no_pub = batch(SUB_ONLY)
    assert no_pub.code == ResponseCode.NO_PERMISSION
    assert "subOnly1 may not PUB topic Big" in (no_pub.remark or "")
    assert batch(DENIED, topic="Secret").code == ResponseCode.NO_PERMISSION
    assert stored() == 800  # the two good batches, nothing of the refused ones
    with Admin(namesrv=cluster.namesrv_addr, access_key=ADMIN[0], secret_key=ADMIN[1]) as a:
        assert "NoSuchTopic" not in a.topic_list()  # not auto-created by a refused batch


def test_a_broker_without_an_account_cannot_register(
    acl: tuple[LocalCluster, Path], tmp_path: Path
) -> None:
    cluster, acl_file = acl
    for name, keys in (("rogue-a", None), ("rogue-b", ("pubOnly1", "pubSecret1"))):
        log = tmp_path / f"{name}.log"
        rogue = ServerProcess(
            "broker",
            ["--name", name, "--port", "0", "--namesrv", cluster.namesrv_addr,
             "--store", str(tmp_path / name)],
            log_path=log, env=acl_env(acl_file, broker=keys), name=name,
        )  # fmt: skip
        rogue.start(60)
        try:
            wait_until(lambda log=log: "refused the registration" in log.read_text(), 30,
                       what=f"{name}'s registration refused")  # fmt: skip
            with Admin(namesrv=cluster.namesrv_addr, access_key=ADMIN[0],
                       secret_key=ADMIN[1]) as a:  # fmt: skip
                assert name not in {b.broker_name for b in a.cluster_list().brokers}
        finally:
            rogue.terminate()
    assert "pubSecret1" not in log.read_text()  # the secret of the last one never logged


def test_hot_reload_grants_and_revokes(acl: tuple[LocalCluster, Path]) -> None:
    cluster, acl_file = acl
    granted = RULES.replace(
        "    defaultTopicPerm: SUB\n    defaultGroupPerm: SUB\n",
        "    defaultTopicPerm: SUB\n    defaultGroupPerm: SUB\n"
        "    topicPerms:\n      - T=PUB|SUB\n",
    )
    assert granted != RULES
    try:
        acl_file.write_text(granted)
        wait_until(lambda: _sends(cluster, SUB_ONLY), 15, what="subOnly1 granted PUB on T")
        # a broken file is refused (logged); the rules in force stay
        acl_file.write_text(granted + "  - accessKey: [broken\n")
        _wait_for_log(cluster, "the previous rules stay")
        assert _sends(cluster, SUB_ONLY)
        acl_file.write_text(RULES)
        wait_until(lambda: not _sends(cluster, SUB_ONLY), 15, what="the grant revoked")
    finally:
        acl_file.write_text(RULES)


def test_a_globally_white_listed_address_needs_no_signature(
    acl: tuple[LocalCluster, Path],
) -> None:
    cluster, acl_file = acl
    try:
        acl_file.write_text("globalWhiteRemoteAddresses: ['127.0.0.{1,2}']\n" + RULES)
        wait_until(lambda: _sends(cluster, None), 15, what="unsigned sends accepted")
        acl_file.write_text("globalWhiteRemoteAddresses: ['10.0.0.0/8']\n" + RULES)
        wait_until(lambda: not _sends(cluster, None), 15, what="unsigned sends refused")
        # an account's own white list: unsigned (a wrong secret) passes, within its rights
        mine = RULES.replace(
            "  - accessKey: pubOnly1\n",
            "  - accessKey: pubOnly1\n    whiteRemoteAddress: 127.0.0.1\n",
        )
        acl_file.write_text(mine)
        wait_until(lambda: _sends(cluster, (PUB_ONLY[0], "wrongSecret")), 15,
                   what="pubOnly1 trusted from 127.0.0.1")  # fmt: skip
        with pytest.raises(NoPermissionError, match="may not SUB"):
            pull_count(cluster, (PUB_ONLY[0], "wrongSecret"))
    finally:
        acl_file.write_text(RULES)


def _sends(cluster: LocalCluster, keys: tuple[str, str] | None) -> bool:
    try:
        return send(cluster, keys) is SendStatus.SEND_OK
    except PyMQError as exc:
        if exc.code not in ("NO_PERMISSION", "AUTHENTICATION_FAILED"):
            raise
        return False


def _wait_for_log(cluster: LocalCluster, text: str) -> None:
    logs = [p.log_path for p in (*cluster.namesrvs, *cluster.brokers)]
    # a request makes the servers look at the file
    wait_until(
        lambda: (_sends(cluster, SUB_ONLY) or True)
        and all(re.search(re.escape(text), Path(log).read_text()) for log in logs),
        15, what=f"{text!r} logged by every server",
    )  # fmt: skip
