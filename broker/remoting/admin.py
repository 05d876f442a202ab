"""Offsets, topics, lookups, connections and settings over remoting (RocketMQ's
AdminBrokerProcessor, ConsumerManageProcessor and QueryMessageProcessor), each a
call into a processor (``broker.processors.admin``, ``.clients``, ``.config``).

GET_CONSUMER_CONNECTION_LIST (203) and GET_PRODUCER_CONNECTION_LIST (204)
answer RocketMQ's ConsumerConnection / ProducerConnection JSON (203:
CONSUMER_NOT_ONLINE when the group has no client); GET_BROKER_CONFIG (26) the
settings as ``key=value`` lines, and UPDATE_BROKER_CONFIG (25) takes such lines.

QUERY_CONSUMER_OFFSET of a group with no committed offset answers 0 while
the queue still starts at 0 (nothing deleted), as Apache's broker does, so
a new push consumer of a never-trimmed queue reads it from the start;
QUERY_NOT_FOUND otherwise.
"""

from __future__ import annotations

import orjson

from broker.controller import BrokerController
from connector.errors import ConsumerOffsetNotExistError, MessageNotExistError
from connector.protocol.remoting import RemotingCommand, ResponseCode
from connector.protocol.rest import ClientConnection, TopicConfigBody
from connector.server.remoting import Channel, Ext

__all__ = ["AdminHandlers"]


def _connection(c: ClientConnection) -> dict[str, object]:
    """RocketMQ's Connection."""
    return {"clientId": c.client_id, "clientAddr": c.addr, "language": c.language,
            "version": c.version}  # fmt: skip


class AdminHandlers:
    def __init__(self, ctrl: BrokerController) -> None:
        self.ctrl = ctrl

    # -- consumer offsets --------------------------------------------------------------

    def query_consumer_offset(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = Ext(request.ext)
        group, topic, queue_id = ext.text("consumerGroup"), ext.text("topic"), ext.number("queueId")
        try:
            offset = self.ctrl.admin.query_offset(group, topic, queue_id).offset
        except ConsumerOffsetNotExistError:
            zero = ext.flag("setZeroIfNotFound", True)  # RocketMQ 5's header field
            if not zero or self.ctrl.store.get_min_offset_in_queue(topic, queue_id) > 0:
                return request.response(
                    ResponseCode.QUERY_NOT_FOUND,
                    remark=f"group {group} has no offset for {topic}:{queue_id}",
                )
            offset = 0
        return request.response(ext={"offset": str(offset)})

    def update_consumer_offset(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = Ext(request.ext)
        self.ctrl.admin.commit_offset(
            ext.text("consumerGroup"),
            ext.text("topic"),
            ext.number("queueId"),
            ext.number("commitOffset"),
        )
        return request.response()

    # -- queue offsets -----------------------------------------------------------------

    def _queue(self, request: RemotingCommand) -> tuple[str, int]:
        ext = Ext(request.ext)
        topic, queue_id = ext.text("topic"), ext.number("queueId")
        self.ctrl.admin.check_queue(topic, queue_id)
        return topic, queue_id

    def max_offset(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        offset = self.ctrl.store.get_max_offset_in_queue(*self._queue(request))
        return request.response(ext={"offset": str(offset)})

    def min_offset(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        offset = self.ctrl.store.get_min_offset_in_queue(*self._queue(request))
        return request.response(ext={"offset": str(offset)})

    def search_offset(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = Ext(request.ext)
        offset = self.ctrl.admin.search_offset(
            ext.text("topic"), ext.number("queueId"), ext.number("timestamp")
        )
        return request.response(ext={"offset": str(offset)})

    def earliest_msg_store_time(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        topic, queue_id = self._queue(request)
        store = self.ctrl.store
        ts = store.get_store_timestamp(
            topic, queue_id, store.get_min_offset_in_queue(topic, queue_id)
        )
        return request.response(ext={"timestamp": str(max(ts, 0))})

    # -- lookups -----------------------------------------------------------------------

    def view_message_by_id(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        """ext ``offset``: the CommitLog offset the client decoded from the msgId; the
        answer's body is the stored record."""
        offset = Ext(request.ext).number("offset")
        record = self.ctrl.store.read_record(offset)
        if record is None:
            raise MessageNotExistError(f"no message at CommitLog offset {offset}")
        return request.response(body=record)

    def query_message(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        """ext topic, key, maxNum, beginTimestamp, endTimestamp: the records whose KEYS
        (or UNIQ_KEY) hold ``key``, newest first."""
        ext = Ext(request.ext)
        topic, key = ext.text("topic"), ext.text("key")
        store = self.ctrl.store
        end = ext.number("endTimestamp", 0) or None
        msgs = store.query_message(
            topic, key, max(1, min(ext.number("maxNum", 32), 1000)),
            ext.number("beginTimestamp", 0), end,
        )  # fmt: skip
        records = [r for m in msgs if (r := store.read_record(m.commit_log_offset)) is not None]
        if not records:
            return request.response(
                ResponseCode.QUERY_NOT_FOUND, remark=f"no message of {topic} with key {key}"
            )
        last = max(m.store_timestamp for m in msgs)
        ext_out = {"indexLastUpdateTimestamp": str(last), "indexLastUpdatePhyoffset": "0"}
        return request.response(ext=ext_out, body=b"".join(records))

    # -- connections and settings --------------------------------------------------------

    def consumer_connections(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        view = self.ctrl.connections.consumer_connections(Ext(request.ext).text("consumerGroup"))
        if not view.connections:
            return request.response(
                ResponseCode.CONSUMER_NOT_ONLINE, remark=f"the consumer group {view.group} "
                "not online",
            )  # fmt: skip
        body = {
            "connectionSet": [_connection(c) for c in view.connections],
            "subscriptionTable": {
                topic: {"topic": topic, "subString": expr, "classFilterMode": False,
                        "tagsSet": [], "codeSet": [], "subVersion": 0}
                for topic, expr in view.subscriptions.items()
            },
            "consumeType": view.consume_type,
            "messageModel": view.message_model,
            "consumeFromWhere": view.consume_from_where,
        }  # fmt: skip
        return request.response(body=orjson.dumps(body))

    def producer_connections(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        view = self.ctrl.connections.producer_connections(Ext(request.ext).text("producerGroup"))
        body = {"connectionSet": [_connection(c) for c in view.connections]}
        return request.response(body=orjson.dumps(body))

    def broker_config(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        lines = [f"{k}={'' if v is None else v}" for k, v in self.ctrl.settings.get().items()]
        return request.response(body="\n".join(lines).encode())

    def update_broker_config(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        changes = {}
        for line in bytes(request.body or b"").decode("utf-8", "replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() and not key.lstrip().startswith("#"):
                changes[key.strip()] = value.strip()
        self.ctrl.settings.update(changes)
        return request.response()

    # -- topics ------------------------------------------------------------------------

    async def create_topic(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = Ext(request.ext)
        body = TopicConfigBody(
            read_queue_nums=ext.number("readQueueNums", 8),
            write_queue_nums=ext.number("writeQueueNums", 8),
            perm=ext.number("perm", 6),
            order=ext.flag("order"),
        )
        await self.ctrl.put_topic(ext.text("topic"), body)
        return request.response()

    async def delete_topic(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        await self.ctrl.delete_topic(Ext(request.ext).text("topic"))
        return request.response()

    def all_topic_config(self, _: Channel, request: RemotingCommand) -> RemotingCommand:
        """RocketMQ's TopicConfigSerializeWrapper: every topic and the data version."""
        topics = self.ctrl.topics
        version = topics.data_version()
        table = {
            c.topic: {
                "topicName": c.topic,
                "readQueueNums": c.read_queue_nums,
                "writeQueueNums": c.write_queue_nums,
                "perm": c.perm,
                "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": c.topic_sys_flag,
                "order": c.order,
            }
            for c in topics.all()
        }
        body = {
            "topicConfigTable": table,
            "dataVersion": {"timestamp": version.timestamp, "counter": version.counter},
        }
        return request.response(body=orjson.dumps(body))
