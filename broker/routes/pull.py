"""Pulls by queue offset (long polling), queue offsets, offsets by time."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from broker.rest import json_pull, pull_with_wait, records_payload
from broker.routes import Ctrl
from connector.protocol.hashing import parse_tags
from connector.protocol.rest import MAX_I64, PullResultView
from connector.protocol.wire import RECORDS_CONTENT_TYPE

router = APIRouter(tags=["pull"])

_PULL_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "JSON by default; with `Accept: application/x-pymq-records` the stored "
        "CommitLog records byte for byte, status and offsets in x-pymq-* headers.",
        "content": {RECORDS_CONTENT_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.get("/topics/{topic}/queues/{queue_id}/messages", responses=_PULL_DOC)
async def pull(
    ctrl: Ctrl,
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


@router.get("/topics/{topic}/queues/{queue_id}/offsets")
async def queue_offsets(ctrl: Ctrl, topic: str, queue_id: int) -> dict[str, int]:
    ctrl.admin.check_queue(topic, queue_id)
    status = ctrl.admin.queue_status(topic, queue_id)
    return {"min_offset": status.min_offset, "max_offset": status.max_offset,
            "last_update_timestamp": status.last_update_timestamp}  # fmt: skip


@router.get("/topics/{topic}/queues/{queue_id}/offset-by-time")
async def offset_by_time(
    ctrl: Ctrl, topic: str, queue_id: int, timestamp: Annotated[int, Query(ge=0, le=MAX_I64)]
) -> dict[str, int]:
    return {"offset": ctrl.admin.search_offset(topic, queue_id, timestamp)}
