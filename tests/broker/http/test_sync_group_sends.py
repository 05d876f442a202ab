"""A SYNC_FLUSH broker: concurrent single sends are appended as groups (one flush
request per group) and each still gets its own answer: SEND_OK with its own queue
offset once durable, or its own error. Real store, in-process app, 16 threads.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi.testclient import TestClient

from broker.store.config import FlushDiskType
from tests.support.rest_app import ClientFactory, body_of, metric, pull_ok, q, send, topic_status

SYNC = {"flush_disk_type": FlushDiskType.SYNC_FLUSH}


def _controller(client: TestClient) -> Any:
    return client.app.state.controller  # type: ignore[attr-defined]


def test_concurrent_single_sends_share_groups_and_flushes(make_client: ClientFactory) -> None:
    client = make_client(extra=SYNC)
    ctrl = _controller(client)
    assert ctrl.send.appender is not None
    send(client, "Grouped", queue_id=0)  # creates the topic (through the pending path)

    def sender(w: int) -> list[dict[str, Any]]:
        return [send(client, "Grouped", body=f"{w}-{i}", queue_id=w % 4) for i in range(20)]

    with ThreadPoolExecutor(16) as pool:
        answers = [a for batch in pool.map(sender, range(16)) for a in batch]
    assert len(answers) == 320
    assert ctrl.store.commit_log.flushed_offset() >= ctrl.store.dispatched_offset
    assert ctrl.store.messages_grouped == 321
    assert ctrl.store.groups_appended < 321  # sends really were combined
    assert metric(client, "pymq_store_grouped_messages_total") == 321
    assert metric(client, "pymq_store_append_groups_total") == ctrl.store.groups_appended
    fsyncs = metric(client, "pymq_store_group_commits_total")
    covered = metric(client, "pymq_store_group_commit_requests_total")
    assert fsyncs is not None and covered is not None and 0 < fsyncs <= covered
    for queue in range(4):
        offsets = sorted(a["queue_offset"] for a in answers if a["queue_id"] == queue)
        first = 1 if queue == 0 else 0
        assert offsets == list(range(first, first + 80))
        bodies: list[str] = []
        offset = 0
        for _ in range(100):  # bounded: pages until the queue's end
            page = pull_ok(client, "Grouped", queue, offset)
            if not page["messages"]:
                break
            bodies += [body_of(m).decode() for m in page["messages"]]
            offset = page["next_begin_offset"]
        bodies.sort()
        expected = [f"{w}-{i}" for w in range(queue, 16, 4) for i in range(20)]
        assert bodies == sorted(expected + (["hello"] if queue == 0 else []))


def test_a_refused_send_fails_alone_and_new_topics_are_created(
    make_client: ClientFactory,
) -> None:
    client = make_client(extra=SYNC)
    out = send(client, "MadeBySyncSend")
    assert topic_status(client, "MadeBySyncSend")["write_queue_nums"] == 8
    assert out["status"] == "SEND_OK"
    bad = client.post(f"/topics/{q('MadeBySyncSend')}/messages", json={"body": ""})
    assert bad.status_code == 400, bad.text
    assert set(bad.json()) >= {"code", "message"}
    assert send(client, "MadeBySyncSend", body="after")["status"] == "SEND_OK"
