"""Transactional messages against a real NameServer and broker: commit, rollback,
unknown -> check-back -> commit / rollback, a producer gone, restarts between the
steps, and END_TRANSACTION repeated (idempotent) or contradicted (refused)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from connector import LocalTransactionState, Message, TransactionProducer
from connector.client.consumer import PullConsumer
from connector.errors import PyMQError, TransactionDecidedError
from connector.local import LocalCluster
from connector.protocol.message import MessageExt
from connector.protocol.msgid import decode_offset_msg_id
from connector.protocol.remoting import RequestCode
from connector.protocol.status import SendStatus
from tests.support.cluster import pull_all
from tests.support.processes import clean_env
from tests.support.waits import wait_until

S = LocalTransactionState


class Listener:
    """Answers by body: b"commit..." commits, b"rollback..." rolls back, anything
    else is UNKNOW until ``decide`` says what its check-back answers."""

    def __init__(self) -> None:
        self.checks: list[MessageExt] = []
        self.later: dict[bytes, LocalTransactionState] = {}
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        if msg.body.startswith(b"commit"):
            return S.COMMIT_MESSAGE
        if msg.body.startswith(b"rollback"):
            return S.ROLLBACK_MESSAGE
        if msg.body.startswith(b"raise"):
            raise RuntimeError("the local transaction failed oddly")
        return S.UNKNOW

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        with self.lock:
            self.checks.append(msg)
            return self.later.get(msg.body, S.UNKNOW)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = clean_env(
        PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500",
        PYMQ_TRANSACTION_TIMEOUT_MS="300",
        PYMQ_TRANSACTION_CHECK_INTERVAL_MS="200",
        PYMQ_TRANSACTION_CHECK_MAX="20",
    )
    with LocalCluster(tmp_path_factory.mktemp("tx"), brokers=1, env=env) as c:
        yield c


def bodies(cluster: LocalCluster, topic: str) -> list[bytes]:
    with PullConsumer(group="tx-reader", namesrv=cluster.namesrv_addr) as consumer:
        return sorted(m.body for m in pull_all(consumer, topic))


def producer(cluster: LocalCluster, listener: Listener, group: str) -> TransactionProducer:
    return TransactionProducer(
        group=group, namesrv=cluster.namesrv_addr, listener=listener,
        heartbeat_broker_interval_ms=300, poll_name_server_interval_ms=300,
    )  # fmt: skip


def test_commit_and_rollback_decide_what_consumers_see(cluster: LocalCluster) -> None:
    topic = "TxBasic"
    with producer(cluster, Listener(), "tx-basic") as tp:
        results = [
            tp.send_message_in_transaction(Message(topic=topic, body=b"commit-%d" % i))
            for i in range(20)
        ] + [
            tp.send_message_in_transaction(Message(topic=topic, body=b"rollback-%d" % i))
            for i in range(20)
        ]
    for r in results:
        assert r.status is SendStatus.SEND_OK
        assert r.transaction_id == r.msg_id
    assert [r.local_transaction_state for r in results] == [S.COMMIT_MESSAGE] * 20 + [
        S.ROLLBACK_MESSAGE
    ] * 20
    assert bodies(cluster, topic) == sorted(b"commit-%d" % i for i in range(20))


def test_unknown_is_checked_back_and_decided_by_the_answer(cluster: LocalCluster) -> None:
    topic = "TxCheck"
    listener = Listener()
    listener.later = {b"later-yes": S.COMMIT_MESSAGE, b"later-no": S.ROLLBACK_MESSAGE}
    with producer(cluster, listener, "tx-check") as tp:
        for body in (b"later-yes", b"later-no", b"raise-yes"):
            r = tp.send_message_in_transaction(Message(topic=topic, body=body, keys=["k1"]))
            assert r.local_transaction_state is S.UNKNOW
        assert bodies(cluster, topic) == []  # nothing visible while undecided
        wait_until(lambda: bodies(cluster, topic) == [b"later-yes"], 30,
                   what="the check-back's commit")  # fmt: skip
        with listener.lock:
            listener.later[b"raise-yes"] = S.COMMIT_MESSAGE
        wait_until(lambda: bodies(cluster, topic) == [b"later-yes", b"raise-yes"], 30,
                   what="the second check-back's commit")  # fmt: skip
    checked = {m.body: m for m in listener.checks}
    assert checked[b"later-yes"].topic == topic  # the message as sent, real topic
    assert checked[b"later-yes"].keys == ["k1"]


def test_a_half_whose_producer_is_gone_is_rolled_back_after_the_last_check(
    cluster: LocalCluster,
) -> None:
    topic = "TxGone"
    with producer(cluster, Listener(), "tx-gone") as tp:
        tp.send_message_in_transaction(Message(topic=topic, body=b"orphan"))
    # no producer of the group is left: after transaction_check_max (20) check passes the
    # broker rolls the half back (logged) and no check-back ever reaches anyone
    broker = cluster.brokers[0]
    wait_until(
        lambda: "undecided after 20 check-backs: rolled back" in broker.log_path.read_text(),
        30, what="the rollback of the orphan",
    )  # fmt: skip
    late = Listener()
    late.later[b"orphan"] = S.COMMIT_MESSAGE
    with producer(cluster, late, "tx-gone") as tp2:  # too late: decided
        tp2.send_message_in_transaction(Message(topic=topic, body=b"commit-after"))
    assert bodies(cluster, topic) == [b"commit-after"]
    assert not [m for m in late.checks if m.body == b"orphan"]


def _end(tp: TransactionProducer, cluster: LocalCluster, r: Any, kind: int) -> str:
    """END_TRANSACTION by hand, as a RocketMQ client sends it; the broker's remark."""
    _, phys = decode_offset_msg_id(r.offset_msg_id)
    resp = tp.rpc.call(
        cluster.brokers[0].addr, RequestCode.END_TRANSACTION,
        {
            "producerGroup": tp.group, "tranStateTableOffset": str(r.queue_offset),
            "commitLogOffset": str(phys), "commitOrRollback": str(kind),
            "fromTransactionCheck": "false", "msgId": r.msg_id, "transactionId": r.msg_id,
        },
        timeout_s=5,
    )  # fmt: skip
    return resp.remark or ""


def test_end_transaction_is_idempotent_and_refuses_a_contradiction(
    cluster: LocalCluster,
) -> None:
    topic = "TxTwice"
    with producer(cluster, Listener(), "tx-twice") as tp:
        committed = tp.send_message_in_transaction(Message(topic=topic, body=b"commit-once"))
        rolled = tp.send_message_in_transaction(Message(topic=topic, body=b"rollback-once"))
        for _ in range(3):  # RocketMQ's broker would deliver it three more times
            assert _end(tp, cluster, committed, 8) == "already committed"
        assert _end(tp, cluster, rolled, 12) == "already rolled back"
        with pytest.raises(TransactionDecidedError, match="committed already"):
            _end(tp, cluster, committed, 12)
        with pytest.raises(TransactionDecidedError, match="rolled back already"):
            _end(tp, cluster, rolled, 8)
        with pytest.raises(PyMQError, match="no half message"):  # not a half's offset
            tp.rpc.call(
                cluster.brokers[0].addr, RequestCode.END_TRANSACTION,
                {"producerGroup": tp.group, "tranStateTableOffset": "0",
                 "commitLogOffset": "1", "commitOrRollback": "8"},
                timeout_s=5,
            )  # fmt: skip
    assert bodies(cluster, topic) == [b"commit-once"]


def test_decisions_survive_a_broker_kill_and_undecided_halves_are_checked_after_it(
    cluster: LocalCluster,
) -> None:
    topic = "TxRestart"
    listener = Listener()
    with producer(cluster, listener, "tx-restart") as tp:
        done = tp.send_message_in_transaction(Message(topic=topic, body=b"commit-before"))
        tp.send_message_in_transaction(Message(topic=topic, body=b"rollback-before"))
        pending = tp.send_message_in_transaction(Message(topic=topic, body=b"open"))
        assert pending.local_transaction_state is S.UNKNOW
        cluster.restart_broker("broker-a", crash=True)
        # the restarted broker knows both decisions: repeated, they change nothing
        wait_until(lambda: bodies(cluster, topic) == [b"commit-before"], 30,
                   what="the committed message after the restart")  # fmt: skip
        assert _end(tp, cluster, done, 8) == "already committed"
        with listener.lock:
            listener.later[b"open"] = S.COMMIT_MESSAGE  # the check-back after the restart
        wait_until(lambda: bodies(cluster, topic) == [b"commit-before", b"open"], 30,
                   what="the open transaction committed by a check-back")  # fmt: skip
    assert bodies(cluster, topic) == [b"commit-before", b"open"]


def test_the_rest_edge_sends_halves_and_decides_them_once(cluster: LocalCluster) -> None:
    topic = "TxRest"
    base = f"http://{cluster.brokers[0].http_addr}"
    with httpx.Client(base_url=base, timeout=10) as http:
        assert http.put(f"/topics/{topic}", json={"read_queue_nums": 2, "write_queue_nums": 2,
                                                  "perm": 6}).status_code == 200  # fmt: skip
        plain = http.post(f"/topics/{topic}/messages", json={"body": "plain"}).json()
        assert "transaction_id" not in plain  # the shape of a plain send's answer is unchanged
        half = http.post(
            f"/topics/{topic}/messages",
            json={"body": "held", "transaction_group": "tx-rest", "queue_id": 1},
        ).json()
        assert half["transaction_id"] == half["msg_id"]
        assert (half["topic"], half["queue_id"]) == (topic, 1)  # the real queue, as RocketMQ
        assert bodies(cluster, topic) == [b"plain"]
        end = {"producer_group": "tx-rest", "offset_msg_id": half["offset_msg_id"],
               "queue_offset": half["queue_offset"], "action": "commit"}  # fmt: skip
        first = http.post("/transactions/end", json=end)
        assert first.status_code == 200, first.text
        assert first.json() == {"decision": "COMMIT", "already": False,
                                "half_queue_offset": half["queue_offset"]}  # fmt: skip
        again = http.post("/transactions/end", json=end).json()
        assert again["already"] is True
        refused = http.post("/transactions/end", json={**end, "action": "rollback"})
        assert refused.status_code == 409
        assert refused.json()["code"] == "TRANSACTION_ALREADY_DECIDED"
        other = http.post("/transactions/end", json={**end, "producer_group": "someone-else"})
        assert other.status_code == 403
        bad = http.post("/transactions/end", json={**end, "offset_msg_id": "Z" * 32})
        assert bad.status_code == 400 and bad.json()["code"] == "MESSAGE_ILLEGAL", bad.text
        nowhere = plain["offset_msg_id"]  # a message, not a half
        missing = http.post("/transactions/end", json={**end, "offset_msg_id": nowhere})
        assert missing.status_code == 404, missing.text
    assert bodies(cluster, topic) == [b"held", b"plain"]


def _half(r: Any) -> tuple[int, int]:
    return r.queue_offset, decode_offset_msg_id(r.offset_msg_id)[1]


def test_a_batch_commit_makes_its_halves_visible_once_and_drops_other_attempts(
    cluster: LocalCluster,
) -> None:
    topic = "TxBatch"
    writer = "query-1"
    with producer(cluster, Listener(), "tx-batch") as tp:
        first = tp.send(Message(topic=topic, body=b"plain"))  # the topic exists, routed
        mq0 = first.queue
        mq1 = type(mq0)(topic, mq0.broker_name, (mq0.queue_id + 1) % 4)
        halves = [
            tp.send_batch(
                [Message(topic=topic, body=b"b7-%d-%d" % (q, i)) for i in range(50)],
                queue=mq,
                half=(writer, 7),
            )
            for q, mq in enumerate((mq0, mq1, mq0))
        ]
        stray = tp.send_batch([Message(topic=topic, body=b"stray")], queue=mq1, half=(writer, 7))
        assert bodies(cluster, topic) == [b"plain"]  # halves: nothing readable
        broker = mq0.broker_name
        assert {_state(cluster, r) for r in halves} == {"open"}
        answer = tp.commit_batch(broker, writer, 7, [_half(r) for r in halves], manifest={"n": 3})
        assert {_state(cluster, r) for r in halves} == {"committed"}
        assert answer["already"] is False and answer["messages"] == 150
        want = sorted([b"plain"] + [b"b7-%d-%d" % (q, i) for q in range(3) for i in range(50)])
        assert bodies(cluster, topic) == want
        # the same key again (a re-run after a driver restart): nothing changes, and the
        # first commit's halves and manifest come back
        again = tp.commit_batch(broker, writer, 7, [_half(stray)], manifest={"n": 1})
        assert again["already"] is True
        assert again["halves"] == sorted(r.queue_offset for r in halves)
        assert again["manifest"] == {"n": 3}
        # the stray attempt of that key is rolled back by the next check pass
        wait_until(
            lambda: _state(cluster, stray) == "rolled_back", 30,
            what="the stray half rolled back",
        )  # fmt: skip
        assert bodies(cluster, topic) == want


def _state(cluster: LocalCluster, r: Any) -> str:
    """A half's state, as the broker's REST API tells it (changing nothing)."""
    url = f"http://{cluster.brokers[0].http_addr}/transactions/{r.queue_offset}"
    got = httpx.get(url, timeout=10)
    assert got.status_code == 200, got.text
    state: str = got.json()["state"]
    return state


def test_a_batch_commit_is_all_or_none_and_an_abandoned_batch_rolls_back(
    cluster: LocalCluster,
) -> None:
    topic = "TxBatchBad"
    with producer(cluster, Listener(), "tx-batch-bad") as tp:
        first = tp.send(Message(topic=topic, body=b"plain"))
        mq = first.queue
        mine = tp.send_batch([Message(topic=topic, body=b"mine")], queue=mq, half=("w", 1))
        other = tp.send_batch([Message(topic=topic, body=b"other")], queue=mq, half=("w", 2))
        with pytest.raises(PyMQError, match="not one of batch 1"):
            tp.commit_batch(mq.broker_name, "w", 1, [_half(mine), _half(other)])
        assert bodies(cluster, topic) == [b"plain"]  # nothing of it committed
        # never committed: both roll back after the timeout and the last check pass
        for r in (mine, other):
            wait_until(lambda r=r: _state(cluster, r) == "rolled_back", 30,
                       what="the abandoned halves rolled back")  # fmt: skip
        with pytest.raises(TransactionDecidedError, match="rolled back already"):
            tp.commit_batch(mq.broker_name, "w", 1, [_half(mine)])
    assert bodies(cluster, topic) == [b"plain"]
