"""Sends: one message (JSON), a batch (the wire batch encoding)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from broker.rest import check_batch_headers, compression_param, send_batch, send_single
from broker.routes import Ctrl, JsonBody, client_born_host, sender
from connector.protocol.rest import MAX_I64, SendMessageRequest, SendResultView
from connector.protocol.wire import BATCH_CONTENT_TYPE

router = APIRouter(tags=["send"])

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


@router.post("/topics/{topic}/messages", dependencies=[JsonBody], response_model_exclude_none=True)
async def send_message(
    ctrl: Ctrl, topic: str, req: SendMessageRequest, request: Request
) -> SendResultView:
    ctrl.admit_send(sender(request, ctrl))
    return SendResultView(**await send_single(ctrl, topic, req, client_born_host(request)))


@router.post("/topics/{topic}/messages/batch", openapi_extra=_BATCH_DOC)
async def send_batch_route(
    ctrl: Ctrl,
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
    ctrl.admit_send(sender(request, ctrl))
    data = await request.body()
    return await send_batch(
        ctrl, topic, data, client_born_host(request),
        queue_id=queue_id, born_timestamp=born_timestamp,
        compression=compression_param(compressed),
    )  # fmt: skip
