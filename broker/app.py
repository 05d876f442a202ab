"""The broker's HTTP edge: decode a request, call a processor, encode its result.

Handlers are ``async`` and call the processors directly: a store append or
read takes microseconds, less than a hop to a thread pool; SYNC_FLUSH sends
await their group commit without holding a thread. Errors are PyMQErrors,
mapped to ``{"code", "message"}`` once, by ``connector.edge``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from broker.controller import BrokerController
from broker.processors.pull import PullOutcome, parse_tags
from broker.processors.send import SendOutcome
from broker.store.results import PutMessageResult
from connector import __version__
from connector.edge import install_error_handlers
from connector.errors import MessageTooLargeError, UnsupportedMediaTypeError
from connector.protocol.message import MessageExt
from connector.protocol.msgid import encode_host, encode_offset_msg_id
from connector.protocol.rest import (
    MAX_I64,
    ConsumerOffset,
    ConsumerProgress,
    MessageView,
    OffsetCommit,
    PullResultView,
    SendBackRequest,
    SendMessageRequest,
    SendResultView,
    TopicConfigBody,
    TopicStatus,
)
from connector.protocol.status import PullStatus, SendStatus
from connector.protocol.wire import (
    BATCH_CONTENT_TYPE,
    H_MAX_OFFSET,
    H_MIN_OFFSET,
    H_NEXT_BEGIN_OFFSET,
    H_STATUS,
    RECORDS_CONTENT_TYPE,
)

__all__ = ["create_app"]

_LOCALHOST = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
_BATCH_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            BATCH_CONTENT_TYPE: {
                "schema": {"type": "string", "format": "binary"},
                "example": "TOTALSIZE i32 | MAGIC 0xdaa320a7 | BODYCRC i32 | FLAG i32 | "
                "BODYLEN i32 | body | PROPLEN i16 | properties, repeated",
            }
        },
        "description": "The batch encoding of connector.protocol.batch "
        "(see connector.protocol.wire).",
    }
}
_PULL_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "JSON by default; with `Accept: application/x-pymq-records` the stored "
        "CommitLog records byte for byte, status and offsets in x-pymq-* headers.",
        "content": {RECORDS_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


def _born_host(request: Request) -> bytes:
    client = request.client
    if client is None:
        return _LOCALHOST
    try:
        return encode_host(client.host, client.port)
    except ValueError:  # IPv6 peers: the v1 record layout holds IPv4 only
        return _LOCALHOST


def _json_body(request: Request) -> None:
    ctype = request.headers.get("content-type", "")
    if not ctype.split(";")[0].strip().lower().endswith(("/json", "+json")):
        raise UnsupportedMediaTypeError(f"expected application/json, got {ctype or 'nothing'}")


JsonBody = Depends(_json_body)


def _send_status(put: PutMessageResult) -> str:
    try:
        return SendStatus(put.status.value).value
    except ValueError:
        return SendStatus.SEND_OK.value if put.status.value == "PUT_OK" else put.status.value


def message_view(msg: MessageExt) -> MessageView:
    return MessageView(
        msg_id=msg.msg_id,
        offset_msg_id=msg.offset_msg_id,
        topic=msg.topic,
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        commit_log_offset=msg.commit_log_offset,
        body_base64=base64.b64encode(msg.body).decode("ascii"),
        tags=msg.tags,
        keys=msg.keys,
        properties=msg.properties,
        born_timestamp=msg.born_timestamp,
        store_timestamp=msg.store_timestamp,
        reconsume_times=msg.reconsume_times,
        sys_flag=msg.sys_flag,
        flag=msg.flag,
    )


def create_app(controller: BrokerController) -> FastAPI:
    ctrl = controller
    cfg = ctrl.config
    metrics = ctrl.metrics

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await ctrl.start()
        try:
            yield
        finally:
            await ctrl.stop()

    app = FastAPI(
        title=f"pymq broker {cfg.broker_name}",
        version=__version__,
        lifespan=lifespan,
        description="Send, pull and admin API of one pymq broker.",
    )
    install_error_handlers(app)
    app.state.controller = ctrl

    def _send_result(outcome: SendOutcome, put: PutMessageResult) -> SendResultView:
        assert put.append is not None
        return SendResultView(
            status=_send_status(put),
            msg_id=outcome.msg_id,
            offset_msg_id=encode_offset_msg_id(ctrl.store.store_host, put.append.wrote_offset),
            queue_id=outcome.queue_id,
            queue_offset=put.append.queue_offset,
            topic=outcome.topic,
            broker_name=cfg.broker_name,
        )

    # -- health and metrics -------------------------------------------------------------

    @app.get("/health", tags=["ops"])
    async def health() -> dict[str, Any]:
        rec = ctrl.recovery
        return {
            "status": "ok" if ctrl.store.running else "stopping",
            "role": "broker",
            "broker_name": cfg.broker_name,
            "cluster": cfg.broker_cluster_name,
            "broker_id": cfg.broker_id,
            "addr": cfg.addr,
            "flush_disk_type": ctrl.store.config.flush_disk_type.value,
            "commit_log_max_offset": ctrl.store.commit_log.max_offset(),
            "started_ms": ctrl.started_ms,
            "recovery": None if rec is None else {"abnormal": rec.abnormal},
            "registrations": ctrl.registrar.registrations,
        }

    @app.get("/metrics", tags=["ops"], response_class=Response)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # -- topics -------------------------------------------------------------------------

    @app.get("/topics", tags=["topics"])
    async def list_topics() -> dict[str, list[TopicStatus]]:
        return {"topics": ctrl.admin.topic_list()}

    @app.put("/topics/{topic}", tags=["topics"], dependencies=[JsonBody])
    def put_topic(topic: str, body: TopicConfigBody) -> TopicStatus:
        return ctrl.admin.put_topic(topic, body)

    @app.get("/topics/{topic}", tags=["topics"])
    async def get_topic(topic: str) -> TopicStatus:
        return ctrl.admin.topic_status(topic)

    @app.delete("/topics/{topic}", tags=["topics"])
    def delete_topic(topic: str) -> dict[str, Any]:
        ctrl.admin.delete_topic(topic)
        return {"ok": True, "topic": topic}

    # -- send ---------------------------------------------------------------------------

    @app.post("/topics/{topic}/messages", tags=["send"], dependencies=[JsonBody])
    async def send_message(topic: str, req: SendMessageRequest, request: Request) -> SendResultView:
        t0 = time.perf_counter()
        inner = ctrl.send.single_from_request(topic, req, born_host=_born_host(request))
        outcome = ctrl.send.put_single(inner)
        put = await ctrl.stored(outcome)
        metrics.send_messages.inc()
        metrics.send_latency.labels("single").observe(time.perf_counter() - t0)
        return _send_result(outcome, put)

    @app.post("/topics/{topic}/messages/batch", tags=["send"], openapi_extra=_BATCH_DOC)
    async def send_batch(
        topic: str,
        request: Request,
        queue_id: Annotated[int | None, Query(ge=0, le=MAX_I64)] = None,
        born_timestamp: Annotated[int | None, Query(ge=0, le=MAX_I64)] = None,
        compressed: bool = False,
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != BATCH_CONTENT_TYPE:
            raise UnsupportedMediaTypeError(
                f"expected {BATCH_CONTENT_TYPE}, got {ctype or 'nothing'}"
            )
        limit = ctrl.store.config.max_message_size
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit + (limit >> 2):
            raise MessageTooLargeError(int(declared), limit)
        data = await request.body()
        outcome = ctrl.send.put_batch(
            topic,
            queue_id,
            data,
            born_timestamp=born_timestamp,
            born_host=_born_host(request),
            compressed=compressed,
        )
        put = await ctrl.stored(outcome)
        append = put.append
        assert append is not None
        metrics.send_messages.inc(append.msg_num)
        metrics.send_latency.labels("batch").observe(time.perf_counter() - t0)
        offsets = (
            append.offsets_array.tolist()
            if append.offsets_array is not None
            else [append.wrote_offset]
        )
        return {
            "status": _send_status(put),
            "topic": outcome.topic,
            "broker_name": cfg.broker_name,
            "queue_id": outcome.queue_id,
            "queue_offset": append.queue_offset,
            "count": append.msg_num,
            "msg_id": outcome.msg_id,
            "store_host": ctrl.store.store_host.hex().upper(),
            "commit_log_offsets": offsets,
        }

    # -- pull ---------------------------------------------------------------------------

    @app.get("/topics/{topic}/queues/{queue_id}/messages", tags=["pull"], responses=_PULL_DOC)
    async def pull(
        topic: str,
        queue_id: int,
        request: Request,
        offset: Annotated[int, Query(le=MAX_I64)] = 0,
        max: Annotated[int, Query(ge=1, le=65_536)] = 32,
        tags: Annotated[str | None, Query(max_length=4096)] = None,
        wait_ms: Annotated[int, Query(ge=0, le=MAX_I64)] = 0,
    ) -> Any:
        t0 = time.perf_counter()
        tagset = parse_tags(tags)
        out = ctrl.pull.pull(topic, queue_id, offset, max, tags=tagset)
        if out.status is PullStatus.NO_NEW_MSG and wait_ms > 0 and cfg.long_polling_enable:
            assert ctrl.hold is not None
            waited = min(wait_ms, cfg.max_pull_wait_ms) / 1000
            if await ctrl.hold.wait(
                topic,
                queue_id,
                out.next_begin_offset,
                waited,
                lambda: ctrl.store.get_max_offset_in_queue(topic, queue_id),
            ):
                t0 = time.perf_counter()
                out = ctrl.pull.pull(topic, queue_id, offset, max, tags=tagset)
        metrics.pull_requests.labels(out.status.value).inc()
        response: Response | PullResultView
        if RECORDS_CONTENT_TYPE in request.headers.get("accept", ""):
            response = _records_response(out)
        else:
            response = _json_pull(out, tagset)
        metrics.pull_latency.observe(time.perf_counter() - t0)
        return response

    def _records_response(out: PullOutcome) -> Response:
        body = b""
        if out.result is not None:
            runs = out.result.runs
            body = runs[0].data if len(runs) == 1 else b"".join(r.data for r in runs)
            metrics.pull_messages.inc(out.result.message_count)
        return Response(
            body,
            media_type=RECORDS_CONTENT_TYPE,
            headers={
                H_STATUS: out.status.value,
                H_NEXT_BEGIN_OFFSET: str(out.next_begin_offset),
                H_MIN_OFFSET: str(out.min_offset),
                H_MAX_OFFSET: str(out.max_offset),
            },
        )

    def _json_pull(out: PullOutcome, tagset: frozenset[str] | None) -> PullResultView:
        views: list[MessageView] = []
        if out.result is not None:
            msgs = out.result.messages()
            metrics.pull_messages.inc(len(msgs))
            # the broker filters by tag hash; exact tags are checked here (hash collisions)
            views = [message_view(m) for m in msgs if tagset is None or m.tags in tagset]
        status = out.status
        if status is PullStatus.FOUND and not views:
            status = PullStatus.NO_MATCHED_MSG
        return PullResultView(
            status=status.value,
            next_begin_offset=out.next_begin_offset,
            min_offset=out.min_offset,
            max_offset=out.max_offset,
            messages=views,
        )

    @app.get("/topics/{topic}/queues/{queue_id}/offsets", tags=["pull"])
    async def queue_offsets(topic: str, queue_id: int) -> dict[str, int]:
        ctrl.admin.check_queue(topic, queue_id)
        status = ctrl.admin.queue_status(topic, queue_id)
        return {"min_offset": status.min_offset, "max_offset": status.max_offset,
                "last_update_timestamp": status.last_update_timestamp}  # fmt: skip

    @app.get("/topics/{topic}/queues/{queue_id}/offset-by-time", tags=["pull"])
    async def offset_by_time(
        topic: str, queue_id: int, timestamp: Annotated[int, Query(ge=0, le=MAX_I64)]
    ) -> dict[str, int]:
        return {"offset": ctrl.admin.search_offset(topic, queue_id, timestamp)}

    # -- lookups ------------------------------------------------------------------------

    @app.get("/messages/{msg_id}", tags=["query"])
    async def message_by_id(msg_id: str) -> MessageView:
        return message_view(ctrl.admin.message_by_id(msg_id))

    @app.get("/topics/{topic}/messages", tags=["query"])
    async def messages_by_key(
        topic: str,
        key: Annotated[str, Query(min_length=1, max_length=255)],
        max: Annotated[int, Query(ge=1, le=1000)] = 32,
    ) -> dict[str, list[MessageView]]:
        msgs = ctrl.admin.messages_by_key(topic, key, max)
        return {"messages": [message_view(m) for m in msgs]}

    # -- consumers ----------------------------------------------------------------------

    @app.get("/consumers/{group}/offsets/{topic}/{queue_id}", tags=["consumers"])
    async def get_offset(group: str, topic: str, queue_id: int) -> ConsumerOffset:
        return ctrl.admin.query_offset(group, topic, queue_id)

    @app.put("/consumers/{group}/offsets/{topic}/{queue_id}", tags=["consumers"],
             dependencies=[JsonBody])  # fmt: skip
    async def put_offset(
        group: str, topic: str, queue_id: int, body: OffsetCommit
    ) -> ConsumerOffset:
        return ctrl.admin.commit_offset(group, topic, queue_id, body.offset)

    @app.get("/consumers/{group}/progress", tags=["consumers"])
    async def progress(group: str) -> ConsumerProgress:
        return ctrl.admin.progress(group)

    @app.post("/consumers/{group}/send-back", tags=["consumers"], dependencies=[JsonBody])
    async def send_back(group: str, req: SendBackRequest, request: Request) -> SendResultView:
        inner = ctrl.send.send_back(group, req, born_host=_born_host(request))
        outcome = ctrl.send.put_single(inner)
        put = await ctrl.stored(outcome)
        return _send_result(outcome, put)

    return app
