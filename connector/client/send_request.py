"""A send's request and its answer: SEND_BATCH_MESSAGE (one message is a batch of one;
the broker applies the single-message rules to it) with RocketMQ's
SendMessageRequestHeaderV2 fields, and the answer as a ``SendResult``.

pymq's broker is asked (``offsetRuns``) where a batch landed instead of every
offset msgId; the ids are made from those runs when first read. A server that
answers as RocketMQ does (every msgId) is read too.
"""

from __future__ import annotations

import time

from connector.client.encoding import Encoded
from connector.client.results import SendResult
from connector.client.rpc import error_for_response
from connector.protocol.message import MessageQueue, SysFlag
from connector.protocol.msgid import offset_msg_ids
from connector.protocol.names import DEFAULT_TOPIC
from connector.protocol.remoting import SEND_V2_LETTERS as V2
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.status import SendStatus
from connector.protocol.wire import batch_offsets

__all__ = ["SendRequests"]

# answers that mean "stored" (the producer's SendStatus)
_STORED: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_MAX_CACHED_HEADERS = 65_536


class SendRequests:
    """Requests of one producer group. Thread-safe (the header cache only grows)."""

    def __init__(self, group: str, default_topic_queue_nums: int) -> None:
        self.group = group
        self.default_topic_queue_nums = default_topic_queue_nums
        self._headers: dict[tuple[str, int, object], dict[str, str]] = {}

    def command(self, mq: MessageQueue, encoded: Encoded) -> RemotingCommand:
        """SEND_BATCH_MESSAGE of ``encoded`` to ``mq``."""
        compression = encoded.compression
        key = (mq.topic, mq.queue_id, compression)
        ext = self._headers.get(key)
        if ext is None:  # the fields that depend on the queue only, made once per queue
            sys_flag = SysFlag.COMPRESSED | compression.flag if compression else 0
            ext = {
                V2["producerGroup"]: self.group,
                V2["topic"]: mq.topic,
                V2["defaultTopic"]: DEFAULT_TOPIC,
                V2["defaultTopicQueueNums"]: str(self.default_topic_queue_nums),
                V2["queueId"]: str(mq.queue_id),
                V2["sysFlag"]: str(sys_flag),
                V2["flag"]: "0",
                V2["properties"]: "",
                V2["reconsumeTimes"]: "0",
                V2["unitMode"]: "false",
                V2["batch"]: "true",
                V2["brokerName"]: mq.broker_name,
                "offsetRuns": "true",  # pymq's broker: where a batch landed, not every msgId
            }
            if len(self._headers) < _MAX_CACHED_HEADERS:
                self._headers[key] = ext
        ext = dict(ext)
        born = encoded.born
        ext[V2["bornTimestamp"]] = str(int(time.time() * 1000) if born is None else born)
        if encoded.half is not None:  # one half holding the batch, for a batch commit
            ext[V2["sysFlag"]] = str(SysFlag.TRANSACTION_PREPARED)
            ext["txWriter"], ext["txBatch"] = encoded.half[0], str(encoded.half[1])
            del ext["offsetRuns"]
        return RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, ext, encoded.data)

    def result(
        self, addr: str, mq: MessageQueue, encoded: Encoded, resp: RemotingCommand
    ) -> SendResult:
        """The answer to a send as a ``SendResult``, or the error it carries."""
        status = _STORED.get(resp.code)
        if status is None:
            raise error_for_response(addr, resp)
        r = resp.ext
        queue = MessageQueue(mq.topic, mq.broker_name, int(r["queueId"]))
        queue_offset = int(r["queueOffset"])
        if encoded.half is not None:  # the half's place: for the batch commit
            return SendResult(status, encoded.msg_ids[0], r["msgId"], queue, queue_offset)
        sizes = encoded.sizes
        if "offsetRuns" not in r:  # one message (or a server that answers as RocketMQ)
            given = tuple(r["msgId"].split(","))
            ids = tuple(encoded.msg_ids)
            return SendResult(status, ids[0], given[0], queue, queue_offset, ids, given)
        host = r["storeHost"]
        runs = [
            [int(i), int(o)] for i, _, o in (p.partition(":") for p in r["offsetRuns"].split(";"))
        ]

        # a batch: its offset msgIds (~0.3 us each) are made when first read
        def offset_ids() -> tuple[str, ...]:
            return offset_msg_ids(host, batch_offsets(runs, sizes))

        return SendResult.of_batch(status, queue, queue_offset, encoded.msg_ids, offset_ids)
