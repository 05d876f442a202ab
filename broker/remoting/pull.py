"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361) over remoting.

The answer's body is the stored records byte for byte (RocketMQ's v1
layout), so a pull costs the broker a read and a write, no per-message
work. Status codes as RocketMQ's PullMessageProcessor: SUCCESS with
records, PULL_NOT_FOUND when nothing is new (held up to
``suspendTimeoutMillis`` when the suspend bit is set: long polling),
PULL_RETRY_IMMEDIATELY when the tag filter skipped everything read,
PULL_OFFSET_MOVED with a corrected ``nextBeginOffset`` outside the queue.
With the commit-offset bit, the group's offset is committed on the way.
"""

from __future__ import annotations

import logging

from broker.controller import BrokerController
from broker.longpoll import HeldPull
from broker.processors.pull import PullOutcome
from connector.errors import ClientError, InvalidOffsetError, PyMQError
from connector.protocol.hashing import parse_tags
from connector.protocol.remoting import MAX_FRAME_BYTES, RemotingCommand, ResponseCode
from connector.protocol.status import PullStatus
from connector.server.remoting import Channel, Ext

__all__ = ["PullHandlers"]

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
# a pull's answer stays inside one frame (16 MiB), with room for its header
MAX_PULL_BYTES = MAX_FRAME_BYTES - (1 << 20)

_CODES = {
    PullStatus.FOUND: ResponseCode.SUCCESS,
    PullStatus.NO_NEW_MSG: ResponseCode.PULL_NOT_FOUND,
    PullStatus.NO_MATCHED_MSG: ResponseCode.PULL_RETRY_IMMEDIATELY,
}


class PullHandlers:
    def __init__(self, ctrl: BrokerController) -> None:
        self.ctrl = ctrl

    def pull(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        ext = Ext(request.ext)
        topic = ext.text("topic")
        queue_id = ext.number("queueId")
        offset = ext.number("queueOffset")
        max_nums = ext.number("maxMsgNums", 32)
        sys_flag = ext.number("sysFlag", 0)
        expression = ext.text("expressionType", "TAG").upper()
        if expression != "TAG":
            raise ClientError(f"filter expression type {expression} is not supported (TAG only)")
        # without one, the client filters by tag itself (RocketMQ's clients always do)
        tags = parse_tags(ext.text("subscription", "*"))
        max_bytes = min(ext.number("maxMsgBytes", MAX_PULL_BYTES) or MAX_PULL_BYTES, MAX_PULL_BYTES)
        group = ext.text("consumerGroup", "")
        if sys_flag & FLAG_COMMIT_OFFSET and group:
            commit = ext.number("commitOffset", -1)
            if commit >= 0:
                self._commit(group, topic, queue_id, commit)
        try:
            out = self.ctrl.pull.pull(
                topic, queue_id, offset, max_nums, tags=tags, max_bytes=max_bytes
            )
        except InvalidOffsetError as exc:
            return self._moved(request, exc)
        wait_ms = ext.number("suspendTimeoutMillis", 0) if sys_flag & FLAG_SUSPEND else 0
        if (
            out.status is PullStatus.NO_NEW_MSG
            and wait_ms > 0
            and self.ctrl.config.long_polling_enable
        ):
            self._hold(
                channel, request, out, topic, queue_id, offset, max_nums, tags, max_bytes, wait_ms
            )
            return None  # answered by _hold's callback
        return self._answer(request, out)

    def _hold(
        self,
        channel: Channel,
        request: RemotingCommand,
        out: PullOutcome,
        topic: str,
        queue_id: int,
        offset: int,
        max_nums: int,
        tags: frozenset[str] | None,
        max_bytes: int,
        wait_ms: int,
    ) -> None:
        """Hold the pull; it is answered from inside the append that wakes it (the
        send's loop step, before the send's own answer) or when its time is up."""
        ctrl = self.ctrl
        owed: list[HeldPull] = []

        def answer(arrived: bool) -> None:
            if owed:
                channel.paid(owed[0])
            if channel.closed:
                return
            try:
                found = out
                if arrived:
                    found = ctrl.pull.pull(
                        topic, queue_id, offset, max_nums, tags=tags, max_bytes=max_bytes
                    )
                channel.reply(request, self._answer(request, found))
            except InvalidOffsetError as exc:
                channel.reply(request, self._moved(request, exc))
            # e.g. the topic was deleted meanwhile; a defect is logged, and the append that
            # woke this pull goes on either way
            except Exception as exc:  # noqa: BLE001
                channel.reply_error(request, exc)

        held = ctrl.hold_pull(topic, queue_id, out.next_begin_offset, wait_ms, answer)
        if not held.done:
            owed.append(held)
            channel.owe(held)

    def _answer(self, request: RemotingCommand, out: PullOutcome) -> RemotingCommand:
        ctrl = self.ctrl
        ctrl.metrics.pulled(out.status.value)
        body: bytes | memoryview = b""
        if out.result is not None:
            runs = out.result.runs
            body = runs[0].data if len(runs) == 1 else b"".join(r.data for r in runs)
            ctrl.metrics.pulled_messages(out.result.message_count)
        ext = {
            "suggestWhichBrokerId": self.ctrl.suggested_broker_id(),
            "nextBeginOffset": str(out.next_begin_offset),
            "minOffset": str(out.min_offset),
            "maxOffset": str(out.max_offset),
        }
        return request.response(_CODES[out.status], ext, body)

    def _moved(self, request: RemotingCommand, exc: InvalidOffsetError) -> RemotingCommand:
        self.ctrl.metrics.pulled("OFFSET_ILLEGAL")
        f = exc.fields
        ext = {
            "suggestWhichBrokerId": self.ctrl.suggested_broker_id(),
            "nextBeginOffset": str(f["next_begin_offset"]),
            "minOffset": str(f["min_offset"]),
            "maxOffset": str(f["max_offset"]),
        }
        return request.response(ResponseCode.PULL_OFFSET_MOVED, ext, remark=exc.message)

    def _commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        try:
            self.ctrl.admin.commit_offset(group, topic, queue_id, offset)
        except PyMQError as exc:  # the pull itself answers for a bad topic or queue
            log.debug("offset commit with a pull refused: %s", exc)
