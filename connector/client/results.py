"""What the client hands back: send results, pull results, and send-hook contexts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from connector.protocol.message import Message, MessageExt, MessageQueue
from connector.protocol.msgid import IdBlock
from connector.protocol.status import PullStatus, SendStatus
from connector.protocol.untracked import untrack

__all__ = ["PullResult", "SendContext", "SendMessageHook", "SendResult"]


class SendResult:
    """Where a message (or a batch) was stored.

    ``msg_id`` is the producer's unique id (UNIQ_KEY), ``offset_msg_id`` the
    broker's (host + CommitLog offset, usable with ``GET /messages/{id}``).
    For a batch they are the ids of all its messages joined by commas, as in
    RocketMQ, and ``msg_ids`` / ``offset_msg_ids`` hold them one by one.

    Read-only (properties over private slots). A batch's ids are worked out
    when first read: a caller that only counts (the Spark sink) does not pay
    for a thousand of them a batch. A single message's result holds its two
    ids and nothing more: ``send_async`` makes one a message, and tuples of
    ids would be three more allocations for the cyclic collector to count.
    Nothing in it can refer back to it, so it is left out of the collector's
    lists altogether (``connector.protocol.untracked``).
    """

    __slots__ = ("_batch", "_msg_id", "_offset_msg_id", "_queue", "_queue_offset", "_status")

    _status: SendStatus
    _queue: MessageQueue
    _queue_offset: int
    _msg_id: str | None  # as given, or None: the batch's ids joined when first read
    _offset_msg_id: str | None
    _batch: _BatchIds | None  # None: a single message's (its ids are _msg_id's)

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
        self._status = status
        self._queue = queue
        self._queue_offset = queue_offset
        self._msg_id = msg_id
        self._offset_msg_id = offset_msg_id
        ids, offset_ids = tuple(msg_ids), tuple(offset_msg_ids)
        single = ids == (msg_id,) and offset_ids == (offset_msg_id,)
        self._batch = None if single else _BatchIds(ids, offset_ids)
        if single:
            untrack(self)

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
        res = _new(cls)
        res._status = status
        res._queue = queue
        res._queue_offset = queue_offset
        res._msg_id = res._offset_msg_id = None
        # an IdBlock (immutable) becomes a tuple when first read; a list is copied now
        ids = msg_ids if isinstance(msg_ids, (tuple, IdBlock)) else tuple(msg_ids)
        res._batch = _BatchIds(ids, offsets)
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
        messages: a third of the constructor's time)."""
        res = _new(cls)
        res._status = status
        res._queue = queue
        res._queue_offset = queue_offset
        res._msg_id = msg_id
        res._offset_msg_id = offset_msg_id
        res._batch = None
        untrack(res)
        return res

    def one(self, index: int) -> SendResult:
        """The result of this batch's ``index``-th message (a batch is stored in one
        queue: consecutive queue offsets); a single message's result is itself."""
        batch = self._batch
        if batch is None:
            if index:
                raise IndexError(f"message {index} of a single message's result")
            return self
        return SendResult.of_one(
            self._status,
            self._queue,
            self._queue_offset + index,
            batch.ids()[index],
            batch.offset_ids()[index],
        )

    @property
    def status(self) -> SendStatus:
        return self._status

    @property
    def queue(self) -> MessageQueue:
        return self._queue

    @property
    def queue_offset(self) -> int:
        return self._queue_offset

    @property
    def msg_ids(self) -> tuple[str, ...]:
        batch = self._batch
        if batch is None:
            return (self._msg_id,)  # type: ignore[return-value]  # a single's is a str
        return batch.ids()

    @property
    def offset_msg_ids(self) -> tuple[str, ...]:
        batch = self._batch
        if batch is None:
            return (self._offset_msg_id,)  # type: ignore[return-value]  # a single's is a str
        return batch.offset_ids()

    @property
    def msg_id(self) -> str:
        given = self._msg_id
        return given if given is not None else ",".join(self.msg_ids)

    @property
    def offset_msg_id(self) -> str:
        given = self._offset_msg_id
        return given if given is not None else ",".join(self.offset_msg_ids)

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


class _BatchIds:
    """A batch result's ids one by one: msgIds as given (an ``IdBlock`` until first
    read), offset msgIds as given or made by a callable when first read."""

    __slots__ = ("_ids", "_offset_ids")

    def __init__(
        self,
        ids: tuple[str, ...] | IdBlock,
        offset_ids: tuple[str, ...] | Callable[[], tuple[str, ...]],
    ) -> None:
        self._ids = ids
        self._offset_ids = offset_ids

    def ids(self) -> tuple[str, ...]:
        ids = self._ids
        if not isinstance(ids, tuple):
            ids = self._ids = tuple(ids)
        return ids

    def offset_ids(self) -> tuple[str, ...]:
        offset_ids = self._offset_ids
        if not isinstance(offset_ids, tuple):
            offset_ids = self._offset_ids = offset_ids()
        return offset_ids


_new = object.__new__


@dataclass(frozen=True, slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    records: bytes = b""  # the stored records undecoded (``PullConsumer.pull_records``)
    # the broker id the answer said to read from next (0: the master; a slave's own id
    # while it has lost its master), as RocketMQ's PullResultExt
    suggest_which_broker_id: int = 0


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
