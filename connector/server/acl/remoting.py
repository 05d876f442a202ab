"""What each remoting request needs (RocketMQ ACL 1.0's table, and pymq's codes).

- send (10, 310, 320): PUB on the topic; a send to ``%RETRY%group`` needs SUB
  on the group instead (a consumer sending a message back);
- send back (36), unregister (35), consumer list (38), queue locks (41, 42, the
  group in the body): SUB on the group;
- pull (11, 361), consumer offsets (14, 15): SUB on the topic and the group;
- heartbeat (34): SUB on every group and topic its consumers subscribe;
- queue offsets, query by key or time (12, 29-32): SUB on the topic;
- topic and subscription admin, broker config, broker registration and KV
  writes on the NameServer: an admin account;
- everything else (routes, cluster info, a message by id, transactions): any
  known account.
"""

from __future__ import annotations

import orjson

from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.server.acl.model import ADMIN, ANYONE, GROUP, PUB, SUB, TOPIC, Needs

__all__ = ["remoting_needs"]

RETRY_PREFIX = "%RETRY%"
C = RequestCode
_ADMIN_CODES = frozenset({
    C.UPDATE_AND_CREATE_TOPIC, C.DELETE_TOPIC_IN_BROKER, C.UPDATE_BROKER_CONFIG,
    C.GET_BROKER_CONFIG, C.DELETE_TOPIC_IN_NAMESRV, C.PUT_KV_CONFIG, C.DELETE_KV_CONFIG,
    C.REGISTER_BROKER, C.UNREGISTER_BROKER,
    200,  # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    207,  # DELETE_SUBSCRIPTIONGROUP
    222,  # INVOKE_BROKER_TO_RESET_OFFSET
})  # fmt: skip
_SEND_CODES = frozenset({C.SEND_MESSAGE, C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE})
_SENDS: dict[str, Needs] = {}  # by topic: a send's needs, made once
_TOPIC_SUB_CODES = frozenset({
    C.QUERY_MESSAGE, C.SEARCH_OFFSET_BY_TIMESTAMP, C.GET_MAX_OFFSET, C.GET_MIN_OFFSET,
    C.GET_EARLIEST_MSG_STORETIME,
})  # fmt: skip


def remoting_needs(request: RemotingCommand) -> Needs:
    code, ext = request.code, request.ext
    if code in _SEND_CODES:  # V2 and batch headers name the topic "b"
        topic = ext.get("topic") if code == C.SEND_MESSAGE else ext.get("b") or ext.get("topic")
        topic = topic or "?"
        needs = _SENDS.get(topic)
        if needs is None:
            if topic.startswith(RETRY_PREFIX):
                needs = Needs.of((GROUP, topic[len(RETRY_PREFIX) :], SUB))
            else:
                needs = Needs(False, (((TOPIC, topic), PUB),))
            if len(_SENDS) > 10_000:
                _SENDS.clear()
            _SENDS[topic] = needs
        return needs
    if code in (C.PULL_MESSAGE, C.LITE_PULL_MESSAGE, C.QUERY_CONSUMER_OFFSET,
                C.UPDATE_CONSUMER_OFFSET):  # fmt: skip
        return Needs.of((TOPIC, ext.get("topic") or "?", SUB),
                        (GROUP, ext.get("consumerGroup") or "?", SUB))  # fmt: skip
    if code == C.CONSUMER_SEND_MSG_BACK:
        return Needs.of((GROUP, ext.get("group") or "?", SUB))
    if code in (C.UNREGISTER_CLIENT, C.GET_CONSUMER_LIST_BY_GROUP):
        return Needs.of((GROUP, ext.get("consumerGroup"), SUB))
    if code == C.HEART_BEAT:
        return _heartbeat_needs(request.body)
    if code in (C.LOCK_BATCH_MQ, C.UNLOCK_BATCH_MQ):
        return _lock_needs(request.body)
    if code in _TOPIC_SUB_CODES:
        return Needs.of((TOPIC, ext.get("topic") or "?", SUB))
    if code in _ADMIN_CODES:
        return ADMIN
    return ANYONE


def _heartbeat_needs(body: bytes | memoryview) -> Needs:
    """SUB on each consumer group of the heartbeat and each topic it subscribes (a body
    that does not parse needs nothing here: the handler refuses it)."""
    try:
        data = orjson.loads(body) if len(body) else {}
    except orjson.JSONDecodeError:
        return ANYONE
    pairs: list[tuple[str, str | None, int]] = []
    consumers = data.get("consumerDataSet") if isinstance(data, dict) else None
    for consumer in consumers if isinstance(consumers, list) else []:
        if not isinstance(consumer, dict):
            continue
        pairs.append((GROUP, str(consumer.get("groupName") or ""), SUB))
        subs = consumer.get("subscriptionDataSet")
        for sub in subs if isinstance(subs, list) else []:
            topic = str(sub.get("topic") or "") if isinstance(sub, dict) else ""
            if topic.startswith(RETRY_PREFIX):
                continue  # a consumer's own retry topic: its group's SUB covers it
            pairs.append((TOPIC, topic, SUB))
    return Needs.of(*pairs)


def _lock_needs(body: bytes | memoryview) -> Needs:
    """SUB on the group whose queues are locked (a body that does not parse needs the
    group "?": refused unless every group may be read)."""
    try:
        data = orjson.loads(body) if len(body) else {}
    except orjson.JSONDecodeError:
        data = {}
    group = data.get("consumerGroup") if isinstance(data, dict) else None
    return Needs.of((GROUP, str(group or "?"), SUB))
