"""Orderly queue locks outlive a broker restart: a lock's holder keeps it, another
member of the group cannot take it before the holder has had a full lock time to
come back (RocketMQ's broker forgets them, letting two members consume one queue)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from connector.client.connection import RemotingConnection
from connector.local import LocalCluster, ServerProcess
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

GROUP, TOPIC = "OrderlyG", "OrderlyT"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path / "cluster", brokers=1) as c:
        yield c


def _member(addr: str, client_id: str) -> RemotingConnection:
    """A connection of a live member of the group (its heartbeat sent)."""
    conn = RemotingConnection(addr)
    body = orjson.dumps({
        "clientID": client_id, "producerDataSet": [],
        "consumerDataSet": [{
            "groupName": GROUP, "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet": [{"topic": TOPIC, "subString": "*"}], "unitMode": False,
        }],
    })  # fmt: skip
    resp = conn.invoke(RemotingCommand(RequestCode.HEART_BEAT, {}, body), 10)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return conn


def _lock(addr: str, client_id: str, queue_ids: list[int]) -> list[int]:
    """LOCK_BATCH_MQ as ``client_id``, a member that stays connected: the queue ids it
    holds."""
    body = orjson.dumps({
        "consumerGroup": GROUP, "clientId": client_id, "onlyThisBroker": True,
        "mqSet": [{"topic": TOPIC, "brokerName": "broker-a", "queueId": q} for q in queue_ids],
    })  # fmt: skip
    conn = _MEMBERS.get((addr, client_id)) or _member(addr, client_id)
    _MEMBERS[addr, client_id] = conn
    resp = conn.invoke(RemotingCommand(RequestCode.LOCK_BATCH_MQ, {}, body), 10)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return sorted(int(m["queueId"]) for m in orjson.loads(resp.body)["lockOKMQSet"])


_MEMBERS: dict[tuple[str, str], RemotingConnection] = {}


@pytest.fixture(autouse=True)
def _close_members() -> Iterator[None]:
    yield
    for conn in _MEMBERS.values():
        conn.close()
    _MEMBERS.clear()


@pytest.mark.parametrize("crash", [True, False], ids=["kill-9", "stop"])
def test_a_restarted_broker_keeps_its_queue_locks_for_their_holders(
    cluster: LocalCluster, crash: bool
) -> None:
    broker = cluster.brokers[0]
    assert _lock(broker.addr, "host@a", [0, 1]) == [0, 1]
    assert _lock(broker.addr, "host@b", [0, 1, 2]) == [2]  # b takes what is free
    cluster.restart_broker("broker-a", crash=crash)
    broker = cluster.brokers[0]
    # a member reaching the new broker first takes nothing of a's (nor a of b's)
    assert _lock(broker.addr, "host@c", [0, 1, 2, 3]) == [3]
    assert _lock(broker.addr, "host@b", [0, 1, 2]) == [2]
    assert _lock(broker.addr, "host@a", [0, 1, 2]) == [0, 1]  # renewed by its holder


def test_a_lock_file_that_does_not_parse_is_skipped(cluster: LocalCluster) -> None:
    """A corrupt lock table (and backup) costs the locks, not the broker's start."""
    old = cluster.brokers[0]
    assert _lock(old.addr, "host@a", [0]) == [0]
    assert _lock(old.addr, "host@a", [1]) == [1]  # written twice: a backup too
    old.kill()
    files = list(cluster.data_dir.rglob("queue_locks.json*"))
    assert files
    for path in files:
        path.write_bytes(b"{not json")
    new = ServerProcess(old.role, old.args, log_path=old.log_path, env=old.env, name=old.name)
    cluster.brokers[0] = new.start()
    assert _lock(new.addr, "host@b", [0, 1]) == [0, 1]  # nothing kept: free
