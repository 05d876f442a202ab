"""Send and pull through a real broker process: JSON, binary batches, long polling."""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

import httpx
import pytest

from connector.protocol.properties import PropertyKeys
from tests.support.processes import Servers
from tests.support.rest import (
    body_of,
    create_topic,
    pull,
    pull_all_records,
    pull_records,
    send,
    send_batch,
)


@pytest.fixture(scope="module")
def broker(module_servers: Servers) -> str:
    return module_servers.broker().http_addr


def test_rest_send_then_pull_round_trip(broker: str) -> None:
    create_topic(broker, "RoundTrip")
    sent = [
        send(
            broker,
            "RoundTrip",
            f"hello {i} ✓",
            queue_id=1,
            tags="TagA",
            keys=[f"k{i}", "x"],
            properties={"color": "blue"},
        )
        for i in range(5)
    ]
    assert [s["queue_offset"] for s in sent] == list(range(5))
    assert all(s["queue_id"] == 1 for s in sent)

    res = pull(broker, "RoundTrip", 1, 0, max_nums=32)
    assert res["status"] == "FOUND"
    assert (res["min_offset"], res["max_offset"], res["next_begin_offset"]) == (0, 5, 5)
    msgs = res["messages"]
    assert [m["queue_offset"] for m in msgs] == list(range(5))
    for i, (m, s) in enumerate(zip(msgs, sent, strict=True)):
        assert body_of(m) == f"hello {i} ✓".encode()
        assert m["msg_id"] == s["msg_id"]
        assert m["offset_msg_id"] == s["offset_msg_id"]
        assert m["tags"] == "TagA"
        assert m["keys"] == [f"k{i}", "x"]
        assert m["properties"]["color"] == "blue"
        assert m["store_timestamp"] >= m["born_timestamp"] > 0

    # the other queues are untouched; reading past the end is NO_NEW_MSG
    assert pull(broker, "RoundTrip", 0)["status"] == "NO_NEW_MSG"
    tail = pull(broker, "RoundTrip", 1, 5)
    assert tail["status"] == "NO_NEW_MSG"
    assert tail["messages"] == []


def test_batch_send_then_binary_pull_of_1000_messages(broker: str) -> None:
    create_topic(broker, "Batch")
    bodies = [
        hashlib.sha256(str(i).encode()).digest() * (1 + i % 5) + b"#%d" % i for i in range(1000)
    ]
    first = send_batch(broker, "Batch", bodies[:400], queue_id=2, properties={"b": "1"})
    second = send_batch(broker, "Batch", bodies[400:], queue_id=2, properties={"b": "2"})
    assert (first["queue_id"], first["queue_offset"]) == (2, 0)
    assert (second["queue_id"], second["queue_offset"]) == (2, 400)
    assert len(first["commit_log_offsets"]) == 400

    msgs = pull_all_records(broker, "Batch", 2)
    assert [m.body for m in msgs] == bodies
    assert [m.queue_offset for m in msgs] == list(range(1000))
    assert all(m.topic == "Batch" and m.queue_id == 2 for m in msgs)
    assert [m.properties.get("b") for m in msgs] == ["1"] * 400 + ["2"] * 600
    # the answer's commit-log offsets are where the records really are
    assert [m.commit_log_offset for m in msgs[:400]] == first["commit_log_offsets"]
    assert [m.commit_log_offset for m in msgs[400:]] == second["commit_log_offsets"]

    meta, page = pull_records(broker, "Batch", 2, 990, max_nums=100)
    assert meta == {
        "status": "FOUND",
        "next_begin_offset": 1000,
        "min_offset": 0,
        "max_offset": 1000,
    }
    assert [m.body for m in page] == bodies[990:]
    meta, page = pull_records(broker, "Batch", 2, 1000)
    assert meta["status"] == "NO_NEW_MSG"
    assert page == []


def test_long_poll_wakes_on_arrival(broker: str) -> None:
    create_topic(broker, "LongPoll")
    result: dict[str, Any] = {}
    issued = threading.Event()
    client = httpx.Client(timeout=30.0)

    def waiting_pull() -> None:
        result["issued_at"] = time.monotonic()
        issued.set()
        result["res"] = pull(broker, "LongPoll", 0, 0, wait_ms=10_000, client=client)
        result["returned_at"] = time.monotonic()

    thread = threading.Thread(target=waiting_pull, daemon=True)
    try:
        thread.start()
        assert issued.wait(5.0)
        # the pull is parked: nothing comes back while the queue is empty
        thread.join(0.3)
        assert thread.is_alive(), result
        sent_at = time.monotonic()
        sent = send(broker, "LongPoll", "wake up", queue_id=0)
        thread.join(5.0)
        assert not thread.is_alive(), "the long poll did not return after the send"
    finally:
        thread.join(15.0)
        client.close()
    # answered by the arrival, far sooner than the 10 s wait
    assert result["returned_at"] >= sent_at
    assert result["returned_at"] - result["issued_at"] < 2.0, result
    res = result["res"]
    assert res["status"] == "FOUND"
    assert [m["msg_id"] for m in res["messages"]] == [sent["msg_id"]]
    assert body_of(res["messages"][0]) == b"wake up"
    assert res["messages"][0]["properties"][PropertyKeys.UNIQ_KEY] == sent["msg_id"]


def test_long_poll_times_out_with_no_new_msg(broker: str) -> None:
    create_topic(broker, "LongPollEmpty")
    t0 = time.monotonic()
    res = pull(broker, "LongPollEmpty", 3, 0, wait_ms=500)
    elapsed = time.monotonic() - t0
    assert res["status"] == "NO_NEW_MSG"
    assert res["messages"] == []
    assert 0.45 <= elapsed < 3.0, elapsed
