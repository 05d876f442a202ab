"""The broker's REST edge: decode a request, call a processor, encode its result.

Plain FastAPI routes: admin, docs, curl, dashboards and languages without a
RocketMQ client (the data plane is remoting, ``broker.remoting``; both call
the same processors). Handlers are ``async`` and call the processors
directly: a store append or read takes microseconds, less than a hop to a
thread pool; SYNC_FLUSH sends await their group commit without holding a
thread. Errors are PyMQErrors, mapped to ``{"code", "message"}`` once, by
``connector.server.http_errors``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from broker.controller import BrokerController
from broker.rest import (
    born_host,
    check_batch_headers,
    compression_param,
    json_pull,
    message_json,
    pull_with_wait,
    records_payload,
    send_batch,
    send_result,
    send_single,
)
from broker.store.results import PutMessageStatus
from broker.transaction import COMMIT, ROLLBACK
from connector import __version__
from connector.errors import ServiceNotAvailableError, UnsupportedMediaTypeError
from connector.protocol.acl import REST_ACCESS_KEY
from connector.protocol.hashing import parse_tags
from connector.protocol.msgid import decode_offset_msg_id
from connector.protocol.rest import (
    MAX_I64,
    BatchCommitRequest,
    BatchCommitView,
    ConsumerConnections,
    ConsumerGroupSummary,
    ConsumerOffset,
    ConsumerProgress,
    EndTransactionRequest,
    EndTransactionView,
    MessageView,
    OffsetCommit,
    ProducerConnections,
    PullResultView,
    SendBackRequest,
    SendMessageRequest,
    SendResultView,
    TopicConfigBody,
    TopicStatus,
)
from connector.protocol.wire import (
    BATCH_CONTENT_TYPE,
    RECORDS_CONTENT_TYPE,
)
from connector.server.acl.rest import SIGNING_DOC, AclMiddleware
from connector.server.http_errors import install_error_handlers
from connector.server.limits import BodyLimit

__all__ = ["create_app"]

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


def _sender(request: Request, signed: bool) -> str:
    """Whom a send counts against (``send_rate_limit``): the signing account when ACL
    checked it (``signed``; else a client could name a new one per request), else the
    client's address."""
    key = request.headers.get(REST_ACCESS_KEY) if signed else None
    if key:
        return key
    return request.client.host if request.client else ""


def _born_host(request: Request) -> bytes:
    client = request.client
    return born_host((client.host, client.port) if client else None)


async def _json_body(request: Request) -> None:
    ctype = request.headers.get("content-type", "")
    if not ctype.split(";")[0].strip().lower().endswith(("/json", "+json")):
        raise UnsupportedMediaTypeError(f"expected application/json, got {ctype or 'nothing'}")


JsonBody = Depends(_json_body)


async def _replicated(ctrl: BrokerController) -> None:
    """SYNC_MASTER: a transaction's decision answers once the in-sync slaves have it."""
    status = await ctrl.replicated()
    if status is not PutMessageStatus.PUT_OK:
        raise ServiceNotAvailableError(
            f"the decision is taken here but not known to be on the slaves ({status.value}); "
            "asking again changes nothing"
        )


def create_app(controller: BrokerController) -> FastAPI:
    """The broker's REST app; its lifespan starts and stops ``controller``."""
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
        description="Send, pull and admin API of one pymq broker.\n" + SIGNING_DOC,
    )
    install_error_handlers(app)
    if ctrl.acl is not None:
        app.add_middleware(AclMiddleware, acl=ctrl.acl, routes=lambda: app.router.routes)
    app.add_middleware(BodyLimit, max_bytes=cfg.max_frame_bytes)  # outermost
    app.state.controller = ctrl

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
            "disk_used_percent": round(ctrl.store.disk_used, 1),
            "disk_full": ctrl.store.disk_full,  # writes refused (disk_space_warning_level_ratio)
            "started_ms": ctrl.started_ms,
            "recovery": None if rec is None else {"abnormal": rec.abnormal},
            "registrations": ctrl.registrar.registrations,
            "ha": ctrl.ha_status(),
        }

    @app.get("/metrics", tags=["ops"], response_class=Response)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    # -- topics -------------------------------------------------------------------------

    @app.get("/topics", tags=["topics"])
    async def list_topics() -> dict[str, list[TopicStatus]]:
        return {"topics": ctrl.admin.topic_list()}

    @app.put("/topics/{topic}", tags=["topics"], dependencies=[JsonBody])
    async def put_topic(topic: str, body: TopicConfigBody) -> TopicStatus:
        return await ctrl.put_topic(topic, body)

    @app.get("/topics/{topic}", tags=["topics"])
    async def get_topic(topic: str) -> TopicStatus:
        return ctrl.admin.topic_status(topic)

    @app.delete("/topics/{topic}", tags=["topics"])
    async def delete_topic(topic: str) -> dict[str, Any]:
        await ctrl.delete_topic(topic)
        return {"ok": True, "topic": topic}

    # -- send ---------------------------------------------------------------------------

    @app.post(
        "/topics/{topic}/messages", tags=["send"], dependencies=[JsonBody],
        response_model_exclude_none=True,
    )  # fmt: skip
    async def send_message(topic: str, req: SendMessageRequest, request: Request) -> SendResultView:
        ctrl.admit_send(_sender(request, ctrl.acl is not None))
        return SendResultView(**await send_single(ctrl, topic, req, _born_host(request)))

    @app.post("/transactions/end", tags=["send"], dependencies=[JsonBody])
    async def end_transaction(req: EndTransactionRequest) -> EndTransactionView:
        """END_TRANSACTION: commit or roll back a half (a send with ``transaction_group``).
        The same decision again changes nothing (``already``); the other is refused with
        409 TRANSACTION_ALREADY_DECIDED."""
        ctrl.send.check_master()
        _, commit_log_offset = decode_offset_msg_id(req.offset_msg_id)
        decision = COMMIT if req.action == "commit" else ROLLBACK
        result = await asyncio.to_thread(
            ctrl.transactions.end, req.producer_group, req.queue_offset, commit_log_offset,
            decision,
        )  # fmt: skip
        await _replicated(ctrl)
        return EndTransactionView.model_validate(
            {"decision": result.decision, "already": result.already,
             "half_queue_offset": result.half_offset}
        )  # fmt: skip

    @app.get("/transactions", tags=["send"])
    async def transactions() -> dict[str, int]:
        """The check pass's progress through the half topic, and what it did."""
        tx = ctrl.transactions
        return {
            "halves": tx.halves_stored,
            "half_progress": tx.half_progress,
            "undecided": await asyncio.to_thread(lambda: tx.undecided),
            "check_backs_sent": tx.checked,
            "rolled_back_after_checks": tx.rolled_back_unchecked,
        }

    @app.get("/transactions/{half_queue_offset}", tags=["send"])
    async def transaction_state(half_queue_offset: int) -> dict[str, Any]:
        """``open``, ``committed`` or ``rolled_back``: a half, by its queue offset."""
        state = await asyncio.to_thread(ctrl.transactions.state, half_queue_offset)
        return {"half_queue_offset": half_queue_offset, "state": state}

    @app.post("/transactions/batch-commit", tags=["send"], dependencies=[JsonBody])
    async def commit_batch(req: BatchCommitRequest) -> BatchCommitView:
        """Commit the batch halves of one (writer, batch) key, all or none, once: a
        repeated commit of the key answers ``already`` with what the first committed."""
        ctrl.send.check_master()
        result = await asyncio.to_thread(
            ctrl.transactions.commit_batch, req.producer_group, req.writer, req.batch,
            [(q, p) for q, p in req.halves], req.manifest,
        )  # fmt: skip
        await _replicated(ctrl)
        return BatchCommitView(
            already=result.already, halves=result.halves, messages=result.messages,
            manifest=result.manifest,
        )  # fmt: skip

    @app.post("/topics/{topic}/messages/batch", tags=["send"], openapi_extra=_BATCH_DOC)
    async def send_batch_route(
        topic: str,
        request: Request,
        queue_id: Annotated[int | None, Query(ge=0, le=MAX_I64)] = None,
        born_timestamp: Annotated[int | None, Query(ge=0, le=MAX_I64)] = None,
        compressed: Annotated[
            str,
            Query(
                description="a single message's body is compressed: false, true (zlib), "
                "or the codec: zlib, lz4, zstd"
            ),
        ] = "false",
    ) -> dict[str, Any]:
        check_batch_headers(
            ctrl,
            request.headers.get("content-type", ""),
            request.headers.get("content-length", ""),
        )
        ctrl.admit_send(_sender(request, ctrl.acl is not None))
        data = await request.body()
        return await send_batch(
            ctrl, topic, data, _born_host(request),
            queue_id=queue_id, born_timestamp=born_timestamp,
            compression=compression_param(compressed),
        )  # fmt: skip

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
        tagset = parse_tags(tags)
        out = await pull_with_wait(ctrl, topic, queue_id, offset, max, tagset, wait_ms)
        if RECORDS_CONTENT_TYPE in request.headers.get("accept", ""):
            body, headers = records_payload(ctrl, out)
            return Response(body, media_type=RECORDS_CONTENT_TYPE, headers=headers)
        return PullResultView(**json_pull(ctrl, out, tagset))

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
    async def message_by_id(
        msg_id: str, topic: Annotated[str | None, Query(max_length=255)] = None
    ) -> MessageView:
        """A message by its offset msgId, or by the msgId its send returned (UNIQ_KEY:
        looked up in ``topic``'s index, or every topic's)."""
        return MessageView(**message_json(ctrl.admin.message_by_id(msg_id, topic)))

    @app.get("/topics/{topic}/messages", tags=["query"])
    async def messages_by_key(
        topic: str,
        key: Annotated[str, Query(min_length=1, max_length=255)],
        max: Annotated[int, Query(ge=1, le=1000)] = 32,
    ) -> dict[str, list[MessageView]]:
        msgs = ctrl.admin.messages_by_key(topic, key, max)
        return {"messages": [MessageView(**message_json(m)) for m in msgs]}

    # -- consumers ----------------------------------------------------------------------

    @app.get("/consumers/{group}/offsets/{topic}/{queue_id}", tags=["consumers"])
    async def get_offset(group: str, topic: str, queue_id: int) -> ConsumerOffset:
        return ctrl.admin.query_offset(group, topic, queue_id)

    @app.put("/consumers/{group}/offsets/{topic}/{queue_id}", tags=["consumers"],
             dependencies=[JsonBody])  # fmt: skip
    async def put_offset(
        group: str, topic: str, queue_id: int, body: OffsetCommit
    ) -> ConsumerOffset:
        committed = ctrl.admin.commit_offset(group, topic, queue_id, body.offset)
        if body.notify_consumers:
            ctrl.on_offset_reset(group, topic, queue_id, body.offset)
        return committed

    @app.get("/consumers", tags=["consumers"])
    async def consumer_groups() -> list[ConsumerGroupSummary]:
        """Every group with a client online or an offset committed here, and its lag."""
        return ctrl.connections.consumer_groups()

    @app.get("/consumers/{group}/connections", tags=["consumers"])
    async def consumer_connections(group: str) -> ConsumerConnections:
        """The group's live clients (id, address, language, version) and subscriptions."""
        return ctrl.connections.consumer_connections(group)

    @app.get("/producers/{group}/connections", tags=["producers"])
    async def producer_connections(group: str) -> ProducerConnections:
        return ctrl.connections.producer_connections(group)

    # -- settings -----------------------------------------------------------------------

    @app.get("/config", tags=["ops"])
    async def get_config() -> dict[str, Any]:
        """Every setting as the broker runs with it (secrets masked)."""
        return ctrl.settings.get()

    @app.put("/config", tags=["ops"], dependencies=[JsonBody])
    async def update_config(changes: dict[str, Any]) -> dict[str, Any]:
        """Change settings the broker reads where it uses them, until it stops
        (``{"auto_create_topic_enable": false}``); the others are refused (400)."""
        return ctrl.settings.update(changes)

    @app.get("/consumers/{group}/progress", tags=["consumers"])
    async def progress(group: str) -> ConsumerProgress:
        return ctrl.admin.progress(group)

    @app.post("/consumers/{group}/send-back", tags=["consumers"], dependencies=[JsonBody])
    async def send_back(group: str, req: SendBackRequest, request: Request) -> SendResultView:
        routed = ctrl.send.send_back(group, req, born_host=_born_host(request))
        outcome = ctrl.send.put_single(routed)
        put = await ctrl.stored(outcome)
        return SendResultView(**send_result(ctrl, outcome, put))

    return app
