"""Send requests over remoting: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310),
SEND_BATCH_MESSAGE (320) and CONSUMER_SEND_MSG_BACK (36).

The header says single or batch (``batch``), not the request code. A single
message's body is the message body and its properties travel in the header;
a batch's body is RocketMQ's batch encoding (magic and body CRC may be zero,
as Java's ``MessageBatch`` leaves them). Both go through the send processor,
as REST sends do. The answer carries the offset msgId (a batch's: every
message's, comma-separated, as RocketMQ answers; pymq's client asks for
``offsetRuns`` instead, which costs the broker nothing per message), the
queue and the queue offset. SEND_OK, FLUSH_DISK_TIMEOUT and the slave codes
all mean "stored".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import numpy as np

from broker.controller import BrokerController
from broker.processors.send import SendOutcome
from broker.store.results import PutMessageResult, PutMessageStatus
from connector.errors import MessageIllegalError, PyMQError
from connector.protocol.compression import CompressionType
from connector.protocol.message import SysFlag
from connector.protocol.msgid import encode_host, encode_offset_msg_id, offset_msg_ids
from connector.protocol.properties import decode_properties
from connector.protocol.remoting import RemotingCommand, ResponseCode, long_send_fields
from connector.protocol.rest import SendBackRequest
from connector.server.acl import PendingCheck
from connector.server.remoting import Channel, Ext

__all__ = ["SendHandlers", "born_host"]

_LOCALHOST = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
_TRANSACTION_TYPES = 0xC  # SysFlag bits 2-3: prepared (4), commit (8), rollback (12)

# a stored message's answer code: SUCCESS for PUT_OK, else the store's own word
_SEND_CODES = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}


def born_host(peer: tuple[str, int]) -> bytes:
    """A connection's peer as a record's BORNHOST (IPv4 + port); loopback for others."""
    try:
        return encode_host(*peer)
    except (ValueError, TypeError, PyMQError):  # IPv6 peers: the v1 record layout holds IPv4 only
        return _LOCALHOST


class SendHandlers:
    def __init__(self, ctrl: BrokerController) -> None:
        self.ctrl = ctrl
        self._hosts: dict[Channel, bytes] = {}

    def _host(self, channel: Channel) -> bytes:
        host = self._hosts.get(channel)
        if host is None:
            if len(self._hosts) > 4096:
                self._hosts = {c: h for c, h in self._hosts.items() if not c.closed}
            host = self._hosts[channel] = born_host(channel.peer)
        return host

    def send(
        self, channel: Channel, request: RemotingCommand
    ) -> RemotingCommand | asyncio.Future[RemotingCommand]:
        ctrl = self.ctrl
        verify = channel.verify

        refused: list[PyMQError] = []  # by the limit: answered, not counted as a failed send

        def admitted() -> None:
            """The request is signed (when ACL asks) and within the send limit."""
            verify()
            if ctrl.send_limiter is not None:
                # the account only when ACL checked it: else any name would do, one per request
                signed = ctrl.acl is not None and request.ext.get("AccessKey")
                try:
                    ctrl.admit_send(signed or channel.peer[0])
                except PyMQError as exc:
                    refused.append(exc)
                    raise

        fields = long_send_fields(request.ext) if request.code != 10 else request.ext
        ext = Ext(fields)
        sys_flag = ext.number("sysFlag", 0)
        batch = ext.flag("batch")
        # a plain batch whose signature is being hashed is scanned meanwhile, then admitted;
        # any other request is admitted first (the limit before the batch is decoded)
        scan_first = (
            isinstance(verify, PendingCheck) and batch
            and not sys_flag & SysFlag.TRANSACTION_PREPARED
        )  # fmt: skip
        if not scan_first:
            admitted()
        topic = ext.text("topic")
        queue_id = ext.number("queueId", -1)
        born = ext.number("bornTimestamp", 0) or int(time.time() * 1000)
        api = "batch" if batch else "single"
        t0 = time.perf_counter()
        try:
            if sys_flag & _TRANSACTION_TYPES and (
                sys_flag & _TRANSACTION_TYPES != SysFlag.TRANSACTION_PREPARED
                or (batch and sys_flag & SysFlag.COMPRESSED)
            ):
                raise MessageIllegalError(
                    "a transactional send is sent prepared (a half), a batch uncompressed; "
                    "commit and roll back with END_TRANSACTION or a batch commit"
                )
            body = request.body
            if batch and sys_flag & SysFlag.TRANSACTION_PREPARED:  # pymq: a batch half
                outcome = ctrl.send.put_batch_half(
                    topic, queue_id if queue_id >= 0 else None, bytes(body),
                    group=ext.text("producerGroup", ""), writer=ext.text("txWriter", ""),
                    batch_id=ext.number("txBatch", -1), born_timestamp=born,
                    born_host=self._host(channel),
                )  # fmt: skip
            elif batch:
                compressed = sys_flag & SysFlag.COMPRESSED
                outcome = ctrl.send.put_batch(
                    topic, queue_id if queue_id >= 0 else None, bytes(body),
                    born_timestamp=born, born_host=self._host(channel),
                    compression=CompressionType.of_sys_flag(sys_flag) if compressed else None,
                    before_store=admitted if scan_first else None,
                )  # fmt: skip
            else:
                outcome = self._single(channel, ext, topic, queue_id, sys_flag, born, body)
        except PyMQError as exc:
            verify()  # a refused request is answered and counted as refused, nothing else
            if not refused:
                ctrl.metrics.send_failed(api, exc.code)
            raise
        runs = ext.flag("offsetRuns")

        def answer(put: PutMessageResult) -> RemotingCommand:
            ctrl.metrics.sent(api, put.status.value, outcome.count, time.perf_counter() - t0)
            return self._answer(request, outcome, put, runs=runs)

        def failed(exc: PyMQError) -> None:
            ctrl.metrics.send_failed(api, exc.code)

        return self._when_stored(outcome, answer, failed)

    def _single(
        self,
        channel: Channel,
        ext: Ext,
        topic: str,
        queue_id: int,
        sys_flag: int,
        born: int,
        body: bytes | memoryview,
    ) -> SendOutcome:
        send = self.ctrl.send
        body = bytes(body)
        send.check_body(body)
        stored_flag = 0
        if sys_flag & SysFlag.COMPRESSED:
            stored_flag = SysFlag.COMPRESSED | CompressionType.of_sys_flag(sys_flag).flag
            send.check_inflates(body, stored_flag)
        raw = ext.text("properties", "").encode()
        try:
            props = decode_properties(raw)
        except (ValueError, UnicodeDecodeError):
            raise MessageIllegalError(
                "the message's properties are not name\\x01value\\x02 pairs"
            ) from None
        routed = send.route_single(
            topic,
            queue_id if queue_id >= 0 else None,
            body,
            props,
            encoded=raw,
            flag=ext.number("flag", 0),
            sys_flag=stored_flag,
            born_timestamp=born,
            born_host=self._host(channel),
            reconsume_times=ext.number("reconsumeTimes", 0),
            half_group=ext.text("producerGroup") if sys_flag & _TRANSACTION_TYPES else None,
        )
        return send.put_single(routed)

    def _answer(
        self, request: RemotingCommand, outcome: SendOutcome, put: PutMessageResult, *, runs: bool
    ) -> RemotingCommand:
        ctrl = self.ctrl
        append = put.append
        assert append is not None
        host = ctrl.store.store_host
        ext = {
            "queueId": str(outcome.queue_id),
            "queueOffset": str(append.queue_offset),
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "false",
        }
        offsets = append.offsets_array
        if offsets is None or len(offsets) <= 1:
            ext["msgId"] = encode_offset_msg_id(host, append.wrote_offset)
        elif runs:
            ext["storeHost"] = host.hex().upper()
            ext["offsetRuns"] = _offset_runs(offsets, ctrl.store.commit_log.segment_size)
        else:
            ext["msgId"] = ",".join(offset_msg_ids(host.hex().upper(), offsets.tolist()))
        if outcome.transaction_id:
            ext["transactionId"] = outcome.transaction_id
        code = _SEND_CODES.get(put.status, ResponseCode.SYSTEM_ERROR)
        remark = None if code == ResponseCode.SUCCESS else put.status.value
        return request.response(code, ext, remark=remark)

    def send_back(
        self, channel: Channel, request: RemotingCommand
    ) -> RemotingCommand | asyncio.Future[RemotingCommand]:
        """CONSUMER_SEND_MSG_BACK: ext offset (CommitLog offset), group, delayLevel,
        originMsgId, originTopic, maxReconsumeTimes."""
        ctrl = self.ctrl
        ext = Ext(request.ext)
        group = ext.text("group")
        offset = ext.number("offset")
        max_times = ext.number("maxReconsumeTimes", -1)
        req = SendBackRequest(
            offset_msg_id=encode_offset_msg_id(ctrl.store.store_host, offset),
            delay_level=ext.number("delayLevel", 0),
            origin_topic=ext.text("originTopic", "") or None,
            max_reconsume_times=max_times if max_times >= 0 else None,
        )
        routed = ctrl.send.send_back(group, req, born_host=self._host(channel))
        outcome = ctrl.send.put_single(routed)

        return self._when_stored(outcome, lambda _: request.response(ResponseCode.SUCCESS))

    def _when_stored(
        self,
        outcome: SendOutcome,
        answer: Callable[[PutMessageResult], RemotingCommand],
        failed: Callable[[PyMQError], None] | None = None,
    ) -> RemotingCommand | asyncio.Future[RemotingCommand]:
        """``answer(result)`` now, or (a SYNC_FLUSH append waiting for its group commit)
        a future of it, settled from a callback: no task per send."""
        pending = outcome.pending
        if pending is None:
            return answer(outcome.put)
        result: asyncio.Future[RemotingCommand] = pending.get_loop().create_future()
        topics = self.ctrl.topics

        def settle(f: asyncio.Future[PutMessageResult]) -> None:
            if f.cancelled():
                result.cancel()
                return
            try:
                result.set_result(answer(outcome.settle(f.result(), topics)))
            except PyMQError as exc:
                if failed is not None:
                    failed(exc)
                result.set_exception(exc)

        pending.add_done_callback(settle)
        return result

    def forget(self, channel: Channel) -> None:
        self._hosts.pop(channel, None)


def _offset_runs(offsets: np.ndarray, segment_size: int) -> str:
    """``index:offset`` where a batch's records start and wherever they jump to a new
    segment (a batch is contiguous but for the BLANK at a segment's end)."""
    first = int(offsets[0])
    if first // segment_size == int(offsets[-1]) // segment_size:
        return f"0:{first}"  # one segment (offsets ascend): most batches, no array work
    runs = [f"0:{first}"]
    segments = offsets // segment_size
    for i in (np.flatnonzero(segments[1:] != segments[:-1]) + 1).tolist():
        runs.append(f"{i}:{int(offsets[i])}")
    return ";".join(runs)
