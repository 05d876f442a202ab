"""Consumer send-back through a real broker: %RETRY% with delays, then the %DLQ%."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from connector.protocol.properties import PropertyKeys
from tests.support.processes import Servers
from tests.support.rest import HTTP, body_of, create_topic, pull, pull_all, send, url
from tests.support.waits import holds_for, wait_until

P = PropertyKeys
GROUP = "g1"
RETRY = "%RETRY%g1"
DLQ = "%DLQ%g1"
FAST_DELAYS = {"PYMQ_MESSAGE_DELAY_LEVEL": " ".join(["100ms"] * 8)}


@pytest.fixture(scope="module")
def broker(module_servers: Servers) -> str:
    return module_servers.broker(env=FAST_DELAYS).http_addr


def send_back(addr: str, offset_msg_id: str, max_reconsume_times: int) -> dict[str, Any]:
    r = HTTP.post(
        url(addr, "consumers", GROUP, "send-back"),
        json={"offset_msg_id": offset_msg_id, "max_reconsume_times": max_reconsume_times},
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    assert result["status"] == "SEND_OK", result
    return result


def queue_or_empty(addr: str, topic: str) -> list[dict[str, Any]]:
    """The whole of queue 0, or [] while the topic does not exist yet."""
    r = HTTP.get(url(addr, "topics", topic))
    if r.status_code == 404:
        return []
    assert r.status_code == 200, r.text
    return pull_all(addr, topic, 0)


def queue_of_len(addr: str, topic: str, n: int) -> list[dict[str, Any]] | None:
    """Queue 0 once it holds exactly ``n`` messages, else None."""
    messages = queue_or_empty(addr, topic)
    return messages if len(messages) == n else None


def test_send_back_retries_then_dead_letters(broker: str) -> None:
    create_topic(broker, "T")
    sent = send(broker, "T", "needs retries", queue_id=0, tags="TagR", keys=["order-1", "k2"])
    res = pull(broker, "T", 0)
    assert res["status"] == "FOUND"
    (original,) = res["messages"]
    assert original["reconsume_times"] == 0

    current = original
    for attempt in (1, 2):
        send_back(broker, current["offset_msg_id"], max_reconsume_times=2)
        retry = wait_until(
            partial(queue_of_len, broker, RETRY, attempt), 5.0, what=f"retry #{attempt}"
        )
        current = retry[-1]
        assert (current["topic"], current["queue_id"], current["queue_offset"]) == (
            RETRY,
            0,
            attempt - 1,
        )
        assert current["reconsume_times"] == attempt
        assert current["properties"][P.RETRY_TOPIC] == "T"
        assert current["properties"][P.MAX_RECONSUME_TIMES] == "2"
        assert current["msg_id"] == sent["msg_id"]
        assert body_of(current) == b"needs retries"
        assert (current["tags"], current["keys"]) == ("TagR", ["order-1", "k2"])
        assert not {P.REAL_TOPIC, P.REAL_QUEUE_ID, P.DELAY_TIME_LEVEL} & set(current["properties"])
        assert queue_or_empty(broker, DLQ) == []

    # reconsumed twice already: the third send-back dead-letters it at once
    result = send_back(broker, current["offset_msg_id"], max_reconsume_times=2)
    assert (result["topic"], result["queue_id"]) == (DLQ, 0)
    dead = wait_until(lambda: queue_or_empty(broker, DLQ), 5.0, what="message in the DLQ")
    assert len(dead) == 1
    (dlq_msg,) = dead
    assert (dlq_msg["topic"], dlq_msg["queue_id"], dlq_msg["queue_offset"]) == (DLQ, 0, 0)
    assert dlq_msg["msg_id"] == sent["msg_id"]
    assert body_of(dlq_msg) == b"needs retries"
    assert (dlq_msg["tags"], dlq_msg["keys"]) == ("TagR", ["order-1", "k2"])
    assert dlq_msg["properties"][P.RETRY_TOPIC] == "T"
    assert dlq_msg["reconsume_times"] == 3

    # never again in the retry topic (its delays are 100 ms: a second is plenty)
    holds_for(
        lambda: len(queue_or_empty(broker, RETRY)) == 2 and len(queue_or_empty(broker, DLQ)) == 1,
        1.0,
        interval_s=0.1,
        what="two retries and one dead letter",
    )
    # the original queue still holds just the original
    assert [m["msg_id"] for m in pull_all(broker, "T", 0)] == [sent["msg_id"]]
