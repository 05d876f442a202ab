"""Consumer groups (offsets, progress, connections, send-back) and producer groups."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import APIRouter, Request

from broker.rest import send_result
from broker.routes import Ctrl, JsonBody, client_born_host
from connector.errors import ServiceNotAvailableError
from connector.protocol.remoting import RequestCode
from connector.protocol.rest import (
    ConsumerConnections,
    ConsumerGroupSummary,
    ConsumerOffset,
    ConsumerProgress,
    OffsetCommit,
    ProducerConnections,
    SendBackRequest,
    SendResultView,
)

router = APIRouter(tags=["consumers"])
producers = APIRouter(tags=["producers"])


@router.get("/consumers/{group}/offsets/{topic}/{queue_id}")
async def get_offset(ctrl: Ctrl, group: str, topic: str, queue_id: int) -> ConsumerOffset:
    return ctrl.admin.query_offset(group, topic, queue_id)


@router.put("/consumers/{group}/offsets/{topic}/{queue_id}", dependencies=[JsonBody])
async def put_offset(
    ctrl: Ctrl, group: str, topic: str, queue_id: int, body: OffsetCommit
) -> ConsumerOffset:
    committed = ctrl.admin.commit_offset(group, topic, queue_id, body.offset)
    if body.notify_consumers:
        ctrl.on_offset_reset(group, topic, queue_id, body.offset)
    return committed


@router.get("/consumers")
async def consumer_groups(ctrl: Ctrl) -> list[ConsumerGroupSummary]:
    """Every group with a client online or an offset committed here, and its lag."""
    return ctrl.connections.consumer_groups()


@router.get("/consumers/{group}/connections")
async def consumer_connections(ctrl: Ctrl, group: str) -> ConsumerConnections:
    """The group's live clients (id, address, language, version) and subscriptions."""
    return ctrl.connections.consumer_connections(group)


@router.get("/consumers/{group}/clients/{client_id}/running-info")
async def running_info(ctrl: Ctrl, group: str, client_id: str) -> dict[str, Any]:
    """What a live consumer of the group says of itself (GET_CONSUMER_RUNNING_INFO sent
    on its connection to this broker): properties, subscriptions, the queues it holds
    with their offsets. 404 if it is not connected here."""
    if ctrl.call_consumer is None:
        raise ServiceNotAvailableError("the remoting edge is not up")
    ext = {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"}
    body = await ctrl.call_consumer(
        group, client_id, RequestCode.GET_CONSUMER_RUNNING_INFO, ext, b""
    )
    try:
        info = orjson.loads(body)
    except orjson.JSONDecodeError:  # RocketMQ's Java clients write maps with object keys
        return {"raw": body.decode("utf-8", "replace")}
    return info if isinstance(info, dict) else {"raw": info}


@router.post("/consumers/{group}/clients/{client_id}/consume/{msg_id}")
async def consume_directly(
    ctrl: Ctrl, group: str, client_id: str, msg_id: str, topic: str | None = None
) -> dict[str, Any]:
    """Give the message ``msg_id`` (stored here) to a live consumer's listener now
    (CONSUME_MESSAGE_DIRECTLY on its connection): its answer, ``consumeResult``
    CR_SUCCESS | CR_LATER | CR_THROW_EXCEPTION, ``remark``, ``spentTimeMills``. Offsets
    do not move. 404 if the message or the client is not here."""
    if ctrl.call_consumer is None:
        raise ServiceNotAvailableError("the remoting edge is not up")
    msg, record = ctrl.admin.record_by_id(msg_id, topic)
    ext = {
        "consumerGroup": group, "clientId": client_id, "msgId": msg.msg_id,
        "brokerName": ctrl.config.broker_name,
    }  # fmt: skip
    body = await ctrl.call_consumer(
        group, client_id, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, record
    )
    answer = orjson.loads(body) if body else {}
    return answer if isinstance(answer, dict) else {"raw": answer}


@producers.get("/producers/{group}/connections")
async def producer_connections(ctrl: Ctrl, group: str) -> ProducerConnections:
    return ctrl.connections.producer_connections(group)


@router.get("/consumers/{group}/progress")
async def progress(ctrl: Ctrl, group: str) -> ConsumerProgress:
    return ctrl.admin.progress(group)


@router.post("/consumers/{group}/send-back", dependencies=[JsonBody])
async def send_back(
    ctrl: Ctrl, group: str, req: SendBackRequest, request: Request
) -> SendResultView:
    routed = ctrl.send.send_back(group, req, born_host=client_born_host(request))
    outcome = ctrl.send.put_single(routed)
    put = await ctrl.stored(outcome)
    return SendResultView(**send_result(ctrl, outcome, put))
