"""REST helpers against real servers over HTTP: topics, sends, pulls, health, routes.

Each helper insists on the answer it expects (HTTP 200, ``SEND_OK``) with the answer in
the assertion message. The in-process variants (FastAPI TestClient) are ``rest_app``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from connector.protocol.batch import encode_batch
from connector.protocol.message import MessageExt
from connector.protocol.properties import encode_properties
from connector.protocol.record import decode_record, record_size
from connector.protocol.wire import (
    BATCH_CONTENT_TYPE,
    H_MAX_OFFSET,
    H_MIN_OFFSET,
    H_NEXT_BEGIN_OFFSET,
    H_STATUS,
    RECORDS_CONTENT_TYPE,
    batch_offsets,
    split_records,
)

QUEUE_CONFIG = {"read_queue_nums": 4, "write_queue_nums": 4, "perm": 6}

HTTP = httpx.Client(timeout=30.0)


def url(addr: str, *parts: str | int) -> str:
    """``http://addr/a/b``; each part is percent-encoded (``%RETRY%g1`` is a legal topic)."""
    return f"http://{addr}/" + "/".join(quote(str(p), safe="") for p in parts)


def create_topic(addr: str, topic: str, config: Mapping[str, int] = QUEUE_CONFIG) -> None:
    r = HTTP.put(url(addr, "topics", topic), json=dict(config))
    assert r.status_code == 200, r.text


def send(addr: str, topic: str, body: str | bytes, **fields: Any) -> dict[str, Any]:
    """A JSON send: text goes as ``body``, bytes as ``body_base64``."""
    payload = (
        {"body_base64": base64.b64encode(body).decode("ascii")}
        if isinstance(body, bytes)
        else {"body": body}
    )
    r = HTTP.post(url(addr, "topics", topic, "messages"), json={**payload, **fields})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    assert result["status"] == "SEND_OK", result
    return result


def send_batch(
    addr: str,
    topic: str,
    bodies: Sequence[bytes],
    *,
    queue_id: int | None = None,
    properties: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    props = encode_properties(properties or {})
    data = encode_batch([(b, 0, props) for b in bodies])
    params = {} if queue_id is None else {"queue_id": queue_id}
    r = HTTP.post(
        url(addr, "topics", topic, "messages", "batch"),
        content=data,
        params=params,
        headers={"content-type": BATCH_CONTENT_TYPE},
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    assert result["status"] == "SEND_OK", result
    assert result["count"] == len(bodies), result
    # every message's CommitLog offset, derived from the answer's offset runs
    sizes = [record_size(len(b), len(topic.encode()), len(props)) for b in bodies]
    result["commit_log_offsets"] = batch_offsets(result["offset_runs"], sizes)
    return result


def pull(
    addr: str,
    topic: str,
    queue_id: int,
    offset: int = 0,
    *,
    max_nums: int = 32,
    wait_ms: int = 0,
    client: httpx.Client | None = None,
) -> dict[str, Any]:
    r = (client or HTTP).get(
        url(addr, "topics", topic, "queues", queue_id, "messages"),
        params={"offset": offset, "max": max_nums, "wait_ms": wait_ms},
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def pull_all(addr: str, topic: str, queue_id: int) -> list[dict[str, Any]]:
    """Every message of a queue (JSON views), in queue order."""
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        res = pull(addr, topic, queue_id, offset, max_nums=256)
        if res["status"] != "FOUND":
            assert res["status"] == "NO_NEW_MSG", res
            return out
        out += res["messages"]
        offset = res["next_begin_offset"]


def body_of(view: Mapping[str, Any]) -> bytes:
    return base64.b64decode(view["body_base64"])


def pull_records(
    addr: str, topic: str, queue_id: int, offset: int = 0, *, max_nums: int = 256
) -> tuple[dict[str, str | int], list[MessageExt]]:
    """A binary pull: (status and offsets from the headers, the decoded records)."""
    r = HTTP.get(
        url(addr, "topics", topic, "queues", queue_id, "messages"),
        params={"offset": offset, "max": max_nums},
        headers={"accept": RECORDS_CONTENT_TYPE},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith(RECORDS_CONTENT_TYPE)
    meta: dict[str, str | int] = {
        "status": r.headers[H_STATUS],
        "next_begin_offset": int(r.headers[H_NEXT_BEGIN_OFFSET]),
        "min_offset": int(r.headers[H_MIN_OFFSET]),
        "max_offset": int(r.headers[H_MAX_OFFSET]),
    }
    return meta, [decode_record(rec) for rec in split_records(r.content)]


def pull_all_records(addr: str, topic: str, queue_id: int) -> list[MessageExt]:
    """Every message of a queue through the binary pull, in queue order."""
    out: list[MessageExt] = []
    offset = 0
    while True:
        meta, msgs = pull_records(addr, topic, queue_id, offset)
        if meta["status"] != "FOUND":
            assert meta["status"] == "NO_NEW_MSG", meta
            return out
        assert msgs, meta
        out += msgs
        offset = int(meta["next_begin_offset"])


def health(addr: str) -> dict[str, Any]:
    r = HTTP.get(url(addr, "health"))
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


# -- NameServer views ----------------------------------------------------------------------


def clusters(ns: str) -> dict[str, Any]:
    r = HTTP.get(url(ns, "clusters"))
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def broker_listed(ns: str, name: str, addr: str) -> bool:
    """Is the broker in every part of ``GET /clusters`` (cluster, broker data, live table)?"""
    info = clusters(ns)
    in_cluster = any(name in names for names in info["clusters"].values())
    in_brokers = any(
        b["broker_name"] == name and addr in b["addrs"].values() for b in info["brokers"]
    )
    live = any(b["addr"] == addr for b in info["live"])
    return in_cluster and in_brokers and live


def broker_absent(ns: str, name: str, addr: str) -> bool:
    """Is the broker gone from every part of ``GET /clusters``?"""
    info = clusters(ns)
    in_cluster = any(name in names for names in info["clusters"].values())
    in_brokers = any(b["broker_name"] == name for b in info["brokers"])
    live = any(b["addr"] == addr for b in info["live"])
    return not (in_cluster or in_brokers or live)


def route(ns: str, topic: str) -> httpx.Response:
    return HTTP.get(url(ns, "routes", topic))
