"""Consumer send-back, retry topics and dead letters, through the HTTP edge.

``POST /consumers/{g}/send-back`` re-appends a consumed message: to ``%RETRY%g``
through the schedule topic, or straight to ``%DLQ%g``; a send to ``%RETRY%g``
whose reconsume count reached the maximum is dead-lettered too.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.support.rest_app import (
    ClientFactory,
    body_of,
    commit_log_max,
    pull_ok,
    queue_max_offsets,
    send,
    topic_status,
)

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def send_back(client: TestClient, group: str, offset_msg_id: str, **fields: Any) -> dict[str, Any]:
    resp = client.post(
        f"/consumers/{group}/send-back", json={"offset_msg_id": offset_msg_id, **fields}
    )
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    assert out["status"] == "SEND_OK", out
    return out


def only_message(client: TestClient, topic: str, queue_id: int = 0) -> dict[str, Any]:
    res = pull_ok(client, topic, queue_id, 0)
    assert res["status"] == "FOUND", res
    [msg] = res["messages"]
    assert isinstance(msg, dict)
    return msg


def test_send_back_with_negative_delay_goes_straight_to_the_dlq(client: TestClient) -> None:
    orig = send(
        client,
        "Orders",
        body="order-1",
        tags="new",
        keys=["o1", "cust7"],
        queue_id=2,
        properties={"trace": "abc"},
    )
    res = send_back(client, "billing", orig["offset_msg_id"], delay_level=-1)
    assert (res["topic"], res["queue_id"], res["queue_offset"]) == ("%DLQ%billing", 0, 0)

    dlq = topic_status(client, "%DLQ%billing")
    assert (dlq["read_queue_nums"], dlq["write_queue_nums"], dlq["perm"]) == (1, 1, 6)
    msg = only_message(client, "%DLQ%billing")
    assert body_of(msg) == b"order-1"
    assert msg["keys"] == ["o1", "cust7"]
    assert msg["tags"] == "new"
    assert msg["topic"] == "%DLQ%billing"
    assert msg["msg_id"] == orig["msg_id"]  # the producer's UNIQ_KEY travels along
    assert msg["offset_msg_id"] == res["offset_msg_id"] != orig["offset_msg_id"]
    props = msg["properties"]
    assert props["RETRY_TOPIC"] == "Orders"
    assert props["ORIGIN_MESSAGE_ID"] == orig["msg_id"]
    assert props["trace"] == "abc"
    assert "DELAY" not in props
    assert "REAL_TOPIC" not in props
    assert msg["reconsume_times"] == 1
    # nothing went through the retry topic or the schedule topic
    assert "%RETRY%billing" not in {t["topic"] for t in client.get("/topics").json()["topics"]}
    assert sum(queue_max_offsets(client, SCHEDULE)) == 0
    # the original is untouched
    assert only_message(client, "Orders", 2)["properties"].get("RETRY_TOPIC") is None


def test_send_back_default_goes_to_the_retry_topic_via_the_schedule(client: TestClient) -> None:
    orig = send(client, "Orders", body="order-2", keys=["o2"], queue_id=0)
    res = send_back(client, "billing", orig["offset_msg_id"])
    level = 3  # 3 + reconsume times (0), RocketMQ's default first retry delay
    assert (res["topic"], res["queue_id"]) == (SCHEDULE, level - 1)
    retry = topic_status(client, "%RETRY%billing")
    assert (retry["read_queue_nums"], retry["write_queue_nums"]) == (1, 1)
    assert queue_max_offsets(client, "%RETRY%billing") == [0]  # not delivered yet (10 s)
    msg = only_message(client, SCHEDULE, level - 1)
    props = msg["properties"]
    assert (props["REAL_TOPIC"], props["REAL_QID"], props["DELAY"]) == ("%RETRY%billing", "0", "3")
    assert props["RETRY_TOPIC"] == "Orders"
    assert props["ORIGIN_MESSAGE_ID"] == orig["msg_id"]
    assert props["MAX_RECONSUME_TIMES"] == "16"
    assert (body_of(msg), msg["keys"], msg["reconsume_times"]) == (b"order-2", ["o2"], 1)
    # an explicit level is honoured
    res = send_back(client, "billing", orig["offset_msg_id"], delay_level=5)
    assert (res["topic"], res["queue_id"]) == (SCHEDULE, 4)


def test_send_back_after_max_reconsume_times_goes_to_the_dlq(client: TestClient) -> None:
    # a message consumed for the 16th time (the default maximum) is dead-lettered
    tired = send(client, "Orders", body="tired", reconsume_times=16, queue_id=1)
    res = send_back(client, "cg", tired["offset_msg_id"])
    assert (res["topic"], res["queue_id"]) == ("%DLQ%cg", 0)
    assert only_message(client, "%DLQ%cg")["reconsume_times"] == 17
    # one below the maximum still gets its retry
    almost = send(client, "Orders", body="almost", reconsume_times=15, queue_id=1)
    res = send_back(client, "cg", almost["offset_msg_id"])
    assert res["topic"] == SCHEDULE
    assert queue_max_offsets(client, "%DLQ%cg") == [1]
    # the consumer may lower the maximum per request
    again = send(client, "Orders", body="again", reconsume_times=2, queue_id=1)
    res = send_back(client, "cg", again["offset_msg_id"], max_reconsume_times=2)
    assert res["topic"] == "%DLQ%cg"
    assert queue_max_offsets(client, "%DLQ%cg") == [2]


def test_json_send_to_retry_topic_past_max_goes_to_dlq(client: TestClient) -> None:
    log_before = commit_log_max(client)
    res = send(client, "%RETRY%grp", body="dead", keys=["k9"], tags="T", reconsume_times=16)
    assert (res["topic"], res["queue_id"], res["queue_offset"]) == ("%DLQ%grp", 0, 0)
    assert commit_log_max(client) > log_before
    msg = only_message(client, "%DLQ%grp")
    assert (body_of(msg), msg["keys"], msg["tags"]) == (b"dead", ["k9"], "T")
    assert msg["reconsume_times"] == 16
    assert msg["msg_id"] == res["msg_id"]
    # below the maximum it stays in the retry topic
    live = send(client, "%RETRY%grp", body="alive", reconsume_times=15)
    assert (live["topic"], live["queue_id"]) == ("%RETRY%grp", 0)
    assert body_of(only_message(client, "%RETRY%grp")) == b"alive"
    # the message's own MAX_RECONSUME_TIMES wins over the broker's default
    low = send(client, "%RETRY%grp", body="low", reconsume_times=3, max_reconsume_times=3)
    assert low["topic"] == "%DLQ%grp"
    ok = send(client, "%RETRY%grp", body="ok", reconsume_times=2, max_reconsume_times=3)
    assert ok["topic"] == "%RETRY%grp"
    # a dead letter is never delayed: DELAY is dropped, the schedule topic untouched
    sched_before = sum(queue_max_offsets(client, SCHEDULE))
    delayed = send(client, "%RETRY%grp", body="late", reconsume_times=16, delay_level=3)
    assert delayed["topic"] == "%DLQ%grp"
    assert sum(queue_max_offsets(client, SCHEDULE)) == sched_before
    dlq = pull_ok(client, "%DLQ%grp", 0, 0)["messages"]
    assert [body_of(m) for m in dlq] == [b"dead", b"low", b"late"]
    assert "DELAY" not in dlq[2]["properties"]


def test_broker_max_reconsume_times_setting(make_client: ClientFactory) -> None:
    client = make_client(max_reconsume_times=2)
    assert send(client, "%RETRY%g2", body="x", reconsume_times=1)["topic"] == "%RETRY%g2"
    assert send(client, "%RETRY%g2", body="y", reconsume_times=2)["topic"] == "%DLQ%g2"
    orig = send(client, "T2", body="z", reconsume_times=2, queue_id=0)
    assert send_back(client, "g2", orig["offset_msg_id"])["topic"] == "%DLQ%g2"


def test_full_retry_cycle_ends_in_the_dlq(make_client: ClientFactory) -> None:
    """Consume, send back, get it again from %RETRY%, ... until it is dead-lettered.

    Delay levels of 10 ms make the schedule service deliver at once; every wait is
    a long poll bounded by wait_ms.
    """
    client = make_client(message_delay_level=" ".join(["10ms"] * 18))
    orig = send(client, "Jobs", body="job-1", keys=["j1"], queue_id=0)
    current = orig["offset_msg_id"]
    for attempt in range(1, 3):
        res = send_back(client, "workers", current, max_reconsume_times=2)
        assert res["topic"] == SCHEDULE
        got = pull_ok(client, "%RETRY%workers", 0, attempt - 1, wait_ms=5_000)
        assert got["status"] == "FOUND", got
        [msg] = got["messages"]
        assert msg["reconsume_times"] == attempt
        assert msg["topic"] == "%RETRY%workers"
        assert (body_of(msg), msg["keys"], msg["msg_id"]) == (b"job-1", ["j1"], orig["msg_id"])
        assert msg["properties"]["RETRY_TOPIC"] == "Jobs"
        assert msg["properties"]["ORIGIN_MESSAGE_ID"] == orig["msg_id"]
        assert "REAL_TOPIC" not in msg["properties"]
        current = msg["offset_msg_id"]
    # the third failure: reconsume times (2) reached MAX_RECONSUME_TIMES (2)
    res = send_back(client, "workers", current)
    assert (res["topic"], res["queue_id"]) == ("%DLQ%workers", 0)
    dead = only_message(client, "%DLQ%workers")
    assert (body_of(dead), dead["keys"], dead["reconsume_times"]) == (b"job-1", ["j1"], 3)
    assert dead["properties"]["RETRY_TOPIC"] == "Jobs"
    assert dead["properties"]["ORIGIN_MESSAGE_ID"] == orig["msg_id"]
    assert queue_max_offsets(client, "%RETRY%workers") == [2]
