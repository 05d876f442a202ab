"""A push consumer's calls to its group's brokers (what RocketMQ's MQClientInstance
does for it): the routes of the subscribed topics, heartbeats, leaving the group,
the group's client ids, and the orderly queue locks. Failures are logged and
left to the next round of the service loop, never raised."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import orjson

from connector.client.namesrv import NameServerClient
from connector.client.rpc import Rpc
from connector.errors import PyMQError
from connector.protocol.message import MessageQueue
from connector.protocol.remoting import RequestCode
from connector.protocol.route import TopicRouteData

__all__ = ["GroupBrokers"]

log = logging.getLogger(__name__)


class GroupBrokers:
    def __init__(
        self, rpc: Rpc, namesrv: NameServerClient, *, group: str, client_id: str, timeout_ms: int
    ) -> None:
        self.rpc = rpc
        self.namesrv = namesrv
        self.group = group
        self.client_id = client_id
        self.timeout_ms = timeout_ms
        self.routes: dict[str, TopicRouteData] = {}

    def refresh_route(self, topic: str) -> TopicRouteData | None:
        try:
            route = self.namesrv.topic_route(topic)
        except PyMQError as exc:
            log.warning("the route of %s could not be fetched: %s", topic, exc)
            return self.routes.get(topic)
        if route is not None:
            self.routes[topic] = route
        return route

    def found_missing_routes(self, topics: Iterable[str]) -> bool:
        """Ask again for the routes not known yet; True if one came."""
        missing = [t for t in topics if t not in self.routes]
        return any(self.refresh_route(topic) is not None for topic in missing)

    def master(self, broker_name: str) -> str | None:
        for route in list(self.routes.values()):
            for b in route.brokers:
                if b.broker_name == broker_name and b.master_addr():
                    return b.master_addr()
        return None

    def masters(self) -> set[str]:
        return {
            addr
            for route in list(self.routes.values())
            for b in route.brokers
            if (addr := b.master_addr())
        }

    def heartbeat_all(self, body: bytes) -> None:
        """HEART_BEAT with ``body`` to every master of the routes known."""
        for addr in self.masters():
            try:
                self.rpc.call(
                    addr, RequestCode.HEART_BEAT, None, body, timeout_s=self.timeout_ms / 1000
                )
            except PyMQError as exc:
                log.warning("heartbeat to %s failed: %s", addr, exc)

    def unregister(self) -> None:
        ext = {"clientID": self.client_id, "consumerGroup": self.group, "producerGroup": ""}
        for addr in self.masters():
            try:
                self.rpc.call(
                    addr, RequestCode.UNREGISTER_CLIENT, ext, timeout_s=self.timeout_ms / 1000
                )
            except PyMQError as exc:
                log.debug("unregistering from %s failed: %s", addr, exc)

    def client_ids(self, topic: str) -> list[str]:
        route = self.routes.get(topic)
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
