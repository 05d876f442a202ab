"""Client bookkeeping over remoting: HEART_BEAT (34), UNREGISTER_CLIENT (35),
GET_CONSUMER_LIST_BY_GROUP (38), and NOTIFY_CONSUMER_IDS_CHANGED (40) sent to
a group's members whenever its membership changes, so they rebalance;
orderly consumers' queue locks, LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42),
body ``{consumerGroup, clientId, onlyThisBroker, mqSet: [{topic, brokerName,
queueId}]}``, answered ``{lockOKMQSet: [...]}`` (``broker.queue_locks``).

A heartbeat body is RocketMQ's HeartbeatData JSON: ``clientID``,
``producerDataSet: [{groupName}]``, ``consumerDataSet: [{groupName,
consumeType, messageModel, consumeFromWhere, subscriptionDataSet: [{topic,
subString}]}]``; the C++ client sends the enums as numbers.

A consumer group's heartbeat also creates its retry topic ``%RETRY%group``
(one queue, as RocketMQ's broker does on HEART_BEAT), and the NameServers
learn it at once: push consumers (Apache's C++ and Java clients, ali-ons)
subscribe to it as they start and look up its route, which before it
existed failed ("no route info ... %RETRY%group") until the first
message was sent back, and retried messages then waited for the client's
next route refresh (30 s) to be consumed.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson

from broker.client_manager import ClientManager
from broker.queue_locks import QueueKey, QueueLocks
from broker.topic_manager import TopicManager
from connector.errors import (
    ClientError,
    NotFoundError,
    RemotingTimeoutError,
    ServiceNotAvailableError,
)
from connector.protocol.names import validate_group
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.server.remoting import Channel, Ext

__all__ = ["ClientHandlers"]

log = logging.getLogger(__name__)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


class ClientHandlers:
    def __init__(
        self, clients: ClientManager, topics: TopicManager, locks: QueueLocks | None = None
    ) -> None:
        self.clients = clients
        self.topics = topics
        self.locks = locks or QueueLocks()

    def heartbeat(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            data = orjson.loads(request.body) if request.body else {}
        except orjson.JSONDecodeError:
            raise ClientError("the heartbeat body is not JSON") from None
        if not isinstance(data, dict):
            raise ClientError("the heartbeat body is not a JSON object")
        client_id = _text(data.get("clientID"))
        if not client_id:
            raise ClientError("the heartbeat has no clientID")
        addr = f"{channel.peer[0]}:{channel.peer[1]}" if channel.peer[0] else ""
        language, version = request.language, request.version
        for producer in data.get("producerDataSet") or []:
            if isinstance(producer, dict) and producer.get("groupName"):
                self.clients.producer_heartbeat(
                    _text(producer["groupName"]), client_id, channel,
                    addr=addr, language=language, version=version,
                )  # fmt: skip
        for consumer in data.get("consumerDataSet") or []:
            if not isinstance(consumer, dict) or not consumer.get("groupName"):
                continue
            group = validate_group(_text(consumer["groupName"]))
            self.topics.ensure_retry_topic(group)
            subs = {
                _text(s.get("topic")): _text(s.get("subString")) or "*"
                for s in consumer.get("subscriptionDataSet") or []
                if isinstance(s, dict) and s.get("topic")
            }
            changed = self.clients.consumer_heartbeat(
                group,
                client_id,
                channel,
                subs,
                consume_type=_text(consumer.get("consumeType")),
                message_model=_text(consumer.get("messageModel")),
                consume_from_where=_text(consumer.get("consumeFromWhere")),
                addr=addr,
                language=language,
                version=version,
            )
            if changed:
                log.info("consumer %s joined group %s", client_id, group)
                self.notify(group)
        return request.response()

    def unregister(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = Ext(request.ext)
        changed = self.clients.unregister(
            ext.text("clientID"),
            producer_group=ext.text("producerGroup", ""),
            consumer_group=ext.text("consumerGroup", ""),
        )
        for group in changed:
            self.notify(group)
        return request.response()

    def consumer_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = Ext(request.ext).text("consumerGroup")
        ids = self.clients.consumer_ids(group)
        if not ids:
            return request.response(1, remark=f"no consumer of group {group} is online")
        return request.response(body=orjson.dumps({"consumerIdList": ids}))

    def lock_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = _lock_body(request.body)
        held = self.locks.try_lock(group, client_id, queues)
        mqs = [{"topic": t, "brokerName": b, "queueId": q} for t, b, q in held]
        return request.response(body=orjson.dumps({"lockOKMQSet": mqs}))

    def unlock_batch(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = _lock_body(request.body)
        self.locks.unlock(group, client_id, queues)
        return request.response()

    def connection_closed(self, channel: Channel) -> None:
        for group in self.clients.connection_closed(channel):
            self.notify(group)

    def scan_expired(self) -> None:
        for group in self.clients.scan_expired():
            log.info("a consumer of group %s expired", group)
            self.notify(group)

    def reset_offset(
        self, group: str, topic: str, broker_name: str, queue_id: int, offset: int
    ) -> None:
        """Tell the group's live consumers to consume a queue from ``offset``
        (RESET_CONSUMER_CLIENT_OFFSET, oneway; body ``{"offsetTable": {"topic@broker@queueId":
        offset}}``; the member that owns the queue acts on it)."""
        body = orjson.dumps({"offsetTable": {f"{topic}@{broker_name}@{queue_id}": offset}})
        ext = {"topic": topic, "group": group, "timestamp": "0", "isForce": "true"}
        for conn in self.clients.consumer_conns(group):
            if isinstance(conn, Channel) and not conn.closed:
                conn.invoke_oneway(
                    RemotingCommand(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, dict(ext), body)
                )

    async def call_consumer(
        self,
        group: str,
        client_id: str,
        code: int,
        ext: dict[str, str],
        body: bytes = b"",
        timeout_s: float = 5.0,
    ) -> bytes:
        """Send a request to ``client_id`` of ``group`` on its connection here and await
        its answer's body (RocketMQ's Broker2Client.callClient: GET_CONSUMER_RUNNING_INFO,
        CONSUME_MESSAGE_DIRECTLY). NotFoundError if the client is not connected here,
        RemotingTimeoutError if it does not answer, ServiceNotAvailableError if it
        answers with an error."""
        info = self.clients.consumer_group(group)
        live = info.clients.get(client_id) if info is not None else None
        conn = live.conn if live is not None else None
        if not isinstance(conn, Channel) or conn.closed:
            raise NotFoundError(f"consumer {client_id} of group {group} is not connected here")
        try:
            resp = await conn.invoke(RemotingCommand(code, dict(ext), body), timeout_s)
        except TimeoutError:
            raise RemotingTimeoutError(
                f"consumer {client_id} did not answer within {timeout_s:g} s"
            ) from None
        if resp.code != 0:
            raise ServiceNotAvailableError(
                f"consumer {client_id} answered code {resp.code}: {resp.remark}"
            )
        return bytes(resp.body)

    def notify(self, group: str) -> None:
        """Tell every member of ``group`` that it changed (oneway, as RocketMQ)."""
        for conn in self.clients.consumer_conns(group):
            if isinstance(conn, Channel) and not conn.closed:
                conn.invoke_oneway(
                    RemotingCommand(
                        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}
                    )
                )


def _lock_body(body: bytes | memoryview) -> tuple[str, str, list[QueueKey]]:
    """A LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body: group, client id, queues."""
    try:
        data = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        raise ClientError("the lock request body is not JSON") from None
    if not isinstance(data, dict):
        raise ClientError("the lock request body is not a JSON object")
    group = validate_group(_text(data.get("consumerGroup")))
    client_id = _text(data.get("clientId"))
    if not client_id:
        raise ClientError("the lock request has no clientId")
    queues: list[QueueKey] = []
    for mq in data.get("mqSet") or []:
        if not isinstance(mq, dict):
            raise ClientError("mqSet holds something that is not a queue")
        try:
            queues.append((_text(mq["topic"]), _text(mq["brokerName"]), int(mq["queueId"])))
        except (KeyError, TypeError, ValueError):
            raise ClientError("a queue of mqSet lacks topic, brokerName or queueId") from None
    return group, client_id, queues
