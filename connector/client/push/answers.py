"""A push consumer's answers to its brokers' calls, as RocketMQ's clients answer them:

- GET_CONSUMER_RUNNING_INFO (307): JSON ``{properties, subscriptionSet, mqTable,
  statusTable}``; ``mqTable`` is keyed ``topic@broker@queueId`` (RocketMQ's
  Java client writes its queue objects as keys, which is not JSON).
- CONSUME_MESSAGE_DIRECTLY (309): the record in the body is given to the
  listener; the answer is ``{order, autoCommit, consumeResult (CR_SUCCESS |
  CR_LATER | CR_THROW_EXCEPTION), remark, spentTimeMills}``.
- RESET_CONSUMER_CLIENT_OFFSET (220): ext topic, group; body ``{"offsetTable":
  ...}`` (keys as RocketMQ writes them, or ``topic@broker@queueId``): each owned
  queue of the topic is dropped, its offset set, and taken again at once.

Each runs on a thread of its own (the listener may take its time).
"""

from __future__ import annotations

import logging
import re
import time
from typing import TYPE_CHECKING, Any

import orjson

from connector.client.connection import RemotingConnection
from connector.client.push.status import ConsumeContext, ConsumeOrderlyStatus, ConsumeStatus
from connector.errors import CorruptRecordError, PyMQError
from connector.protocol.message import MessageQueue
from connector.protocol.record import decode_record
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode

if TYPE_CHECKING:
    from connector.client.push.consumer import PushConsumer

__all__ = ["answer", "parse_offset_table", "running_info"]

log = logging.getLogger(__name__)
# RocketMQ's Java client serialises Map<MessageQueue, Long> with object keys
_JAVA_KEY = re.compile(r'\{"brokerName":"([^"]*)","queueId":(\d+),"topic":"([^"]*)"\}:(-?\d+)')


def answer(consumer: PushConsumer, conn: RemotingConnection, cmd: RemotingCommand) -> None:
    try:
        if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            resp = cmd.response(body=orjson.dumps(running_info(consumer)))
        elif cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
            resp = cmd.response(body=orjson.dumps(consume_directly(consumer, cmd)))
        elif cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
            reset_offsets(consumer, cmd.ext.get("topic", ""), parse_offset_table(cmd.body))
            resp = cmd.response()
        else:
            resp = cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark="not supported")
    except (PyMQError, ValueError) as exc:
        resp = cmd.response(ResponseCode.SYSTEM_ERROR, remark=str(exc))
    if cmd.is_oneway:
        return
    try:
        conn.send_response(resp)
    except PyMQError as exc:
        log.debug("answering code %d failed: %s", cmd.code, exc)


def _key(mq: MessageQueue) -> str:
    return f"{mq.topic}@{mq.broker_name}@{mq.queue_id}"


def running_info(consumer: PushConsumer) -> dict[str, Any]:
    s = consumer.settings
    with consumer._table_lock:
        pqs = dict(consumer.process_queues)
    return {
        "properties": {
            "PROP_CLIENT_VERSION": "pymq",
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            "PROP_CONSUMEORDERLY": str(s.orderly).lower(),
            "PROP_THREADPOOL_CORE_SIZE": str(s.consume_thread_min),
            "PROP_CONSUMER_START_TIMESTAMP": str(consumer.start_timestamp_ms),
            "messageModel": s.message_model,
            "consumeFromWhere": s.consume_from_where,
            "allocate": s.allocate,
            "pullBatchSize": s.pull_batch_text(),
            "consumeMessageBatchMaxSize": str(s.consume_message_batch_max_size),
            "maxReconsumeTimes": str(s.max_reconsume_times),
        },
        "subscriptionSet": [
            {"topic": t, "subString": e, "expressionType": "TAG"}
            for t, e in sorted(consumer.subscriptions.items())
        ],
        "mqTable": {
            _key(mq): {
                "commitOffset": consumer.offsets.get(mq),
                "cachedMsgCount": pq.count,
                "cachedMsgSizeInMiB": pq.bytes >> 20,
                "locked": pq.locked,
                "droped": pq.dropped,  # sic, RocketMQ's name
            }
            for mq, pq in sorted(pqs.items())
        },
        "statusTable": {},
    }


def consume_directly(consumer: PushConsumer, cmd: RemotingCommand) -> dict[str, Any]:
    try:
        msg = decode_record(bytes(cmd.body))
    except CorruptRecordError as exc:
        raise ValueError(f"the message to consume does not decode: {exc.message}") from None
    mq = MessageQueue(msg.topic, cmd.ext.get("brokerName", ""), msg.queue_id)
    started = time.monotonic()
    result, remark = "CR_SUCCESS", ""
    try:
        status = consumer.listener([msg], ConsumeContext(mq, orderly=consumer.settings.orderly))
        if status not in (ConsumeStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS):
            result = "CR_LATER"
    except Exception as exc:  # noqa: BLE001 - the listener's failure is the answer
        result, remark = "CR_THROW_EXCEPTION", repr(exc)
    return {
        "order": consumer.settings.orderly,
        "autoCommit": True,
        "consumeResult": result,
        "remark": remark,
        "spentTimeMills": int((time.monotonic() - started) * 1000),
    }


def parse_offset_table(body: bytes | memoryview) -> dict[MessageQueue, int]:
    """RESET_CONSUMER_CLIENT_OFFSET's table, in RocketMQ's form or pymq's."""
    text = bytes(body).decode("utf-8", "replace")
    out = {
        MessageQueue(topic, broker, int(qid)): int(offset)
        for broker, qid, topic, offset in _JAVA_KEY.findall(text)
    }
    if out:
        return out
    try:
        raw = orjson.loads(text) if text else {}
    except orjson.JSONDecodeError:
        raise ValueError("the offset table is not JSON") from None
    for key, offset in (raw.get("offsetTable") or {}).items():
        topic, broker, qid = str(key).rsplit("@", 2)
        out[MessageQueue(topic, broker, int(qid))] = int(offset)
    return out


def reset_offsets(consumer: PushConsumer, topic: str, table: dict[MessageQueue, int]) -> None:
    """Drop each owned queue of ``table``, set its offset, take it again from there."""
    for mq, offset in sorted(table.items()):
        if topic and mq.topic != topic:
            continue
        with consumer._table_lock:
            pq = consumer.process_queues.get(mq)
        if pq is None:
            continue
        consumer.reset_queue(mq, offset)
