"""What every send attempt decides, whichever driver runs it (the sync driver in
``connector.client.producer``, whose caller waits; the async one in
``connector.client.send_async``, whose answers come on reader threads): the
queue (a given one, one by sharding key, else round-robin with fault
avoidance: the seeds' selectOneMessageQueue), its broker's master, what a
failure means (retry on another broker, and ask for the route again when the
error says the metadata is stale), whether a stored but not SEND_OK answer
goes elsewhere, and the hooks and fault items every attempt updates.

A broker without a master in the route fails the attempt (the next one goes
to another broker) and has the route asked for again at once: on both drivers
(they had drifted: only the sync one asked).
"""

from __future__ import annotations

import logging
import time
import zlib
from collections.abc import Callable

from connector.client.latency import MQFaultStrategy
from connector.client.publish_info import TopicPublishInfo
from connector.client.results import SendContext, SendMessageHook, SendResult
from connector.errors import PyMQError, TopicNotExistError
from connector.protocol.message import Message, MessageQueue
from connector.protocol.status import SendStatus

__all__ = ["SendPolicy"]

log = logging.getLogger(__name__)


class SendPolicy:
    """The decisions of one producer's sends. Thread-safe (its parts are)."""

    def __init__(
        self,
        *,
        group: str,
        fault_strategy: MQFaultStrategy,
        retry_another_broker_when_not_store_ok: bool,
        publish_info: Callable[[str], TopicPublishInfo],
        refresh_route: Callable[[str], object],
    ) -> None:
        self.group = group
        self.fault_strategy = fault_strategy
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.publish_info = publish_info
        self._refresh_route = refresh_route
        self.hooks: list[SendMessageHook] = []

    def pick(
        self,
        info: TopicPublishInfo,
        last_broker: str | None,
        queue: MessageQueue | None,
        sharding_key: str | None,
    ) -> MessageQueue:
        if queue is not None:
            return queue
        if sharding_key is not None:
            queues = info.message_queues
            return queues[zlib.crc32(sharding_key.encode()) % len(queues)]
        return self.fault_strategy.select_one_message_queue(info, last_broker)

    def target(
        self,
        topic: str,
        last_broker: str | None,
        queue: MessageQueue | None,
        sharding_key: str | None,
    ) -> tuple[MessageQueue, str | None]:
        """The queue of the next attempt and its broker's master address (None: the
        route names no master for it; the route is asked for again now, so the
        attempt after next may find one). TopicNotExistError without a route."""
        info = self.publish_info(topic)
        mq = self.pick(info, last_broker, queue, sharding_key)
        addr = info.broker_addrs.get(mq.broker_name)
        if addr is None:
            self.refresh_route(topic)
        return mq, addr

    @staticmethod
    def no_master(mq: MessageQueue) -> TopicNotExistError:
        return TopicNotExistError(f"broker {mq.broker_name} has no master address")

    def refresh_route(self, topic: str) -> None:
        """The topic's route asked for again; a failure is logged (the send goes on
        with the route it has)."""
        try:
            self._refresh_route(topic)
        except PyMQError as exc:
            log.debug("refreshing the route of %s failed: %s", topic, exc)

    def begin(
        self, msg: Message | list[Message], mq: MessageQueue, addr: str, attempt: int
    ) -> SendContext:
        """An attempt's context, after the hooks' ``send_message_before``."""
        ctx = SendContext(self.group, msg, mq, mq.broker_name, addr, attempt)
        for hook in self.hooks:
            try:
                hook.send_message_before(ctx)
            except Exception:  # a broken hook must not break sending; it is logged
                log.exception("send hook %r failed before a send", hook)
        return ctx

    def ended(
        self, ctx: SendContext, t0: float, result: SendResult | None, exc: PyMQError | None
    ) -> None:
        """An attempt's outcome into its context, the broker's fault item and the hooks
        (a failure that may mean the broker is down isolates it)."""
        ctx.latency_ms = (time.monotonic() - t0) * 1000
        ctx.result, ctx.exception = result, exc
        self.fault_strategy.update_fault_item(
            ctx.broker_name, ctx.latency_ms, isolation=exc is not None and exc.retriable
        )
        for hook in self.hooks:
            try:
                hook.send_message_after(ctx)
            except Exception:  # a broken hook must not break sending; it is logged
                log.exception("send hook %r failed after a send", hook)

    @staticmethod
    def may_retry(exc: PyMQError) -> bool:
        """Whether another attempt may follow this failure (on another broker; with
        ``exc.invalid_metadata`` after the route is asked for again)."""
        return exc.retriable or exc.invalid_metadata

    def goes_elsewhere(self, result: SendResult, attempts_left: bool) -> bool:
        """A stored but not SEND_OK answer goes to another broker when so configured."""
        return (
            result.status is not SendStatus.SEND_OK
            and self.retry_another_broker_when_not_store_ok
            and attempts_left
        )
