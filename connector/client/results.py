"""What the client hands back: send results, pull results, and send-hook contexts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from connector.protocol.message import Message, MessageExt, MessageQueue
from connector.protocol.msgid import IdBlock
from connector.protocol.status import PullStatus, SendStatus

__all__ = ["PullResult", "SendContext", "SendMessageHook", "SendResult"]


class SendResult:
    """Where a message (or a batch) was stored.

    ``msg_id`` is the producer's unique id (UNIQ_KEY), ``offset_msg_id`` the
    broker's (host + CommitLog offset, usable with ``GET /messages/{id}``).
    For a batch they are the ids of all its messages joined by commas, as in
    RocketMQ, and ``msg_ids`` / ``offset_msg_ids`` hold them one by one.

    Read-only. A batch's ids are worked out when first read: a caller that
    only counts (the Spark sink) does not pay for a thousand of them a batch.
    """

    __slots__ = ("_ids", "_joined", "_offset_ids", "_offsets", "queue", "queue_offset", "status")

    status: SendStatus
    queue: MessageQueue
    queue_offset: int
    _ids: tuple[str, ...] | IdBlock  # an IdBlock until first read
    _joined: tuple[str, str] | None  # msg_id and offset_msg_id as given, or None: derive
    _offset_ids: tuple[str, ...]
    _offsets: Callable[[], tuple[str, ...]] | None  # makes _offset_ids on first read

    def __init__(
        self,
        status: SendStatus,
        msg_id: str,
        offset_msg_id: str,
        queue: MessageQueue,
        queue_offset: int,
        msg_ids: tuple[str, ...] = (),
        offset_msg_ids: tuple[str, ...] = (),
    ) -> None:
        _set = object.__setattr__
        _set(self, "status", status)
        _set(self, "queue", queue)
        _set(self, "queue_offset", queue_offset)
        _set(self, "_ids", tuple(msg_ids))
        _set(self, "_joined", (msg_id, offset_msg_id))
        _set(self, "_offset_ids", tuple(offset_msg_ids))
        _set(self, "_offsets", None)

    @classmethod
    def of_batch(
        cls,
        status: SendStatus,
        queue: MessageQueue,
        queue_offset: int,
        msg_ids: Sequence[str],
        offsets: Callable[[], tuple[str, ...]],
    ) -> SendResult:
        """A result whose offset msgIds come from ``offsets()`` (in ``msg_ids``' order)
        when first read, and whose comma-joined ids are made when first read."""
        res = cls(status, "", "", queue, queue_offset)
        # an IdBlock (immutable) becomes a tuple when first read; a list is copied now
        ids = msg_ids if isinstance(msg_ids, (tuple, IdBlock)) else tuple(msg_ids)
        object.__setattr__(res, "_ids", ids)
        object.__setattr__(res, "_joined", None)
        object.__setattr__(res, "_offsets", offsets)
        return res

    @classmethod
    def of_one(
        cls,
        status: SendStatus,
        queue: MessageQueue,
        queue_offset: int,
        msg_id: str,
        offset_msg_id: str,
    ) -> SendResult:
        """A single message's result (as ``SendResult(...)``, for one of a batch's
        messages: about a third of the constructor's time)."""
        res = _new(cls)
        _SET_STATUS(res, status)
        _SET_QUEUE(res, queue)
        _SET_QUEUE_OFFSET(res, queue_offset)
        _SET_IDS(res, (msg_id,))
        _SET_JOINED(res, (msg_id, offset_msg_id))
        _SET_OFFSET_IDS(res, (offset_msg_id,))
        _SET_OFFSETS(res, None)
        return res

    @property
    def msg_ids(self) -> tuple[str, ...]:
        if not isinstance(self._ids, tuple):
            object.__setattr__(self, "_ids", tuple(self._ids))
        return self._ids  # type: ignore[return-value]  # made a tuple just above

    @property
    def offset_msg_ids(self) -> tuple[str, ...]:
        if self._offsets is not None:
            object.__setattr__(self, "_offset_ids", self._offsets())
            object.__setattr__(self, "_offsets", None)
        return self._offset_ids

    @property
    def msg_id(self) -> str:
        return self._joined[0] if self._joined is not None else ",".join(self.msg_ids)

    @property
    def offset_msg_id(self) -> str:
        return self._joined[1] if self._joined is not None else ",".join(self.offset_msg_ids)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"SendResult is read-only (tried to set {name})")

    def _key(self) -> tuple[object, ...]:
        return (
            self.status, self.msg_id, self.offset_msg_id, self.queue, self.queue_offset,
            self.msg_ids, self.offset_msg_ids,
        )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SendResult):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"SendResult(status={self.status!r}, msg_id={self.msg_id!r}, "
            f"offset_msg_id={self.offset_msg_id!r}, queue={self.queue!r}, "
            f"queue_offset={self.queue_offset!r}, msg_ids={self.msg_ids!r}, "
            f"offset_msg_ids={self.offset_msg_ids!r})"
        )


# SendResult's slots written directly (its __setattr__ refuses): of_one's fast path
_new = object.__new__
(
    _SET_STATUS, _SET_QUEUE, _SET_QUEUE_OFFSET, _SET_IDS, _SET_JOINED, _SET_OFFSET_IDS,
    _SET_OFFSETS,
) = (
    getattr(SendResult, name).__set__
    for name in (
        "status", "queue", "queue_offset", "_ids", "_joined", "_offset_ids", "_offsets",
    )
)  # fmt: skip


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
