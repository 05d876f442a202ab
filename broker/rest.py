"""What the broker's REST routes share: results as JSON, sends awaited until durable,
pulls with long polling, request checks. ``broker.routes`` holds the routes.

REST is the admin and tooling edge (curl, dashboards, languages without a
RocketMQ client); the data plane is remoting (``broker.remoting``). Both call
the same processors.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import numpy as np

from broker.controller import BrokerController
from broker.processors.pull import PullOutcome
from broker.processors.send import SendOutcome
from broker.store.results import PutMessageResult, PutMessageStatus
from connector.errors import (
    ClientError,
    ConfigError,
    MessageTooLargeError,
    PyMQError,
    UnsupportedMediaTypeError,
)
from connector.protocol.compression import CompressionType
from connector.protocol.message import MessageExt
from connector.protocol.msgid import encode_host, encode_offset_msg_id
from connector.protocol.rest import SendMessageRequest
from connector.protocol.status import PullStatus, SendStatus
from connector.protocol.wire import (
    BATCH_CONTENT_TYPE,
    H_MAX_OFFSET,
    H_MIN_OFFSET,
    H_NEXT_BEGIN_OFFSET,
    H_STATUS,
)

__all__ = [
    "batch_result",
    "born_host",
    "check_batch_headers",
    "compression_param",
    "json_pull",
    "message_json",
    "pull_with_wait",
    "records_payload",
    "send_batch",
    "send_result",
    "send_single",
]

_LOCALHOST = b"\x7f\x00\x00\x01\x00\x00\x00\x00"


def born_host(client: tuple[str, int] | None) -> bytes:
    """The peer as a record's BORNHOST (IPv4 + port); loopback for others."""
    if not client:
        return _LOCALHOST
    try:
        return encode_host(str(client[0]), int(client[1]))
    except (ValueError, TypeError, PyMQError):  # IPv6: the v1 layout holds IPv4 only
        return _LOCALHOST


def _send_status(put: PutMessageResult) -> str:
    if put.status is PutMessageStatus.PUT_OK:
        return str(SendStatus.SEND_OK.value)
    return str(put.status.value)


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
        **({"transaction_id": outcome.transaction_id} if outcome.transaction_id else {}),
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
    """Store a JSON send; its result once as durable as the flush mode promises."""
    t0 = time.perf_counter()
    try:
        routed = ctrl.send.single_from_request(topic, req, born_host=host)
        outcome = ctrl.send.put_single(routed)
        put = await ctrl.stored(outcome)
    except PyMQError as exc:
        ctrl.metrics.send_failed("single", exc.code)
        raise
    ctrl.metrics.sent("single", _send_status(put), 1, time.perf_counter() - t0)
    return send_result(ctrl, outcome, put)


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
    """Store a wire batch (or a batch of one); as ``send_single``."""
    t0 = time.perf_counter()
    try:
        outcome = ctrl.send.put_batch(
            topic, queue_id, data, born_timestamp=born_timestamp, born_host=host,
            compression=compression,
        )  # fmt: skip
        put = await ctrl.stored(outcome)
    except PyMQError as exc:
        ctrl.metrics.send_failed("batch", exc.code)
        raise
    assert put.append is not None
    ctrl.metrics.sent("batch", _send_status(put), put.append.msg_num, time.perf_counter() - t0)
    return batch_result(ctrl, outcome, put)


def check_batch_headers(ctrl: BrokerController, content_type: str, content_length: str) -> None:
    ctype = content_type.split(";", maxsplit=1)[0].strip().lower()
    if ctype != BATCH_CONTENT_TYPE:
        raise UnsupportedMediaTypeError(f"expected {BATCH_CONTENT_TYPE}, got {ctype or 'nothing'}")
    limit = ctrl.store.config.max_message_size
    if content_length.isdigit() and int(content_length) > limit + (limit >> 2):
        raise MessageTooLargeError(int(content_length), limit)


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
    held = out.status is PullStatus.NO_NEW_MSG and wait_ms > 0 and ctrl.config.long_polling_enable
    if held and await ctrl.arrival(topic, queue_id, out.next_begin_offset, wait_ms):
        out = ctrl.pull.pull(topic, queue_id, offset, max_nums, tags=tags)
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
