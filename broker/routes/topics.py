"""Topics: list, create or update, look at, delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from broker.routes import Ctrl, JsonBody
from connector.protocol.rest import TopicConfigBody, TopicStatus

router = APIRouter(tags=["topics"])


@router.get("/topics")
async def list_topics(ctrl: Ctrl) -> dict[str, list[TopicStatus]]:
    return {"topics": ctrl.admin.topic_list()}


@router.put("/topics/{topic}", dependencies=[JsonBody])
async def put_topic(ctrl: Ctrl, topic: str, body: TopicConfigBody) -> TopicStatus:
    return await ctrl.put_topic(topic, body)


@router.get("/topics/{topic}")
async def get_topic(ctrl: Ctrl, topic: str) -> TopicStatus:
    return ctrl.admin.topic_status(topic)


@router.delete("/topics/{topic}")
async def delete_topic(ctrl: Ctrl, topic: str) -> dict[str, Any]:
    await ctrl.delete_topic(topic)
    return {"ok": True, "topic": topic}
