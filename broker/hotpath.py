"""The hot endpoints, served without FastAPI's per-request machinery.

Single send, batch send and pull carry nearly all traffic. Through FastAPI's
routing, dependency solving and middleware stack each costs several hundred
microseconds on a small machine, more than the store's work, so this ASGI
middleware answers them directly and passes every other request on. The
FastAPI routes of the same paths stay: they document the API (OpenAPI) and
call the same functions below, so both ways behave the same.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

import numpy as np
from pydantic import ValidationError

from broker.controller import BrokerController
from broker.processors.pull import PullOutcome
from broker.processors.send import SendOutcome
from broker.store.results import PutMessageResult
from connector.edge.errors import validation_message
from connector.errors import (
    ClientError,
    MessageTooLargeError,
    PyMQError,
    UnsupportedMediaTypeError,
)
from connector.protocol.hashing import parse_tags
from connector.protocol.message import MessageExt
from connector.protocol.msgid import encode_host, encode_offset_msg_id
from connector.protocol.rest import MAX_I64, SendMessageRequest
from connector.protocol.status import PullStatus, SendStatus
from connector.protocol.wire import (
    BATCH_CONTENT_TYPE,
    H_MAX_OFFSET,
    H_MIN_OFFSET,
    H_NEXT_BEGIN_OFFSET,
    H_STATUS,
    RECORDS_CONTENT_TYPE,
)

__all__ = [
    "HotPath",
    "batch_result",
    "born_host",
    "json_pull",
    "message_json",
    "pull_with_wait",
    "records_payload",
    "send_result",
]

log = logging.getLogger(__name__)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_LOCALHOST = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
_JSON = b"application/json"


def born_host(client: tuple[str, int] | list[Any] | None) -> bytes:
    if not client:
        return _LOCALHOST
    try:
        return encode_host(str(client[0]), int(client[1]))
    except ValueError:  # IPv6 peers: the v1 record layout holds IPv4 only
        return _LOCALHOST


def _send_status(put: PutMessageResult) -> str:
    if put.status.value == "PUT_OK":
        return SendStatus.SEND_OK.value
    return put.status.value


# -- shared by the FastAPI routes and the hot path ---------------------------------------


def send_result(
    ctrl: BrokerController, outcome: SendOutcome, put: PutMessageResult
) -> dict[str, Any]:
    append = put.append
    assert append is not None
    return {
        "status": _send_status(put),
        "msg_id": outcome.msg_id,
        "offset_msg_id": encode_offset_msg_id(ctrl.store.store_host, append.wrote_offset),
        "queue_id": outcome.queue_id,
        "queue_offset": append.queue_offset,
        "topic": outcome.topic,
        "broker_name": ctrl.config.broker_name,
    }


def batch_result(
    ctrl: BrokerController, outcome: SendOutcome, put: PutMessageResult
) -> dict[str, Any]:
    append = put.append
    assert append is not None
    runs = [[0, append.wrote_offset]]
    if append.offsets_array is not None and len(append.offsets_array) > 1:
        # a batch is contiguous except where it crossed into a new segment (BLANK)
        segments = append.offsets_array // ctrl.store.commit_log.segment_size
        for i in (np.flatnonzero(segments[1:] != segments[:-1]) + 1).tolist():
            runs.append([i, int(append.offsets_array[i])])
    return {
        "status": _send_status(put),
        "topic": outcome.topic,
        "broker_name": ctrl.config.broker_name,
        "queue_id": outcome.queue_id,
        "queue_offset": append.queue_offset,
        "count": append.msg_num,
        "msg_id": outcome.msg_id,
        "store_host": ctrl.store.store_host.hex().upper(),
        "offset_runs": runs,
    }


async def send_single(
    ctrl: BrokerController, topic: str, req: SendMessageRequest, host: bytes
) -> dict[str, Any]:
    t0 = time.perf_counter()
    requests = ctrl.metrics.send_requests
    try:
        routed = ctrl.send.single_from_request(topic, req, born_host=host)
        outcome = ctrl.send.put_single(routed)
        put = await ctrl.stored(outcome)
    except PyMQError as exc:
        requests.labels("single", exc.code).inc()
        raise
    requests.labels("single", _send_status(put)).inc()
    ctrl.metrics.send_messages.inc()
    ctrl.metrics.send_latency.labels("single").observe(time.perf_counter() - t0)
    return send_result(ctrl, outcome, put)


def check_batch_headers(ctrl: BrokerController, content_type: str, content_length: str) -> None:
    ctype = content_type.split(";", maxsplit=1)[0].strip().lower()
    if ctype != BATCH_CONTENT_TYPE:
        raise UnsupportedMediaTypeError(f"expected {BATCH_CONTENT_TYPE}, got {ctype or 'nothing'}")
    limit = ctrl.store.config.max_message_size
    if content_length.isdigit() and int(content_length) > limit + (limit >> 2):
        raise MessageTooLargeError(int(content_length), limit)


async def send_batch(
    ctrl: BrokerController,
    topic: str,
    data: bytes,
    host: bytes,
    *,
    queue_id: int | None,
    born_timestamp: int | None,
    compressed: bool,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    requests = ctrl.metrics.send_requests
    try:
        outcome = ctrl.send.put_batch(
            topic, queue_id, data, born_timestamp=born_timestamp, born_host=host,
            compressed=compressed,
        )  # fmt: skip
        put = await ctrl.stored(outcome)
    except PyMQError as exc:
        requests.labels("batch", exc.code).inc()
        raise
    requests.labels("batch", _send_status(put)).inc()
    assert put.append is not None
    ctrl.metrics.send_messages.inc(put.append.msg_num)
    ctrl.metrics.send_latency.labels("batch").observe(time.perf_counter() - t0)
    return batch_result(ctrl, outcome, put)


async def pull_with_wait(
    ctrl: BrokerController,
    topic: str,
    queue_id: int,
    offset: int,
    max_nums: int,
    tags: frozenset[str] | None,
    wait_ms: int,
) -> PullOutcome:
    """A pull; with nothing new and ``wait_ms`` > 0, held until a message lands."""
    out = ctrl.pull.pull(topic, queue_id, offset, max_nums, tags=tags)
    cfg = ctrl.config
    if out.status is PullStatus.NO_NEW_MSG and wait_ms > 0 and cfg.long_polling_enable:
        assert ctrl.hold is not None
        store = ctrl.store
        if await ctrl.hold.wait(
            topic,
            queue_id,
            out.next_begin_offset,
            min(wait_ms, cfg.max_pull_wait_ms) / 1000,
            lambda: store.get_max_offset_in_queue(topic, queue_id),
        ):
            out = ctrl.pull.pull(topic, queue_id, offset, max_nums, tags=tags)
    ctrl.metrics.pull_requests.labels(out.status.value).inc()
    return out


def records_payload(ctrl: BrokerController, out: PullOutcome) -> tuple[bytes, dict[str, str]]:
    """The stored records byte for byte, and the pull's status headers."""
    body = b""
    if out.result is not None:
        runs = out.result.runs
        body = runs[0].data if len(runs) == 1 else b"".join(r.data for r in runs)
        ctrl.metrics.pull_messages.inc(out.result.message_count)
    headers = {
        H_STATUS: out.status.value,
        H_NEXT_BEGIN_OFFSET: str(out.next_begin_offset),
        H_MIN_OFFSET: str(out.min_offset),
        H_MAX_OFFSET: str(out.max_offset),
    }
    return body, headers


def message_json(msg: MessageExt) -> dict[str, Any]:
    return {
        "msg_id": msg.msg_id,
        "offset_msg_id": msg.offset_msg_id,
        "topic": msg.topic,
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "commit_log_offset": msg.commit_log_offset,
        "body_base64": base64.b64encode(msg.body).decode("ascii"),
        "tags": msg.tags,
        "keys": msg.keys,
        "properties": msg.properties,
        "born_timestamp": msg.born_timestamp,
        "store_timestamp": msg.store_timestamp,
        "reconsume_times": msg.reconsume_times,
        "sys_flag": msg.sys_flag,
        "flag": msg.flag,
    }


def json_pull(
    ctrl: BrokerController, out: PullOutcome, tags: frozenset[str] | None
) -> dict[str, Any]:
    views: list[dict[str, Any]] = []
    if out.result is not None:
        msgs = out.result.messages()
        ctrl.metrics.pull_messages.inc(len(msgs))
        # the store filters by tag hash; exact tags are checked here (hash collisions)
        views = [message_json(m) for m in msgs if tags is None or m.tags in tags]
    status = out.status
    if status is PullStatus.FOUND and not views:
        status = PullStatus.NO_MATCHED_MSG
    return {
        "status": status.value,
        "next_begin_offset": out.next_begin_offset,
        "min_offset": out.min_offset,
        "max_offset": out.max_offset,
        "messages": views,
    }


# -- the ASGI middleware ----------------------------------------------------------------


def _int_param(
    params: dict[str, str], name: str, default: int | None, lo: int, hi: int
) -> int | None:
    raw = params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ClientError(f"query {name}: {raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise ClientError(f"query {name}: {value} is outside {lo}..{hi}")
    return value


def _bool_param(params: dict[str, str], name: str) -> bool:
    raw = params.get(name, "false").lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ClientError(f"query {name}: {raw!r} is not a boolean")


class HotPath:
    """ASGI middleware answering send, batch send and pull; the rest goes to ``app``."""

    def __init__(self, app: ASGIApp, ctrl: BrokerController) -> None:
        self.app = app
        self.ctrl = ctrl

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            method: str = scope["method"]
            if path.startswith("/topics/"):
                parts = path.split("/")
                n = len(parts)
                if method == "POST" and n == 4 and parts[3] == "messages" and parts[2]:
                    await self._guard(self._single, parts[2], scope, receive, send)
                    return
                if method == "POST" and n == 5 and parts[3:] == ["messages", "batch"] and parts[2]:
                    await self._guard(self._batch, parts[2], scope, receive, send)
                    return
                if (
                    method == "GET"
                    and n == 6
                    and parts[3] == "queues"
                    and parts[5] == "messages"
                    and parts[2]
                    and parts[4].isascii()  # "²".isdigit() is True, int("²") fails
                    and parts[4].removeprefix("-").isdigit()
                ):
                    await self._guard(self._pull, parts[2], scope, receive, send)
                    return
        await self.app(scope, receive, send)

    async def _guard(
        self,
        handler: Callable[[str, Scope, Receive, Send], Awaitable[None]],
        topic: str,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        try:
            await handler(topic, scope, receive, send)
        except PyMQError as exc:
            await _respond(send, exc.http_status, json.dumps(exc.to_dict()).encode(), _JSON)
        except ValidationError as exc:
            body = {"code": "BAD_REQUEST", "message": validation_message(exc.errors())}
            await _respond(send, 400, json.dumps(body).encode(), _JSON)
        except Exception as exc:
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            body = {"code": "SYSTEM_ERROR", "message": f"{type(exc).__name__}: internal error"}
            await _respond(send, 500, json.dumps(body).encode(), _JSON)

    async def _single(self, topic: str, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        ctype = headers.get("content-type", "")
        if not ctype.split(";")[0].strip().lower().endswith(("/json", "+json")):
            raise UnsupportedMediaTypeError(f"expected application/json, got {ctype or 'nothing'}")
        limit = self.ctrl.store.config.max_message_size
        data = await _read_body(receive, limit * 2 + (64 << 10))
        req = SendMessageRequest.model_validate_json(data)
        result = await send_single(self.ctrl, topic, req, born_host(scope.get("client")))
        await _respond(send, 200, json.dumps(result).encode(), _JSON)

    async def _batch(self, topic: str, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        check_batch_headers(self.ctrl, headers.get("content-type", ""),
                            headers.get("content-length", ""))  # fmt: skip
        params = dict(parse_qsl(scope["query_string"].decode("latin-1")))
        queue_id = _int_param(params, "queue_id", None, 0, MAX_I64)
        born = _int_param(params, "born_timestamp", None, 0, MAX_I64)
        compressed = _bool_param(params, "compressed")
        limit = self.ctrl.store.config.max_message_size
        data = await _read_body(receive, limit + (limit >> 2))
        result = await send_batch(
            self.ctrl, topic, data, born_host(scope.get("client")),
            queue_id=queue_id, born_timestamp=born, compressed=compressed,
        )  # fmt: skip
        await _respond(send, 200, json.dumps(result).encode(), _JSON)

    async def _pull(self, topic: str, scope: Scope, receive: Receive, send: Send) -> None:
        t0 = time.perf_counter()
        queue_id = int(scope["path"].split("/")[4])
        params = dict(parse_qsl(scope["query_string"].decode("latin-1")))
        offset = _int_param(params, "offset", 0, -MAX_I64, MAX_I64)
        max_nums = _int_param(params, "max", 32, 1, 65_536)
        wait_ms = _int_param(params, "wait_ms", 0, 0, MAX_I64)
        tags_raw = params.get("tags")
        if tags_raw is not None and len(tags_raw) > 4096:
            raise ClientError("query tags: longer than 4096 characters")
        assert offset is not None and max_nums is not None and wait_ms is not None
        tags = parse_tags(tags_raw)
        out = await pull_with_wait(self.ctrl, topic, queue_id, offset, max_nums, tags, wait_ms)
        if RECORDS_CONTENT_TYPE in _headers(scope).get("accept", ""):
            body, extra = records_payload(self.ctrl, out)
            await _respond(send, 200, body, RECORDS_CONTENT_TYPE.encode(), extra)
        else:
            await _respond(send, 200, json.dumps(json_pull(self.ctrl, out, tags)).encode(), _JSON)
        self.ctrl.metrics.pull_latency.observe(time.perf_counter() - t0)


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientError("client disconnected before the body arrived")
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise MessageTooLargeError(
                    size, limit, message=f"request body exceeds {limit} bytes"
                )
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra: dict[str, str] | None = None,
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if extra:
        headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
