"""Send and pull through the broker's HTTP edge, with a real store behind it.

JSON and binary sends, JSON and binary pulls, tag filters, delayed and compressed
messages, lookups by key and by offset msgId, queue offsets and search by time.
"""

from __future__ import annotations

import zlib

import pytest
from fastapi.testclient import TestClient

from connector.protocol.message import SysFlag
from connector.protocol.msgid import decode_offset_msg_id
from connector.protocol.properties import encode_properties
from connector.protocol.record import decode_record, record_size
from connector.protocol.wire import (
    H_MAX_OFFSET,
    H_MIN_OFFSET,
    H_NEXT_BEGIN_OFFSET,
    H_STATUS,
    RECORDS_CONTENT_TYPE,
    batch_offsets,
    split_records,
)
from tests.support.rest_app import (
    STORE_HOST_HEX,
    ClientFactory,
    b64,
    batch_bytes,
    body_of,
    commit_log_max,
    now_ms,
    offset_msg_id,
    post_batch,
    pull,
    pull_ok,
    pull_records,
    queue_max_offsets,
    send,
    send_batch,
    topic_status,
)

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


@pytest.fixture
def client(make_client: ClientFactory) -> TestClient:
    """A fresh broker's REST app."""
    return make_client()


def test_json_send_then_pull_round_trips_every_field(client: TestClient) -> None:
    before = now_ms()
    sent = send(
        client,
        "RoundTrip",
        body="héllo wörld",
        tags="TagA",
        keys=["k1", "k2"],
        properties={"color": "blue", "n": "1"},
        queue_id=3,
    )
    after = now_ms()
    assert sent["topic"] == "RoundTrip"
    assert sent["queue_id"] == 3
    assert sent["queue_offset"] == 0
    assert sent["broker_name"] == "broker-a"
    assert len(sent["msg_id"]) == 32
    assert sent["offset_msg_id"] == offset_msg_id(0)  # first record of the log

    res = pull_ok(client, "RoundTrip", 3, 0)
    assert res["status"] == "FOUND"
    assert (res["min_offset"], res["max_offset"], res["next_begin_offset"]) == (0, 1, 1)
    [msg] = res["messages"]
    assert msg["msg_id"] == sent["msg_id"] == msg["properties"]["UNIQ_KEY"]
    assert msg["offset_msg_id"] == sent["offset_msg_id"]
    assert msg["topic"] == "RoundTrip"
    assert (msg["queue_id"], msg["queue_offset"], msg["commit_log_offset"]) == (3, 0, 0)
    assert body_of(msg) == "héllo wörld".encode()
    assert msg["tags"] == "TagA"
    assert msg["keys"] == ["k1", "k2"]
    assert msg["properties"] == {
        "color": "blue",
        "n": "1",
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "UNIQ_KEY": sent["msg_id"],
    }
    assert before <= msg["born_timestamp"] <= msg["store_timestamp"] <= after
    assert (msg["reconsume_times"], msg["sys_flag"], msg["flag"]) == (0, 0, 0)
    # the offset msgId decodes to this broker and the record's CommitLog offset
    assert decode_offset_msg_id(msg["offset_msg_id"]) == ("127.0.0.1:10911", 0)
    # and the same message comes back by offset msgId
    by_id = client.get(f"/messages/{sent['offset_msg_id']}")
    assert by_id.status_code == 200, by_id.text
    assert by_id.json() == msg


def test_body_base64_binary_body_and_flag(client: TestClient) -> None:
    raw = bytes(range(256)) * 3
    sent = send(client, "B64", body=None, body_base64=b64(raw), queue_id=0, flag=7)
    [msg] = pull_ok(client, "B64", 0)["messages"]
    assert body_of(msg) == raw
    assert msg["flag"] == 7
    assert msg["tags"] is None
    assert msg["keys"] == []
    assert msg["msg_id"] == sent["msg_id"]


def test_auto_created_topic_gets_the_default_eight_queues(client: TestClient) -> None:
    sent = send(client, "AutoMade")
    status = topic_status(client, "AutoMade")
    assert (status["read_queue_nums"], status["write_queue_nums"], status["perm"]) == (8, 8, 6)
    assert [qs["queue_id"] for qs in status["queues"]] == list(range(8))
    maxes = [qs["max_offset"] for qs in status["queues"]]
    assert sum(maxes) == 1
    assert maxes[sent["queue_id"]] == 1
    # without queue_id the broker spreads messages over the write queues
    used = {send(client, "AutoMade", body=f"m{i}")["queue_id"] for i in range(16)}
    assert used == set(range(8))


def test_pull_statuses_and_next_begin_offset_progression(client: TestClient) -> None:
    bodies = [f"msg-{i}" for i in range(5)]
    for i, body in enumerate(bodies):
        assert send(client, "Progress", body=body, queue_id=1)["queue_offset"] == i

    offset, seen, steps = 0, [], []
    while True:
        res = pull_ok(client, "Progress", 1, offset, max=2)
        if res["status"] != "FOUND":
            break
        assert (res["min_offset"], res["max_offset"]) == (0, 5)
        assert [m["queue_offset"] for m in res["messages"]] == list(
            range(offset, res["next_begin_offset"])
        )
        seen += [body_of(m).decode() for m in res["messages"]]
        offset = res["next_begin_offset"]
        steps.append(offset)
        assert len(steps) < 10
    assert steps == [2, 4, 5]
    assert seen == bodies
    # at the end of the queue: NO_NEW_MSG, stay where you are
    assert res["status"] == "NO_NEW_MSG"
    assert res["next_begin_offset"] == 5
    assert res["messages"] == []
    # an empty queue of the topic answers NO_NEW_MSG at 0
    empty = pull_ok(client, "Progress", 2, 0)
    assert empty["status"] == "NO_NEW_MSG"
    assert (empty["next_begin_offset"], empty["max_offset"]) == (0, 0)
    # a pull from the middle
    mid = pull_ok(client, "Progress", 1, 3, max=32)
    assert [body_of(m).decode() for m in mid["messages"]] == bodies[3:]


def test_tag_filter_returns_only_matching_messages(client: TestClient) -> None:
    tags = ["A", "B", "C", "A", None, "B", "C"]
    for i, tag in enumerate(tags):
        fields = {} if tag is None else {"tags": tag}
        send(client, "Tagged", body=f"m{i}", queue_id=0, **fields)

    res = pull_ok(client, "Tagged", 0, 0, tags="A || B")
    assert res["status"] == "FOUND"
    assert [m["tags"] for m in res["messages"]] == ["A", "B", "A", "B"]
    assert [m["queue_offset"] for m in res["messages"]] == [0, 1, 3, 5]
    assert res["next_begin_offset"] == 7

    only_c = pull_ok(client, "Tagged", 0, 0, tags="C")
    assert [m["queue_offset"] for m in only_c["messages"]] == [2, 6]
    everything = pull_ok(client, "Tagged", 0, 0, tags="*")
    assert len(everything["messages"]) == 7
    # nothing matches: NO_MATCHED_MSG, and the scan moved on
    none = pull_ok(client, "Tagged", 0, 0, tags="Z")
    assert none["status"] == "NO_MATCHED_MSG"
    assert none["messages"] == []
    assert none["next_begin_offset"] == 7


def test_binary_batch_send_and_lookup_by_offset_msg_id(client: TestClient) -> None:
    entries = [
        (b"first", {"TAGS": "T1", "KEYS": "bk1", "UNIQ_KEY": "U" * 32}),
        (b"second \x00\xff", {"TAGS": "T2"}),
        (b"third" * 100, {}),
    ]
    log_before = commit_log_max(client)
    res = send_batch(client, "Batched", batch_bytes(entries), queue_id=2)
    assert res["count"] == 3
    assert (res["topic"], res["queue_id"], res["queue_offset"]) == ("Batched", 2, 0)
    assert res["store_host"] == STORE_HOST_HEX
    sizes = [
        record_size(len(body), len(b"Batched"), len(encode_properties(props)))
        for body, props in entries
    ]
    assert res["offset_runs"] == [[0, log_before]]
    offsets = batch_offsets(res["offset_runs"], sizes)
    assert len(offsets) == 3
    assert offsets[0] == log_before
    assert offsets == sorted(offsets)
    assert commit_log_max(client) > offsets[-1]

    for i, ((body, props), phys) in enumerate(zip(entries, offsets, strict=True)):
        msg_id = offset_msg_id(phys, res["store_host"])
        got = client.get(f"/messages/{msg_id}")
        assert got.status_code == 200, got.text
        view = got.json()
        assert body_of(view) == body
        assert (view["topic"], view["queue_id"], view["queue_offset"]) == ("Batched", 2, i)
        assert view["commit_log_offset"] == phys
        assert view["offset_msg_id"] == msg_id
        assert view["tags"] == props.get("TAGS")
        for name, value in props.items():
            assert view["properties"][name] == value
    # a second batch continues the queue
    again = send_batch(client, "Batched", batch_bytes([(b"x", {}), (b"y", {})]), queue_id=2)
    assert (again["queue_offset"], again["count"]) == (3, 2)
    assert queue_max_offsets(client, "Batched")[2] == 5
    # the UNIQ_KEY given by the producer is the message's msg_id
    [first] = pull_ok(client, "Batched", 2, 0, max=1)["messages"]
    assert first["msg_id"] == "U" * 32


def test_binary_pull_is_the_stored_records(client: TestClient) -> None:
    send(client, "Records", body="json one", tags="J", keys=["jk"], queue_id=0)
    send_batch(
        client, "Records", batch_bytes([(b"bin two", {"TAGS": "B"}), (b"bin three", {})]),
        queue_id=0,
    )  # fmt: skip
    resp = pull_records(client, "Records", 0, 0)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"] == RECORDS_CONTENT_TYPE
    assert resp.headers[H_STATUS] == "FOUND"
    assert resp.headers[H_NEXT_BEGIN_OFFSET] == "3"
    assert (resp.headers[H_MIN_OFFSET], resp.headers[H_MAX_OFFSET]) == ("0", "3")
    records = split_records(resp.content)
    decoded = [decode_record(r) for r in records]
    assert [m.body for m in decoded] == [b"json one", b"bin two", b"bin three"]
    assert [m.queue_offset for m in decoded] == [0, 1, 2]
    assert [m.tags for m in decoded] == ["J", "B", None]
    assert decoded[0].keys == ["jk"]
    assert {m.topic for m in decoded} == {"Records"}
    assert {m.store_host for m in decoded} == {"127.0.0.1:10911"}
    # the binary answer says what the JSON one says
    as_json = pull_ok(client, "Records", 0, 0)["messages"]
    for m, view in zip(decoded, as_json, strict=True):
        assert m.offset_msg_id == view["offset_msg_id"]
        assert m.msg_id == view["msg_id"]
        assert m.commit_log_offset == view["commit_log_offset"]
        assert m.store_timestamp == view["store_timestamp"]
        assert m.properties == view["properties"]
    # max and the end of the queue
    one = pull_records(client, "Records", 0, 1, max=1)
    assert one.headers[H_NEXT_BEGIN_OFFSET] == "2"
    assert [decode_record(r).body for r in split_records(one.content)] == [b"bin two"]
    end = pull_records(client, "Records", 0, 3)
    assert end.status_code == 200
    assert end.headers[H_STATUS] == "NO_NEW_MSG"
    assert end.headers[H_NEXT_BEGIN_OFFSET] == "3"
    assert end.content == b""


def test_single_binary_message_with_delay_goes_to_the_schedule_topic(client: TestClient) -> None:
    level = 18  # 2 h: the schedule service will not deliver it during the test
    sched_before = queue_max_offsets(client, SCHEDULE)
    data = batch_bytes([(b"later", {"DELAY": str(level), "KEYS": "dk"})])
    res = send_batch(client, "Delayed", data, queue_id=5)
    assert (res["topic"], res["queue_id"], res["count"]) == (SCHEDULE, level - 1, 1)
    sched_after = queue_max_offsets(client, SCHEDULE)
    assert sched_after[level - 1] == sched_before[level - 1] + 1
    assert [a - b for a, b in zip(sched_after, sched_before, strict=True)].count(0) == 17
    # the real topic exists (auto-created) but holds nothing yet
    assert sum(queue_max_offsets(client, "Delayed")) == 0
    [msg] = pull_ok(client, SCHEDULE, level - 1, sched_before[level - 1])["messages"]
    assert body_of(msg) == b"later"
    assert msg["properties"]["REAL_TOPIC"] == "Delayed"
    assert msg["properties"]["REAL_QID"] == "5"
    assert msg["properties"]["DELAY"] == str(level)
    assert msg["keys"] == ["dk"]
    # a JSON send with delay_level lands there too
    json_res = send(client, "Delayed", body="json later", delay_level=level, queue_id=1)
    assert (json_res["topic"], json_res["queue_id"]) == (SCHEDULE, level - 1)
    assert queue_max_offsets(client, SCHEDULE)[level - 1] == sched_after[level - 1] + 1


def test_compressed_single_message(client: TestClient) -> None:
    original = b"compress me " * 500
    data = batch_bytes([(zlib.compress(original), {"TAGS": "Z"})])
    res = send_batch(client, "Zipped", data, queue_id=0, compressed="true")
    assert res["count"] == 1
    [msg] = pull_ok(client, "Zipped", 0)["messages"]
    assert msg["sys_flag"] & SysFlag.COMPRESSED
    assert body_of(msg) == original  # JSON pull inflates
    [raw] = split_records(pull_records(client, "Zipped", 0).content)
    stored = decode_record(raw, decompress=False)
    assert stored.sys_flag & SysFlag.COMPRESSED
    assert stored.body == zlib.compress(original)  # stored as sent
    by_id = client.get(f"/messages/{msg['offset_msg_id']}").json()
    assert body_of(by_id) == original


def test_compressed_flag_with_non_zlib_body_is_rejected(client: TestClient) -> None:
    send(client, "ZipBad", body="seed", queue_id=0)
    log_before = commit_log_max(client)
    resp = post_batch(
        client, "ZipBad", batch_bytes([(b"not zlib at all", {})]), queue_id=0, compressed="true"
    )
    assert resp.status_code == 400, resp.text
    assert resp.json()["code"] == "MESSAGE_ILLEGAL"
    assert commit_log_max(client) == log_before
    assert queue_max_offsets(client, "ZipBad")[0] == 1
    # a truncated zlib stream is not accepted either
    cut = zlib.compress(b"abc" * 1000)[:-4]
    resp = post_batch(client, "ZipBad", batch_bytes([(cut, {})]), queue_id=0, compressed="true")
    assert resp.status_code == 400, resp.text
    assert commit_log_max(client) == log_before


def test_lookup_by_key_and_by_unique_key(client: TestClient) -> None:
    a = send(client, "Keyed", body="a", keys=["k1", "shared"])
    b = send(client, "Keyed", body="b", keys=["k2", "shared"])
    send(client, "OtherKeyed", body="c", keys=["k1"])
    send_batch(client, "Keyed", batch_bytes([(b"d", {"KEYS": "k1"}), (b"e", {})]), queue_id=0)

    def bodies(key: str, topic: str = "Keyed") -> list[bytes]:
        resp = client.get(f"/topics/{topic}/messages", params={"key": key})
        assert resp.status_code == 200, resp.text
        return sorted(body_of(m) for m in resp.json()["messages"])

    assert bodies("k1") == [b"a", b"d"]
    assert bodies("k2") == [b"b"]
    assert bodies("shared") == [b"a", b"b"]
    assert bodies("k1", "OtherKeyed") == [b"c"]
    assert bodies("nope") == []
    assert bodies(a["msg_id"]) == [b"a"]  # UNIQ_KEY is indexed too
    assert bodies(b["msg_id"]) == [b"b"]
    limited = client.get("/topics/Keyed/messages", params={"key": "shared", "max": 1})
    assert len(limited.json()["messages"]) == 1


def test_queue_offsets_and_offset_by_time(client: TestClient) -> None:
    empty = client.get("/topics/TimeTopic/queues/0/offsets")
    assert empty.status_code == 404  # not created yet
    for i in range(6):
        send(client, "TimeTopic", body=f"t{i}", queue_id=0)
    resp = client.get("/topics/TimeTopic/queues/0/offsets")
    assert resp.status_code == 200, resp.text
    offsets = resp.json()
    msgs = pull_ok(client, "TimeTopic", 0)["messages"]
    stamps = [m["store_timestamp"] for m in msgs]
    assert stamps == sorted(stamps)
    assert offsets == {"min_offset": 0, "max_offset": 6, "last_update_timestamp": stamps[-1]}
    other = client.get("/topics/TimeTopic/queues/1/offsets").json()
    assert other == {"min_offset": 0, "max_offset": 0, "last_update_timestamp": 0}

    def by_time(ts: int) -> int:
        r = client.get("/topics/TimeTopic/queues/0/offset-by-time", params={"timestamp": ts})
        assert r.status_code == 200, r.text
        found: int = r.json()["offset"]
        return found

    assert by_time(0) == 0  # before everything: the min offset
    assert by_time(stamps[0] - 1) == 0
    assert by_time(stamps[-1] + 1) == 6  # after everything: the max offset
    assert by_time(now_ms() + 3_600_000) == 6
    for ts in set(stamps):  # the first message stored at or after ts
        assert by_time(ts) == next(i for i, s in enumerate(stamps) if s >= ts)


def test_pull_of_a_queue_never_written_and_long_poll_bound(client: TestClient) -> None:
    send(client, "Polled", body="x", queue_id=0)
    # wait_ms on an empty queue returns after the (bounded) wait with NO_NEW_MSG
    res = pull(client, "Polled", 4, 0, wait_ms=50)
    assert res.status_code == 200, res.text
    assert res.json()["status"] == "NO_NEW_MSG"
    # wait_ms on a queue with messages answers at once
    found = pull_ok(client, "Polled", 0, 0, wait_ms=10_000)
    assert found["status"] == "FOUND"


def test_a_delay_level_in_a_batch_of_several_is_refused(client: TestClient) -> None:
    data = batch_bytes([(b"now", {}), (b"later", {"DELAY": "2"})])
    resp = post_batch(client, "DelayBatch", data)
    assert resp.status_code == 400, resp.text
    assert "delay levels are not supported in a batch" in resp.json()["message"]
    ok = batch_bytes([(b"now", {}), (b"named", {"DELAYED_BY": "me", "note": "DELAY"})])
    assert send_batch(client, "DelayBatch", ok)["count"] == 2
