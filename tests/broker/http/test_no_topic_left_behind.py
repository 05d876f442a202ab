"""A send that is rejected leaves nothing behind: no message, and no auto-created topic."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.support.rest_app import (
    assert_error,
    batch_bytes,
    commit_log_max,
    post_batch,
    send,
    topic_names,
)


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        ({"body": "x", "properties": {"a": "b\x01c"}}, "KEY_ILLEGAL"),
        ({"body": "x", "properties": {"DELAY": "soon"}}, "MESSAGE_ILLEGAL"),
        ({"body": "x", "keys": ["has space"]}, "KEY_ILLEGAL"),
        ({"body": ""}, "MESSAGE_ILLEGAL"),
    ],
)
def test_rejected_json_send_creates_no_topic(
    client: TestClient, payload: dict[str, object], code: str
) -> None:
    before, topics = commit_log_max(client), topic_names(client)
    resp = client.post("/topics/NewTopic/messages", json=payload)
    assert_error(resp, 400, code)
    assert topic_names(client) == topics
    assert commit_log_max(client) == before


def test_rejected_batch_creates_no_topic(client: TestClient) -> None:
    good = batch_bytes([(b"one", {}), (b"two", {})])
    damaged = good[:-3]
    topics = topic_names(client)
    assert_error(post_batch(client, "NewBatchTopic", damaged), 400, "MESSAGE_ILLEGAL")
    assert topic_names(client) == topics
    assert post_batch(client, "NewBatchTopic", good).status_code == 200
    assert "NewBatchTopic" in topic_names(client)


def test_accepted_sends_create_their_topics(client: TestClient) -> None:
    send(client, "Fresh", "hello")
    send(client, "FreshDelayed", "later", delay_level=3)
    send(client, "%RETRY%grp", "again", reconsume_times=99, max_reconsume_times=1)
    names = topic_names(client)
    # past max reconsume the %RETRY% message goes to the DLQ: only that topic is made
    assert {"Fresh", "FreshDelayed", "%DLQ%grp"} <= names
    assert "%RETRY%grp" not in names


def test_delay_in_a_batch_of_several_is_refused(client: TestClient) -> None:
    before = commit_log_max(client)
    data = batch_bytes([(b"one", {"DELAY": "2"}), (b"two", {})])
    assert_error(post_batch(client, "DelayedBatch", data), 400, "MESSAGE_ILLEGAL")
    assert commit_log_max(client) == before
    # a property that merely ends in DELAY, or DELAY inside a body, is fine
    ok = batch_bytes([(b"DELAY\x01 in the body", {"XDELAY": "2"}), (b"two", {})])
    assert post_batch(client, "DelayedBatch", ok).status_code == 200
