"""In process: a message by either msgId, consumer groups and connections, and the
broker's settings read and changed at run time (GET|PUT /config)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.support.rest_app import assert_error, put_topic, send


def test_a_message_by_either_msg_id(client: TestClient) -> None:
    put_topic(client, "Either", read_queue_nums=2, write_queue_nums=2, perm=6)
    put_topic(client, "Other", read_queue_nums=1, write_queue_nums=1, perm=6)
    sent = send(client, "Either", "by either id", keys=["k"])
    send(client, "Other", "another")
    for msg_id in (sent["msg_id"], sent["offset_msg_id"]):
        got = client.get(f"/messages/{msg_id}")
        assert got.status_code == 200, got.text
        assert (got.json()["msg_id"], got.json()["offset_msg_id"]) == (
            sent["msg_id"], sent["offset_msg_id"],
        )  # fmt: skip
    assert client.get(f"/messages/{sent['msg_id']}?topic=Either").status_code == 200
    elsewhere = client.get(f"/messages/{sent['msg_id']}?topic=Other")
    assert_error(elsewhere, 404, "MESSAGE_NOT_EXIST")
    assert_error(client.get(f"/messages/{sent['msg_id']}?topic=bad/topic"), 400, "TOPIC_ILLEGAL")


def test_consumer_groups_and_connections(client: TestClient) -> None:
    put_topic(client, "Groups", read_queue_nums=1, write_queue_nums=1, perm=6)
    for _ in range(3):
        send(client, "Groups", "x", queue_id=0)
    assert client.put("/consumers/g-views/offsets/Groups/0", json={"offset": 1}).status_code == 200
    groups = client.get("/consumers").json()
    assert groups == [
        {"group": "g-views", "clients": 0, "consume_type": "", "message_model": "",
         "topics": ["Groups"], "total_lag": 2},
    ]  # fmt: skip
    view = client.get("/consumers/g-views/connections").json()
    assert view["group"] == "g-views" and view["connections"] == []
    assert client.get("/producers/p-views/connections").json() == {
        "group": "p-views",
        "connections": [],
    }
    assert_error(client.get("/consumers/bad%20group/connections"), 400, "GROUP_ILLEGAL")


def test_settings_are_read_and_changed_at_run_time(client: TestClient) -> None:
    settings = client.get("/config").json()
    assert settings["broker_name"] == "broker-a" and settings["broker_permission"] == 6
    assert settings["flush_disk_type"] == "ASYNC_FLUSH" and "store_dir" in settings

    changed = client.put("/config", json={"max_reconsume_times": 2, "max_pull_nums": "64"})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["max_reconsume_times"], changed.json()["max_pull_nums"]) == (2, 64)
    assert client.get("/config").json()["max_reconsume_times"] == 2

    # the broker reads it where it uses it: read-only now, a send is refused
    put_topic(client, "Perm", read_queue_nums=1, write_queue_nums=1, perm=6)
    assert client.put("/config", json={"broker_permission": 4}).status_code == 200
    refused = client.post("/topics/Perm/messages", json={"body": "x"})
    assert refused.status_code == 403, refused.text
    assert client.put("/config", json={"broker_permission": 6}).status_code == 200
    send(client, "Perm", "writable again")

    for body, said in [
        ({"store_dir": "/elsewhere"}, "read at start only"),
        ({"no_such_setting": 1}, "unknown setting"),
        ({"max_reconsume_times": "many"}, "max_reconsume_times"),
        ({"max_reconsume_times": -1}, "max_reconsume_times"),
        ({"broker_permission": 5}, "broker_permission"),
        ({}, "no setting"),
    ]:
        answer = assert_error(client.put("/config", json=body), 400, "CONFIG_ILLEGAL")
        assert said in answer["message"]
    # all or none: a refused change left the good one of its request unapplied
    assert_error(
        client.put("/config", json={"max_pull_nums": 7, "store_dir": "/x"}), 400, "CONFIG_ILLEGAL"
    )
    assert client.get("/config").json()["max_pull_nums"] == 64
