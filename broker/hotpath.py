"""The hot endpoints, served without FastAPI's per-request machinery.

Single send, batch send and pull carry nearly all traffic. Through FastAPI's
routing, dependency solving and middleware stack each costs several hundred
microseconds on a small machine, more than the store's work. ``HotPath``
gives the server's HTTP protocol these routes (``connector.edge.direct``:
answered from the parser's callbacks, no ASGI cycle or task per request) and,
as ASGI middleware, answers them for requests that come the ASGI way. A
SYNC_FLUSH send's reply is written from a callback when its group commit
lands, not by a task awaiting it. The FastAPI routes of the same paths stay:
they document the API (OpenAPI) and call the same functions below, so every
way behaves the same.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import numpy as np
import orjson
from pydantic import ValidationError

from broker.controller import BrokerController
from broker.processors.pull import PullOutcome
from broker.processors.send import SendOutcome
from broker.store.results import PutMessageResult, PutMessageStatus
from connector.edge.direct import DirectRequest, Reply
from connector.edge.errors import validation_message
from connector.errors import (
    ClientError,
    ConfigError,
    MessageTooLargeError,
    PyMQError,
    ServiceNotAvailableError,
    UnsupportedMediaTypeError,
)
from connector.protocol.compression import CompressionType
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
    "check_batch_headers",
    "json_pull",
    "message_json",
    "pull_with_wait",
    "records_payload",
    "send_batch",
    "send_result",
    "send_single",
    "submit_batch",
    "submit_single",
]

log = logging.getLogger(__name__)
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

T = TypeVar("T")
Answer = Reply | asyncio.Future[Reply]

_LOCALHOST = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
_JSON = b"application/json"
_BORN_HOSTS: dict[tuple[str, int], bytes] = {}  # a connection's peer, encoded once
_RECORDS = RECORDS_CONTENT_TYPE.encode()


def born_host(client: tuple[str, int] | list[Any] | None) -> bytes:
    if not client:
        return _LOCALHOST
    try:
        key = (str(client[0]), int(client[1]))
    except (ValueError, TypeError, IndexError):
        return _LOCALHOST
    host = _BORN_HOSTS.get(key)
    if host is None:
        try:
            host = encode_host(*key)
        except ValueError:  # IPv6 peers: the v1 record layout holds IPv4 only
            host = _LOCALHOST
        if len(_BORN_HOSTS) >= 4096:  # peers come and go: keep the recent ones
            _BORN_HOSTS.clear()
        _BORN_HOSTS[key] = host
    return host


# a stored message's reply status: SEND_OK for PUT_OK, else the store's own word
# (FLUSH_DISK_TIMEOUT, ...); a dict, as an enum's ``.value`` is a Python-level property
_SEND_STATUS = {s: s.value for s in PutMessageStatus} | {
    PutMessageStatus.PUT_OK: SendStatus.SEND_OK.value
}


def _send_status(put: PutMessageResult) -> str:
    return _SEND_STATUS[put.status]


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


def submit_single(
    ctrl: BrokerController,
    topic: str,
    req: SendMessageRequest,
    host: bytes,
    answer: Callable[[dict[str, Any]], T],
) -> T | asyncio.Future[T]:
    """Store a JSON send; ``answer`` turns its result into the reply, now or (a SYNC_FLUSH
    send waiting for its group commit) through the returned future."""
    t0 = time.perf_counter()
    try:
        routed = ctrl.send.single_from_request(topic, req, born_host=host)
        outcome = ctrl.send.put_single(routed)
    except PyMQError as exc:
        ctrl.metrics.send_failed("single", exc.code)
        raise

    def done(put: PutMessageResult) -> T:
        ctrl.metrics.sent("single", _send_status(put), 1, time.perf_counter() - t0)
        return answer(send_result(ctrl, outcome, put))

    return _when_stored(ctrl, outcome, "single", done)


def submit_batch(
    ctrl: BrokerController,
    topic: str,
    data: bytes,
    host: bytes,
    answer: Callable[[dict[str, Any]], T],
    *,
    queue_id: int | None,
    born_timestamp: int | None,
    compression: CompressionType | None,
) -> T | asyncio.Future[T]:
    """Store a wire batch (or a batch of one); as ``submit_single``."""
    t0 = time.perf_counter()
    try:
        outcome = ctrl.send.put_batch(
            topic, queue_id, data, born_timestamp=born_timestamp, born_host=host,
            compression=compression,
        )  # fmt: skip
    except PyMQError as exc:
        ctrl.metrics.send_failed("batch", exc.code)
        raise

    def done(put: PutMessageResult) -> T:
        assert put.append is not None
        count = put.append.msg_num
        ctrl.metrics.sent("batch", _send_status(put), count, time.perf_counter() - t0)
        return answer(batch_result(ctrl, outcome, put))

    return _when_stored(ctrl, outcome, "batch", done)


def _when_stored(
    ctrl: BrokerController,
    outcome: SendOutcome,
    api: str,
    done: Callable[[PutMessageResult], T],
) -> T | asyncio.Future[T]:
    """``done(result)`` once the append is as durable as the flush mode promises:
    at once for ASYNC_FLUSH, else from a callback (no task per send)."""
    source = outcome.pending
    if source is None:
        return done(outcome.put)
    result: asyncio.Future[T] = source.get_loop().create_future()

    def settle(f: asyncio.Future[PutMessageResult]) -> None:
        if result.done():
            return
        if f.cancelled():
            result.cancel()
            return
        try:
            result.set_result(done(outcome.settle(f.result(), ctrl.topics)))
        except PyMQError as exc:
            ctrl.metrics.send_failed(api, exc.code)
            result.set_exception(exc)
        except Exception as exc:  # noqa: BLE001 - a defect: the reply says so and logs it
            result.set_exception(exc)

    source.add_done_callback(settle)
    return result


async def send_single(
    ctrl: BrokerController, topic: str, req: SendMessageRequest, host: bytes
) -> dict[str, Any]:
    res = submit_single(ctrl, topic, req, host, _same)
    return await res if isinstance(res, asyncio.Future) else res


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
    compression: CompressionType | None,
) -> dict[str, Any]:
    res = submit_batch(
        ctrl, topic, data, host, _same,
        queue_id=queue_id, born_timestamp=born_timestamp, compression=compression,
    )  # fmt: skip
    return await res if isinstance(res, asyncio.Future) else res


def _same(result: dict[str, Any]) -> dict[str, Any]:
    return result


def _holds(ctrl: BrokerController, out: PullOutcome, wait_ms: int) -> bool:
    """Whether a pull that found nothing new waits (long polling) for a message."""
    return out.status is PullStatus.NO_NEW_MSG and wait_ms > 0 and ctrl.config.long_polling_enable


async def _held_pull(
    ctrl: BrokerController,
    out: PullOutcome,
    topic: str,
    queue_id: int,
    offset: int,
    max_nums: int,
    tags: frozenset[str] | None,
    wait_ms: int,
) -> PullOutcome:
    """``out`` (nothing new), or the pull again once a message lands within ``wait_ms``."""
    assert ctrl.hold is not None
    store = ctrl.store
    if await ctrl.hold.wait(
        topic,
        queue_id,
        out.next_begin_offset,
        min(wait_ms, ctrl.config.max_pull_wait_ms) / 1000,
        lambda: store.get_max_offset_in_queue(topic, queue_id),
    ):
        out = ctrl.pull.pull(topic, queue_id, offset, max_nums, tags=tags)
    return out


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
    if _holds(ctrl, out, wait_ms):
        out = await _held_pull(ctrl, out, topic, queue_id, offset, max_nums, tags, wait_ms)
    ctrl.metrics.pulled(out.status.value)
    return out


def records_payload(ctrl: BrokerController, out: PullOutcome) -> tuple[bytes, dict[str, str]]:
    """The stored records byte for byte, and the pull's status headers."""
    body = b""
    if out.result is not None:
        runs = out.result.runs
        body = runs[0].data if len(runs) == 1 else b"".join(r.data for r in runs)
        ctrl.metrics.pulled_messages(out.result.message_count)
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
        ctrl.metrics.pulled_messages(len(msgs))
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


def compression_param(raw: str) -> CompressionType | None:
    """The ``compressed`` query of a send: false, true (zlib, as before codecs had
    names), or a codec: zlib, lz4, zstd."""
    value = raw.lower()
    if value in ("0", "false", "no", "off"):
        return None
    if value in ("1", "true", "yes", "on"):
        return CompressionType.ZLIB
    try:
        return CompressionType.parse(value)
    except ConfigError:
        raise ClientError(
            f"query compressed: {raw!r} is not a boolean nor one of zlib, lz4, zstd"
        ) from None


class _Route:
    """One hot endpoint, as the direct protocol and the ASGI middleware both call it."""

    __slots__ = ("handler", "max_body_bytes")

    def __init__(self, handler: Callable[[DirectRequest], Answer], max_body_bytes: int) -> None:
        self.handler = handler
        self.max_body_bytes = max_body_bytes

    def __call__(self, request: DirectRequest) -> Answer:
        try:
            return self.handler(request)
        except Exception as exc:  # noqa: BLE001 - every error is a reply; defects are logged
            return _error_reply(exc, request)

    def too_large(self, size: int) -> Reply:
        limit = self.max_body_bytes
        exc = MessageTooLargeError(size, limit, message=f"request body exceeds {limit} bytes")
        return _error_reply(exc, None)

    def settled(self, future: asyncio.Future[Reply]) -> Reply:
        if future.cancelled():
            return _error_reply(ServiceNotAvailableError("the request was cancelled"), None)
        exc = future.exception()
        return future.result() if exc is None else _error_reply(exc, None)


class HotPath:
    """Send, batch send and pull, answered without FastAPI's per-request machinery.

    ``route(method, path)`` gives the direct protocol (``connector.edge.direct``)
    its routes; as ASGI middleware it answers the same routes for requests that
    come through uvicorn's ASGI cycle and passes the rest to ``app``.
    """

    def __init__(self, app: ASGIApp, ctrl: BrokerController) -> None:
        self.app = app
        self.ctrl = ctrl
        limit = ctrl.store.config.max_message_size
        self._single = _Route(self._send_single, limit * 2 + (64 << 10))
        self._batch = _Route(self._send_batch, limit + (limit >> 2))
        self._pull = _Route(self._pull_messages, 64 << 10)  # a GET's body is ignored

    def route(self, method: str, path: str) -> _Route | None:
        if not path.startswith("/topics/"):
            return None
        parts = path.split("/")
        n = len(parts)
        if method == "POST" and n == 4 and parts[3] == "messages" and parts[2]:
            return self._single
        if method == "POST" and n == 5 and parts[3:] == ["messages", "batch"] and parts[2]:
            return self._batch
        if (
            method == "GET"
            and n == 6
            and parts[3] == "queues"
            and parts[5] == "messages"
            and parts[2]
            and parts[4].isascii()  # "²".isdigit() is True, int("²") fails
            and parts[4].removeprefix("-").isdigit()
        ):
            return self._pull
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.route(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(receive, route.max_body_bytes)
        except MessageTooLargeError as exc:
            reply = route.too_large(exc.size)
        except PyMQError as exc:
            reply = _error_reply(exc, None)
        else:
            request = DirectRequest(
                scope["method"], scope["path"], scope["query_string"], scope["headers"],
                scope.get("client"), body,
            )  # fmt: skip
            answer = route(request)
            if isinstance(answer, Reply):
                reply = answer
            else:
                await asyncio.wait((answer,))
                reply = route.settled(answer)
        await _respond(send, reply)

    # -- the routes: each returns its reply, or a future of it ---------------------------

    def _send_single(self, request: DirectRequest) -> Answer:
        ctype = request.header(b"content-type")
        if not ctype.split(";")[0].strip().lower().endswith(("/json", "+json")):
            raise UnsupportedMediaTypeError(f"expected application/json, got {ctype or 'nothing'}")
        req = SendMessageRequest.model_validate_json(request.body)
        topic = request.path.split("/")[2]
        return submit_single(self.ctrl, topic, req, born_host(request.client), _json_reply)

    def _send_batch(self, request: DirectRequest) -> Answer:
        ctrl = self.ctrl
        check_batch_headers(
            ctrl, request.header(b"content-type"), request.header(b"content-length")
        )
        params = _query(request.query)
        return submit_batch(
            ctrl, request.path.split("/")[2], request.body, born_host(request.client),
            _json_reply,
            queue_id=_int_param(params, "queue_id", None, 0, MAX_I64),
            born_timestamp=_int_param(params, "born_timestamp", None, 0, MAX_I64),
            compression=compression_param(params.get("compressed", "false")),
        )  # fmt: skip

    def _pull_messages(self, request: DirectRequest) -> Answer:
        t0 = time.perf_counter()
        ctrl = self.ctrl
        _, _, topic, _, queue, _ = request.path.split("/")
        queue_id = int(queue)
        params = _query(request.query)
        offset = _int_param(params, "offset", 0, -MAX_I64, MAX_I64)
        max_nums = _int_param(params, "max", 32, 1, 65_536)
        wait_ms = _int_param(params, "wait_ms", 0, 0, MAX_I64)
        tags_raw = params.get("tags")
        if tags_raw is not None and len(tags_raw) > 4096:
            raise ClientError("query tags: longer than 4096 characters")
        assert offset is not None and max_nums is not None and wait_ms is not None
        tags = parse_tags(tags_raw)
        records = RECORDS_CONTENT_TYPE in request.header(b"accept")
        out = ctrl.pull.pull(topic, queue_id, offset, max_nums, tags=tags)
        if not _holds(ctrl, out, wait_ms):
            return self._pull_reply(out, tags, records, t0)

        async def held() -> Reply:
            late = await _held_pull(ctrl, out, topic, queue_id, offset, max_nums, tags, wait_ms)
            return self._pull_reply(late, tags, records, time.perf_counter())

        return asyncio.ensure_future(held())

    def _pull_reply(
        self, out: PullOutcome, tags: frozenset[str] | None, records: bool, t0: float
    ) -> Reply:
        ctrl = self.ctrl
        ctrl.metrics.pulled(out.status.value)
        if records:
            body, extra = records_payload(ctrl, out)
            headers = tuple((k.encode("latin-1"), v.encode("latin-1")) for k, v in extra.items())
            reply = Reply(200, _RECORDS, body, headers)
        else:
            reply = _json_reply(json_pull(ctrl, out, tags))
        ctrl.metrics.pull_answered(time.perf_counter() - t0)
        return reply


def _query(raw: bytes) -> dict[str, str]:
    """The query's parameters, as ``parse_qsl`` reads them (blank values dropped)."""
    if not raw:
        return {}
    text = raw.decode("latin-1")
    if "%" in text or "+" in text:
        return dict(parse_qsl(text))
    params: dict[str, str] = {}
    for pair in text.split("&"):
        name, _, value = pair.partition("=")
        if value:
            params[name] = value
    return params


def _json_reply(result: dict[str, Any]) -> Reply:
    try:
        body = orjson.dumps(result)
    except TypeError:  # what orjson refuses (lone surrogates, huge ints) json still writes
        body = json.dumps(result).encode()
    return Reply(200, _JSON, body)


def _error_reply(exc: BaseException, request: DirectRequest | None) -> Reply:
    if isinstance(exc, PyMQError):
        return Reply(exc.http_status, _JSON, json.dumps(exc.to_dict()).encode())
    if isinstance(exc, ValidationError):
        body = {"code": "BAD_REQUEST", "message": validation_message(exc.errors())}
        return Reply(400, _JSON, json.dumps(body).encode())
    where = f"{request.method} {request.path}" if request is not None else "a hot route"
    log.error("unhandled error on %s", where, exc_info=exc)
    body = {"code": "SYSTEM_ERROR", "message": f"{type(exc).__name__}: internal error"}
    return Reply(500, _JSON, json.dumps(body).encode())


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


async def _respond(send: Send, reply: Reply) -> None:
    status, content_type, body, extra = reply
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    headers += extra
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
