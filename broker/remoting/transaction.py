"""Transactions over remoting: END_TRANSACTION (37) from producers, and
CHECK_TRANSACTION_STATE (39) sent to a live producer of a half's group.

END_TRANSACTION ext: producerGroup, tranStateTableOffset (the half's queue
offset), commitLogOffset (its CommitLog offset), commitOrRollback (8 commit,
12 rollback, 0 unknown: nothing to do), fromTransactionCheck, msgId,
transactionId. RocketMQ's clients send it oneway; pymq's asks and reads the
answer: SUCCESS (remark ``already committed`` / ``already rolled back`` when
it changed nothing), or ``TRANSACTION_ALREADY_DECIDED`` for the opposite
decision. CHECK_TRANSACTION_STATE goes oneway, as RocketMQ's broker sends it:
ext tranStateTableOffset, commitLogOffset, msgId, transactionId, offsetMsgId;
body the message in the CommitLog's record layout, with its real topic and
queue.
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import Any

import orjson
from pydantic import ValidationError

from broker.controller import BrokerController
from broker.store.results import PutMessageStatus
from broker.transaction import COMMIT, ROLLBACK, born_host_of
from connector.errors import MessageIllegalError
from connector.protocol.message import MessageExt, SysFlag
from connector.protocol.properties import PropertyKeys, encode_properties
from connector.protocol.record import encode_record
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.rest import BatchCommitRequest
from connector.server.remoting import Channel, Ext

__all__ = ["TransactionHandlers", "check_request", "parse_batch_commit"]

log = logging.getLogger(__name__)
_DECISIONS = {SysFlag.TRANSACTION_COMMIT: COMMIT, SysFlag.TRANSACTION_ROLLBACK: ROLLBACK}
_NOT_REPLICATED = {
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
ASK_TIMEOUT_S = 5.0  # the check thread's wait for the event loop to send a check-back


class TransactionHandlers:
    def __init__(self, ctrl: BrokerController) -> None:
        self.ctrl = ctrl

    async def end(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ctrl = self.ctrl
        ext = Ext(request.ext)
        kind = ext.number("commitOrRollback", 0)
        if kind == 0:
            return request.response()  # "unknown": the check-back asks again later
        decision = _DECISIONS.get(kind)
        if decision is None:
            raise MessageIllegalError(f"commitOrRollback {kind} is not 8 (commit) or 12 (rollback)")
        ctrl.send.check_master()
        result = await asyncio.to_thread(
            ctrl.transactions.end,
            ext.text("producerGroup", ""),
            ext.number("tranStateTableOffset", -1),
            ext.number("commitLogOffset"),
            decision,
        )
        done = "committed" if result.decision == COMMIT else "rolled back"
        remark = f"already {done}" if result.already else done
        return self._replicated(request, await ctrl.replicated(), remark=remark)

    async def commit_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """COMMIT_TRANSACTION_BATCH (pymq's 40037): body JSON ``{"producer_group",
        "writer", "batch", "halves": [[half queue offset, CommitLog offset], ...],
        "manifest": any}``, ext ``defer`` (only decide; append on the next call);
        answer body ``{"already", "halves", "messages", "manifest"}``."""
        ctrl = self.ctrl
        ctrl.send.check_master()
        req = parse_batch_commit(bytes(request.body))
        result = await asyncio.to_thread(
            ctrl.transactions.commit_batch, *req, defer=Ext(request.ext).flag("defer")
        )
        body = {"already": result.already, "halves": result.halves,
                "messages": result.messages, "manifest": result.manifest}  # fmt: skip
        return self._replicated(request, await ctrl.replicated(), body=orjson.dumps(body))

    @staticmethod
    def _replicated(
        request: RemotingCommand, status: PutMessageStatus, *, remark: str = "", body: bytes = b""
    ) -> RemotingCommand:
        """The answer: SUCCESS, or (SYNC_MASTER) the slave status of a decision taken here
        but not known to be on the slaves: a client asks again (it changes nothing)."""
        code = _NOT_REPLICATED.get(status, ResponseCode.SUCCESS)
        if code != ResponseCode.SUCCESS:
            remark = f"{remark}; {status.value}: not known to be on the slaves yet"
        return request.response(code, remark=remark or None, body=body)

    def ask(self, group: str, half: MessageExt) -> bool:
        """From the check thread: CHECK_TRANSACTION_STATE to a live producer of ``group``
        (sent on the event loop); False if it has none."""
        loop = self.ctrl.loop
        if loop is None or loop.is_closed():
            return False
        fut = asyncio.run_coroutine_threadsafe(self._ask(group, half), loop)
        try:
            return fut.result(ASK_TIMEOUT_S)
        except (TimeoutError, RuntimeError):
            return False

    async def _ask(self, group: str, half: MessageExt) -> bool:
        live = [
            c for c in self.ctrl.clients.producer_conns(group)
            if isinstance(c, Channel) and not c.closed
        ]  # fmt: skip
        if not live:
            return False
        random.choice(live).invoke_oneway(check_request(half, self.ctrl.store.store_host))
        return True


def parse_batch_commit(raw: bytes) -> tuple[str, str, int, list[tuple[int, int]], Any]:
    """A batch commit's JSON body: (group, writer, batch, halves, manifest)."""
    try:
        req = BatchCommitRequest.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise MessageIllegalError(f"batch commit: {where}: {first['msg']}") from None
    halves = [(q, p) for q, p in req.halves]
    return req.producer_group, req.writer, req.batch, halves, req.manifest


def check_request(half: MessageExt, store_host: bytes) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE for ``half`` (given with its real topic and queue)."""
    uniq = half.properties.get(PropertyKeys.UNIQ_KEY, "")
    body = encode_record(
        topic=half.topic.encode(),
        body=half.body,
        properties=encode_properties(half.properties),
        queue_id=half.queue_id,
        queue_offset=half.queue_offset,
        physical_offset=half.commit_log_offset,
        flag=half.flag,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=born_host_of(half),
        store_timestamp=half.store_timestamp,
        store_host=store_host,
        reconsume_times=half.reconsume_times,
    )
    ext = {
        "tranStateTableOffset": str(half.queue_offset),
        "commitLogOffset": str(half.commit_log_offset),
        "msgId": uniq,
        "transactionId": uniq,
        "offsetMsgId": half.offset_msg_id,
    }
    return RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, ext, body)
