"""Consumer groups (offsets, progress, connections, send-back) and producer groups."""

from __future__ import annotations

from fastapi import APIRouter, Request

from broker.rest import send_result
from broker.routes import Ctrl, JsonBody, client_born_host
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
