"""Helpers for the in-process HTTP tests of the broker (FastAPI TestClient, real store).

Not named conftest: tests/broker/store owns a ``conftest`` module its tests import
by name, and a second importable ``conftest`` would shadow it depending on order.
The fixtures live in this directory's conftest.py; plain functions live here.
"""

from __future__ import annotations

import base64
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from broker.app import create_app
from broker.config import BrokerConfig
from broker.controller import BrokerController
from broker.store.config import FlushDiskType
from connector.protocol.batch import encode_batch
from connector.protocol.properties import encode_properties
from connector.protocol.wire import BATCH_CONTENT_TYPE, RECORDS_CONTENT_TYPE

MiB = 1 << 20
MAX_MESSAGE_SIZE = 4 * MiB
PORT = 10911
STORE_HOST_HEX = f"7F000001{PORT:08X}"  # 127.0.0.1:10911, the offset msgId prefix

# Small files, no background cleaner; 8 MiB segments so a 4 MiB message still fits one.
STORE_EXTRA: dict[str, Any] = {
    "mapped_file_size_commit_log": 8 * MiB,
    "flush_disk_type": FlushDiskType.ASYNC_FLUSH,
    "consume_queue_entries_per_file": 1000,
    "max_hash_slot_num": 1024,
    "max_index_num": 8192,
    "clean_resource_interval_ms": 3_600_000,
}

Json = dict[str, Any]
ClientFactory = Callable[..., TestClient]


def start_client(
    stack: ExitStack,
    store_dir: Path,
    *,
    raise_server_exceptions: bool = True,
    extra: Mapping[str, Any] | None = None,
    app_options: Mapping[str, Any] | None = None,
    **config: Any,
) -> TestClient:
    """Build the app as ``pymq broker`` does and enter its lifespan (store start/stop).

    ``app_options`` go to ``create_app`` (e.g. ``hot_path=False``); config keywords
    are BrokerConfig fields and ``extra`` adds StoreConfig keys.
    """
    broker_config = BrokerConfig(
        store_dir=store_dir, port=PORT, extra={**STORE_EXTRA, **(extra or {})}, **config
    )
    app = create_app(BrokerController(broker_config), **(app_options or {}))
    client = TestClient(app, raise_server_exceptions=raise_server_exceptions)
    return stack.enter_context(client)


def offset_msg_id(commit_log_offset: int, store_host: str = STORE_HOST_HEX) -> str:
    """store host (16 hex chars) + the CommitLog offset as 16 hex chars."""
    return f"{store_host}{commit_log_offset:016X}"


def q(name: str) -> str:
    """A path segment, percent-encoded (``%RETRY%g`` -> ``%25RETRY%25g``)."""
    return quote(name, safe="")


def now_ms() -> int:
    return int(time.time() * 1000)


# -- requests ---------------------------------------------------------------------------


def send(client: TestClient, topic: str, body: str | None = "hello", **fields: Any) -> Json:
    """JSON send of one message; insists on SEND_OK."""
    resp = client.post(f"/topics/{q(topic)}/messages", json={"body": body, **fields})
    assert resp.status_code == 200, resp.text
    out: Json = resp.json()
    assert out["status"] == "SEND_OK", out
    return out


def post_batch(client: TestClient, topic: str, data: bytes, **params: Any) -> httpx.Response:
    resp: httpx.Response = client.post(
        f"/topics/{q(topic)}/messages/batch",
        content=data,
        params=params,
        headers={"content-type": BATCH_CONTENT_TYPE},
    )
    return resp


def batch_bytes(entries: Sequence[tuple[bytes, Mapping[str, str]]]) -> bytes:
    """The wire batch of ``(body, properties)`` pairs (flag 0)."""
    return encode_batch([(body, 0, encode_properties(props)) for body, props in entries])


def send_batch(client: TestClient, topic: str, data: bytes, **params: Any) -> Json:
    resp = post_batch(client, topic, data, **params)
    assert resp.status_code == 200, resp.text
    out: Json = resp.json()
    assert out["status"] == "SEND_OK", out
    return out


def pull(
    client: TestClient, topic: str, queue_id: int, offset: int = 0, **params: Any
) -> httpx.Response:
    resp: httpx.Response = client.get(
        f"/topics/{q(topic)}/queues/{queue_id}/messages", params={"offset": offset, **params}
    )
    return resp


def pull_ok(client: TestClient, topic: str, queue_id: int, offset: int = 0, **params: Any) -> Json:
    resp = pull(client, topic, queue_id, offset, **params)
    assert resp.status_code == 200, resp.text
    out: Json = resp.json()
    return out


def pull_records(
    client: TestClient, topic: str, queue_id: int, offset: int = 0, **params: Any
) -> httpx.Response:
    resp: httpx.Response = client.get(
        f"/topics/{q(topic)}/queues/{queue_id}/messages",
        params={"offset": offset, **params},
        headers={"accept": RECORDS_CONTENT_TYPE},
    )
    return resp


def body_of(view: Mapping[str, Any]) -> bytes:
    return base64.b64decode(view["body_base64"])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def health(client: TestClient) -> Json:
    resp = client.get("/health")
    assert resp.status_code == 200, resp.text
    out: Json = resp.json()
    return out


def commit_log_max(client: TestClient) -> int:
    return int(health(client)["commit_log_max_offset"])


def topic_status(client: TestClient, topic: str) -> Json:
    resp = client.get(f"/topics/{q(topic)}")
    assert resp.status_code == 200, resp.text
    out: Json = resp.json()
    return out


def queue_max_offsets(client: TestClient, topic: str) -> list[int]:
    return [queue["max_offset"] for queue in topic_status(client, topic)["queues"]]


def topic_names(client: TestClient) -> set[str]:
    resp = client.get("/topics")
    assert resp.status_code == 200, resp.text
    return {t["topic"] for t in resp.json()["topics"]}


def put_topic(client: TestClient, topic: str, **body: Any) -> Json:
    resp = client.put(f"/topics/{q(topic)}", json=body)
    assert resp.status_code == 200, resp.text
    out: Json = resp.json()
    return out


def assert_error(resp: httpx.Response, status: int, code: str | tuple[str, ...]) -> Json:
    """A 4xx answer whose body is ``{"code": str, "message": str, <scalars>...}``.

    ``code`` may list alternatives where the two ways of serving a request (the hot
    path and the FastAPI routes) legitimately name the same mistake differently.
    """
    assert resp.status_code == status, f"{resp.status_code} {resp.text}"
    assert resp.headers["content-type"].startswith("application/json"), resp.headers
    body: Json = resp.json()
    assert isinstance(body, dict), body
    assert isinstance(body.get("code"), str), body
    assert isinstance(body.get("message"), str), body
    assert body["message"], body
    assert body["code"] in ((code,) if isinstance(code, str) else code), body
    extras = {k: v for k, v in body.items() if k not in ("code", "message")}
    assert all(isinstance(v, (int, str, float, bool)) for v in extras.values()), body
    assert "Traceback" not in body["message"], body
    return body


def metric_samples(client: TestClient) -> Iterator[tuple[str, dict[str, str], float]]:
    resp = client.get("/metrics")
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/plain"), resp.headers
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            yield sample.name, dict(sample.labels), float(sample.value)


def metric(client: TestClient, name: str, **labels: str) -> float | None:
    """The value of one sample (labels must match exactly), or None if absent."""
    for sample_name, sample_labels, value in metric_samples(client):
        if sample_name == name and sample_labels == labels:
            return value
    return None


# -- raw batch surgery ------------------------------------------------------------------

BATCH_HEAD = struct.Struct(">iIiii")  # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN
OFF_TOTALSIZE, OFF_MAGIC, OFF_BODYCRC, OFF_FLAG, OFF_BODYLEN = 0, 4, 8, 12, 16


def patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def crc(body: bytes) -> int:
    return zlib.crc32(body) & 0x7FFFFFFF
