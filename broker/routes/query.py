"""Message lookups: by msgId, by key."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from broker.rest import message_json
from broker.routes import Ctrl
from connector.protocol.rest import MessageView

router = APIRouter(tags=["query"])


@router.get("/messages/{msg_id}")
async def message_by_id(
    ctrl: Ctrl, msg_id: str, topic: Annotated[str | None, Query(max_length=255)] = None
) -> MessageView:
    """A message by its offset msgId, or by the msgId its send returned (UNIQ_KEY:
    looked up in ``topic``'s index, or every topic's)."""
    return MessageView(**message_json(ctrl.admin.message_by_id(msg_id, topic)))


@router.get("/topics/{topic}/messages")
async def messages_by_key(
    ctrl: Ctrl,
    topic: str,
    key: Annotated[str, Query(min_length=1, max_length=255)],
    max: Annotated[int, Query(ge=1, le=1000)] = 32,
) -> dict[str, list[MessageView]]:
    msgs = ctrl.admin.messages_by_key(topic, key, max)
    return {"messages": [MessageView(**message_json(m)) for m in msgs]}
