"""A push consumer's calls to its group's brokers: the routes of the subscribed
topics (the client instance's), the group's client ids, and the orderly queue
locks. Failures are logged and left to the next round of the service loop,
never raised. Heartbeats and leaving the group are the client instance's
(``connector.client.instance``)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import orjson

from connector.client.instance import ClientInstance
from connector.errors import PyMQError
from connector.protocol.message import MessageQueue
from connector.protocol.remoting import RequestCode
from connector.protocol.route import TopicRouteData

__all__ = ["GroupBrokers"]

log = logging.getLogger(__name__)


class GroupBrokers:
    def __init__(self, instance: ClientInstance, *, group: str, timeout_ms: int) -> None:
        self.instance = instance
        self.rpc = instance.rpc
        self.group = group
        self.timeout_ms = timeout_ms

    @property
    def client_id(self) -> str:
        return self.instance.client_id

    def refresh_route(self, topic: str) -> TopicRouteData | None:
        try:
            return self.instance.fetch_route(topic, watch=True)
        except PyMQError as exc:
            log.warning("the route of %s could not be fetched: %s", topic, exc)
            return self.instance.route(topic)

    def found_missing_routes(self, topics: Iterable[str]) -> bool:
        """Ask again for the routes not known yet; True if one came."""
        missing = [t for t in topics if self.instance.route(t) is None]
        return any(self.refresh_route(topic) is not None for topic in missing)

    def master(self, broker_name: str) -> str | None:
        return self.instance.broker_addr(broker_name)

    def client_ids(self, topic: str) -> list[str]:
        route = self.instance.route(topic)
        names = sorted({b.broker_name for b in route.brokers}) if route else []
        for name in names:
            addr = self.master(name)
            if addr is None:
                continue
            try:
                raw = self.rpc.call_json(
                    addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                    {"consumerGroup": self.group}, timeout_s=self.timeout_ms / 1000,
                )  # fmt: skip
            except PyMQError as exc:
                log.debug("the consumer list of %s from %s failed: %s", self.group, addr, exc)
                continue
            if isinstance(raw, dict):
                return [str(c) for c in raw.get("consumerIdList") or []]
        return []

    # -- rebalance ---------------------------------------------------------------------
    def lock_call(self, code: int, mqs: Sequence[MessageQueue]) -> dict[str, set[MessageQueue]]:
        """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ per broker; the queues each answered as locked."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        out: dict[str, set[MessageQueue]] = {}
        for name, group in by_broker.items():
            addr = self.master(name)
            if addr is None:
                continue
            body = orjson.dumps({
                "consumerGroup": self.group, "clientId": self.client_id, "onlyThisBroker": True,
                "mqSet": [
                    {"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id}
                    for q in group
                ],
            })  # fmt: skip
            try:
                resp = self.rpc.call(addr, code, None, body, timeout_s=self.timeout_ms / 1000)
            except PyMQError as exc:
                log.warning("%s to %s failed: %s", RequestCode(code).name, addr, exc)
                continue
            if code == RequestCode.LOCK_BATCH_MQ:
                raw = orjson.loads(resp.body) if resp.body else {}
                out[name] = {
                    MessageQueue(str(m["topic"]), str(m["brokerName"]), int(m["queueId"]))
                    for m in raw.get("lockOKMQSet") or []
                }
        return out
