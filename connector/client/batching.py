"""Auto-batching glue: what joins a batch, and a gathered batch sent.

Single sends made while others of their topic are on the wire gather in the
producer's ``ProduceAccumulator`` (``connector.client.accumulator``, which
decides when a batch goes); this module decides which sends may join (no
compressed body, delay level, sharding key or timeout of their own), encodes a
gathered batch (``Encoder.gathered``) and sends it down the async driver,
whose one answer settles every waiter of the batch with its own result. A
sync sender waits for its result with a bound.
"""

from __future__ import annotations

from connector.client.accumulator import (
    BatchKey,
    Done,
    Gathered,
    ProduceAccumulator,
    SyncWaiter,
    Waiter,
)
from connector.client.encoding import Encoded, Encoder
from connector.client.results import SendResult
from connector.client.send_async import AsyncSender, Slots
from connector.errors import RemotingTimeoutError
from connector.protocol.message import Message

__all__ = ["AutoBatch"]


class AutoBatch:
    def __init__(
        self,
        *,
        encoder: Encoder,
        sender: AsyncSender,
        slots: Slots,
        max_delay_ms: int,
        max_bytes: int,
        total_max_bytes: int,
        send_msg_timeout_ms: int,
        retries: int,
        async_retries: int,
        name: str,
    ) -> None:
        self.encoder = encoder
        self.sender = sender
        self.slots = slots
        self.max_delay_ms = max_delay_ms
        self.send_msg_timeout_ms = send_msg_timeout_ms
        self.retries = retries
        self.async_retries = async_retries
        self.accumulator = ProduceAccumulator(
            self._send_gathered,
            on_settled=self._settled,
            max_delay_ms=max_delay_ms,
            max_bytes=max_bytes,
            total_max_bytes=total_max_bytes,
            name=name,
        )

    @staticmethod
    def gathers(
        encoded: Encoded, msg: Message, sharding_key: str | None, timeout_ms: int | None
    ) -> bool:
        """Whether ``msg`` may join a batch: not with a compressed body, a delay level,
        a sharding key or a timeout of its own."""
        return (
            encoded.compression is None
            and not msg.delay_level
            and sharding_key is None
            and timeout_ms is None
        )

    def add(self, encoded: Encoded, msg: Message, key: BatchKey, waiter: Waiter) -> bool:
        """False when the accumulator holds ``total_batch_max_bytes``: send it alone."""
        # a single message's encoding is bytes of its own, never a view of the scratch
        assert isinstance(encoded.data, bytes)
        return self.accumulator.add(key, msg, len(encoded.data), waiter, encoded)

    def wait(self, waiter: SyncWaiter) -> SendResult:
        """A sync send's result from its batch: its wait behind the batch on the wire and
        its own send are each bounded by ``send_msg_timeout_ms``."""
        limit_s = (self.max_delay_ms + 2 * self.send_msg_timeout_ms) / 1000 + 5
        result = waiter.wait(limit_s)
        if result is None:
            raise RemotingTimeoutError(f"no answer for an auto-batched send within {limit_s:.1f} s")
        return result

    def close(self) -> None:
        """What it gathered is sent first."""
        self.accumulator.close()

    def _send_gathered(self, key: BatchKey, batch: Gathered, done: Done) -> None:
        topic, queue, is_async = key
        msgs = batch.msgs
        encoded = self.encoder.gathered(topic, msgs, batch.encoded)
        retries = self.async_retries if is_async else self.retries
        self.sender.send(encoded, msgs[0] if len(msgs) == 1 else msgs, retries, done, queue=queue)

    def _settled(self, key: BatchKey, count: int) -> None:
        if key[2]:  # async sends: their slots
            self.slots.release(count)
