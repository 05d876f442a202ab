"""What the client hands back: send results, pull results, and send-hook contexts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from connector.protocol.message import Message, MessageExt, MessageQueue
from connector.protocol.status import PullStatus, SendStatus

__all__ = ["PullResult", "SendContext", "SendMessageHook", "SendResult"]


@dataclass(frozen=True, slots=True)
class SendResult:
    """Where a message (or a batch) was stored.

    ``msg_id`` is the producer's unique id (UNIQ_KEY), ``offset_msg_id`` the
    broker's (host + CommitLog offset, usable with ``GET /messages/{id}``).
    For a batch they are the ids of all its messages joined by commas, as in
    RocketMQ, and ``msg_ids`` / ``offset_msg_ids`` hold them one by one.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    msg_ids: tuple[str, ...] = ()
    offset_msg_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    records: bytes = b""  # the stored records undecoded (``PullConsumer.pull_records``)


@dataclass(slots=True)
class SendContext:
    """One send attempt, as hooks see it (retries are separate attempts)."""

    producer_group: str
    message: Message | list[Message]
    queue: MessageQueue
    broker_name: str
    broker_addr: str
    attempt: int
    result: SendResult | None = None
    exception: BaseException | None = None
    latency_ms: float = 0.0


class SendMessageHook(Protocol):
    """RocketMQ's SendMessageHook: called before and after every attempt."""

    def send_message_before(self, ctx: SendContext) -> None: ...

    def send_message_after(self, ctx: SendContext) -> None: ...
