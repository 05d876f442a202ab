"""Topic admin, permissions, consumer offsets and progress, /health and /metrics."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from fastapi.testclient import TestClient

from tests.support.rest_app import (
    ClientFactory,
    assert_error,
    batch_bytes,
    commit_log_max,
    health,
    metric,
    offset_msg_id,
    pull,
    pull_ok,
    put_topic,
    queue_max_offsets,
    send,
    send_batch,
    start_client,
    topic_names,
    topic_status,
)


def test_put_get_list_update_topic(client: TestClient) -> None:
    created = put_topic(client, "Admin", read_queue_nums=4, write_queue_nums=4, perm=6)
    assert created["topic"] == "Admin"
    assert (created["read_queue_nums"], created["write_queue_nums"], created["perm"]) == (4, 4, 6)
    assert [(qs["queue_id"], qs["min_offset"], qs["max_offset"]) for qs in created["queues"]] == [
        (i, 0, 0) for i in range(4)
    ]
    listed = {t["topic"]: t for t in client.get("/topics").json()["topics"]}
    assert {"Admin", "TBW102", "SCHEDULE_TOPIC_XXXX"} <= set(listed)
    assert (listed["Admin"]["read_queue_nums"], listed["Admin"]["perm"]) == (4, 6)
    assert listed["TBW102"]["write_queue_nums"] == 8
    assert listed["SCHEDULE_TOPIC_XXXX"]["read_queue_nums"] == 18

    for i in range(3):
        send(client, "Admin", body=f"a{i}", queue_id=1)
    send(client, "Admin", body="b", queue_id=3)
    status = topic_status(client, "Admin")
    assert [(qs["min_offset"], qs["max_offset"]) for qs in status["queues"]] == [
        (0, 0), (0, 3), (0, 0), (0, 1),
    ]  # fmt: skip
    assert status["queues"][1]["last_update_timestamp"] > 0
    assert status["queues"][0]["last_update_timestamp"] == 0

    # update: more queues, and the stored data stays
    grown = put_topic(client, "Admin", read_queue_nums=6, write_queue_nums=6, perm=6)
    assert len(grown["queues"]) == 6
    assert grown["queues"][1]["max_offset"] == 3
    assert send(client, "Admin", body="q5", queue_id=5)["queue_id"] == 5
    # read 2 / write 6: queues are max(read, write), sends may use any of them
    skewed = put_topic(client, "Admin", read_queue_nums=2, write_queue_nums=6, perm=6)
    assert (skewed["read_queue_nums"], skewed["write_queue_nums"]) == (2, 6)
    assert len(skewed["queues"]) == 6


def test_delete_topic(client: TestClient, tmp_path: Path) -> None:
    send(client, "Doomed", body="x", queue_id=0)
    client.put("/consumers/g1/offsets/Doomed/0", json={"offset": 1})
    assert (tmp_path / "store" / "consumequeue" / "Doomed").is_dir()
    resp = client.delete("/topics/Doomed")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"ok": True, "topic": "Doomed"}
    assert "Doomed" not in topic_names(client)
    assert not (tmp_path / "store" / "consumequeue" / "Doomed").exists()
    assert_error(pull(client, "Doomed", 0, 0), 404, "TOPIC_NOT_EXIST")
    assert_error(client.get("/topics/Doomed"), 404, "TOPIC_NOT_EXIST")
    assert_error(client.get("/topics/Doomed/queues/0/offsets"), 404, "TOPIC_NOT_EXIST")
    assert_error(client.delete("/topics/Doomed"), 404, "TOPIC_NOT_EXIST")
    assert_error(client.get("/consumers/g1/offsets/Doomed/0"), 404, "TOPIC_NOT_EXIST")
    assert client.get("/consumers/g1/progress").json()["queues"] == []
    # the broker's own topics cannot be deleted
    assert_error(client.delete("/topics/TBW102"), 400, "TOPIC_ILLEGAL")
    assert_error(client.delete("/topics/SCHEDULE_TOPIC_XXXX"), 400, "TOPIC_ILLEGAL")
    # a send re-creates it (auto-create), empty
    again = send(client, "Doomed", body="new", queue_id=0)
    assert again["queue_offset"] == 0
    [msg] = pull_ok(client, "Doomed", 0, 0)["messages"]
    assert msg["body_base64"] == "bmV3"


def test_read_only_topic_refuses_sends(client: TestClient) -> None:
    put_topic(client, "ReadOnly", read_queue_nums=2, write_queue_nums=2, perm=6)
    send(client, "ReadOnly", body="before", queue_id=0)
    put_topic(client, "ReadOnly", read_queue_nums=2, write_queue_nums=2, perm=4)
    log_before = commit_log_max(client)
    assert_error(client.post("/topics/ReadOnly/messages", json={"body": "x"}), 403, "NO_PERMISSION")
    # the binary path checks permission too
    resp = client.post(
        "/topics/ReadOnly/messages/batch",
        content=batch_bytes([(b"x", {}), (b"y", {})]),
        headers={"content-type": "application/octet-stream"},
    )
    assert_error(resp, 403, "NO_PERMISSION")
    assert commit_log_max(client) == log_before
    assert queue_max_offsets(client, "ReadOnly") == [1, 0]
    assert pull_ok(client, "ReadOnly", 0, 0)["status"] == "FOUND"  # reads still work


def test_write_only_topic_refuses_pulls(client: TestClient) -> None:
    put_topic(client, "WriteOnly", read_queue_nums=2, write_queue_nums=2, perm=2)
    send(client, "WriteOnly", body="x", queue_id=1)
    assert_error(pull(client, "WriteOnly", 1, 0), 403, "NO_PERMISSION")
    assert queue_max_offsets(client, "WriteOnly") == [0, 1]
    put_topic(client, "WriteOnly", read_queue_nums=2, write_queue_nums=2, perm=0)
    assert_error(pull(client, "WriteOnly", 1, 0), 403, "NO_PERMISSION")
    assert_error(
        client.post("/topics/WriteOnly/messages", json={"body": "x"}), 403, "NO_PERMISSION"
    )


def test_bad_topic_configs_are_rejected(client: TestClient) -> None:
    for body in ({"perm": 5}, {"perm": -1}, {"read_queue_nums": 0}, {"write_queue_nums": 1025}):
        resp = client.put("/topics/BadCfg", json=body)
        assert 400 <= resp.status_code < 500, resp.text
        assert set(resp.json()) == {"code", "message"}
    assert_error(client.put("/topics/TBW102", json={}), 400, "TOPIC_ILLEGAL")
    assert "BadCfg" not in topic_names(client)


def test_consumer_offsets_and_progress(client: TestClient) -> None:
    put_topic(client, "Consumed", read_queue_nums=3, write_queue_nums=3)
    for i in range(5):
        send(client, "Consumed", body=f"m{i}", queue_id=0)
    for i in range(2):
        send(client, "Consumed", body=f"n{i}", queue_id=1)

    assert_error(client.get("/consumers/cg/offsets/Consumed/0"), 404, "OFFSET_NOT_EXIST")
    assert client.get("/consumers/cg/progress").json() == {
        "group": "cg", "total_lag": 0, "queues": [],
    }  # fmt: skip

    put = client.put("/consumers/cg/offsets/Consumed/0", json={"offset": 3})
    assert put.status_code == 200, put.text
    assert put.json() == {"group": "cg", "topic": "Consumed", "queue_id": 0, "offset": 3}
    got = client.get("/consumers/cg/offsets/Consumed/0").json()
    assert got == {"group": "cg", "topic": "Consumed", "queue_id": 0, "offset": 3}
    client.put("/consumers/cg/offsets/Consumed/1", json={"offset": 0})
    assert_error(client.get("/consumers/cg/offsets/Consumed/2"), 404, "OFFSET_NOT_EXIST")
    assert_error(client.get("/consumers/other/offsets/Consumed/0"), 404, "OFFSET_NOT_EXIST")

    msgs = pull_ok(client, "Consumed", 0, 0)["messages"]
    progress = client.get("/consumers/cg/progress").json()
    assert progress["group"] == "cg"
    rows = {(r["topic"], r["queue_id"]): r for r in progress["queues"]}
    assert set(rows) == {("Consumed", 0), ("Consumed", 1)}
    assert (rows["Consumed", 0]["broker_offset"], rows["Consumed", 0]["consumer_offset"]) == (5, 3)
    assert rows["Consumed", 0]["lag"] == 5 - 3
    # last_timestamp: store time of the last consumed message (offset 2)
    assert rows["Consumed", 0]["last_timestamp"] == msgs[2]["store_timestamp"]
    assert (rows["Consumed", 1]["lag"], rows["Consumed", 1]["last_timestamp"]) == (2, 0)
    assert progress["total_lag"] == 4

    # commits move the lag; committing the max offset means caught up
    client.put("/consumers/cg/offsets/Consumed/0", json={"offset": 5})
    send(client, "Consumed", body="late", queue_id=1)
    progress = client.get("/consumers/cg/progress").json()
    rows = {(r["topic"], r["queue_id"]): r for r in progress["queues"]}
    assert (rows["Consumed", 0]["lag"], rows["Consumed", 1]["lag"]) == (0, 3)
    assert progress["total_lag"] == 3
    # offsets of another group are separate
    client.put("/consumers/cg2/offsets/Consumed/1", json={"offset": 1})
    assert client.get("/consumers/cg2/progress").json()["total_lag"] == 2
    assert client.get("/consumers/cg/progress").json()["total_lag"] == 3


def test_consumer_offsets_survive_a_restart(make_client: ClientFactory, tmp_path: Path) -> None:
    with ExitStack() as stack:
        first = start_client(stack, tmp_path / "persisted")
        send(first, "Durable", body="x", queue_id=0)
        first.put("/consumers/dg/offsets/Durable/0", json={"offset": 1})
    # the lifespan ended: clean shutdown, offsets persisted
    restarted = make_client("persisted")
    assert restarted.get("/consumers/dg/offsets/Durable/0").json()["offset"] == 1
    assert pull_ok(restarted, "Durable", 0, 0)["messages"][0]["body_base64"] == "eA=="
    assert health(restarted)["recovery"] == {"abnormal": False}


def test_health(client: TestClient) -> None:
    body = health(client)
    assert body["status"] == "ok"
    assert body["role"] == "broker"
    assert (body["broker_name"], body["cluster"], body["broker_id"]) == (
        "broker-a", "DefaultCluster", 0,
    )  # fmt: skip
    assert body["addr"] == "127.0.0.1:10911"
    assert body["flush_disk_type"] == "ASYNC_FLUSH"
    assert body["commit_log_max_offset"] == 0
    assert body["recovery"] == {"abnormal": False}
    assert body["registrations"] == 0  # no NameServer configured
    assert isinstance(body["started_ms"], int)
    sent = send(client, "Healthy", body="x")
    assert health(client)["commit_log_max_offset"] > 0
    assert sent["offset_msg_id"] == offset_msg_id(0)


def test_metrics(make_client: ClientFactory) -> None:
    client = make_client()
    assert metric(client, "pymq_send_messages_total") == 0
    for i in range(3):
        send(client, "Metered", body=f"m{i}", queue_id=0)
    send_batch(client, "Metered", batch_bytes([(b"a", {}), (b"b", {})]), queue_id=2)
    send(client, "Metered2", body="other", queue_id=1)
    pull_ok(client, "Metered", 0, 0)
    pull_ok(client, "Metered", 2, 0)
    pull_ok(client, "Metered", 0, 3)  # NO_NEW_MSG

    assert metric(client, "pymq_send_messages_total") == 6
    assert metric(client, "pymq_pull_requests_total", status="FOUND") == 2
    assert metric(client, "pymq_pull_requests_total", status="NO_NEW_MSG") == 1
    assert metric(client, "pymq_pull_messages_total") == 5
    assert metric(client, "pymq_queue_max_offset", topic="Metered", queue="0") == 3
    assert metric(client, "pymq_queue_max_offset", topic="Metered", queue="2") == 2
    assert metric(client, "pymq_queue_max_offset", topic="Metered2", queue="1") == 1
    assert metric(client, "pymq_queue_max_offset", topic="Metered", queue="1") is None
    assert metric(client, "pymq_store_commitlog_max_offset_bytes") == commit_log_max(client)
    assert metric(client, "pymq_send_latency_seconds_count", api="single") == 4
    assert metric(client, "pymq_send_latency_seconds_count", api="batch") == 1
    # a rejected send is not counted as stored
    client.post("/topics/Metered/messages", json={"body": ""})
    assert metric(client, "pymq_send_messages_total") == 6
    requests = "pymq_send_requests_total"
    assert metric(client, requests, api="single", outcome="SEND_OK") == 4
    assert metric(client, requests, api="batch", outcome="SEND_OK") == 1
    assert metric(client, requests, api="single", outcome="MESSAGE_ILLEGAL") == 1
