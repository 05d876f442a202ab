"""Which clients are live, per producer and consumer group (RocketMQ's
ConsumerManager / ProducerManager), as pure state.

Clients say they are alive with HEART_BEAT (every 30 s by default) and
leave with UNREGISTER_CLIENT; one silent for ``channel_expired_ms`` (120 s)
is dropped by ``scan_expired``, and so is every client of a connection that
closed. Each call that changes a consumer group's members returns that
group, so the edge can tell the members to rebalance
(NOTIFY_CONSUMER_IDS_CHANGED). ``Conn`` is whatever identifies a connection
(the remoting edge's channel); nothing here does IO. Time comes from an
injectable clock in ms.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

__all__ = ["CHANNEL_EXPIRED_MS", "ClientManager", "ConsumerGroupInfo", "LiveClient"]

CHANNEL_EXPIRED_MS = 120_000
Conn = Hashable


@dataclass(slots=True)
class LiveClient:
    client_id: str
    conn: Conn
    last_seen_ms: int
    addr: str = ""  # the peer's host:port
    language: str = ""  # what its requests say: JAVA, CPP, PYTHON, ...
    version: int = 0  # RocketMQ's version code its requests carry


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    clients: dict[str, LiveClient] = field(default_factory=dict)
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> expression
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""


def _wall_ms() -> int:
    return int(time.time() * 1000)


class ClientManager:
    def __init__(
        self,
        *,
        channel_expired_ms: int = CHANNEL_EXPIRED_MS,
        clock: Callable[[], int] = _wall_ms,
    ) -> None:
        self.channel_expired_ms = channel_expired_ms
        self.clock = clock
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[str, LiveClient]] = {}
        # told (group, client id) of every consumer that leaves its group
        self.on_consumer_dropped: Callable[[str, str], object] | None = None

    # -- heartbeats --------------------------------------------------------------------

    def consumer_heartbeat(
        self,
        group: str,
        client_id: str,
        conn: Conn,
        subscriptions: dict[str, str],
        *,
        consume_type: str = "",
        message_model: str = "",
        consume_from_where: str = "",
        addr: str = "",
        language: str = "",
        version: int = 0,
    ) -> bool:
        """Record a consumer's heartbeat; True if the group's members changed."""
        now = self.clock()
        info = self.consumers.get(group)
        if info is None:
            info = self.consumers[group] = ConsumerGroupInfo(group)
        known = info.clients.get(client_id)
        changed = known is None or known.conn != conn
        info.clients[client_id] = LiveClient(client_id, conn, now, addr, language, version)
        info.subscriptions.update(subscriptions)
        info.consume_type = consume_type or info.consume_type
        info.message_model = message_model or info.message_model
        info.consume_from_where = consume_from_where or info.consume_from_where
        return changed

    def producer_heartbeat(
        self,
        group: str,
        client_id: str,
        conn: Conn,
        *,
        addr: str = "",
        language: str = "",
        version: int = 0,
    ) -> None:
        live = LiveClient(client_id, conn, self.clock(), addr, language, version)
        self.producers.setdefault(group, {})[client_id] = live

    def unregister(
        self, client_id: str, *, producer_group: str = "", consumer_group: str = ""
    ) -> list[str]:
        """A client leaving; the consumer groups whose members changed."""
        if producer_group:
            self._drop_producer(producer_group, client_id)
        changed = []
        if consumer_group and self._drop_consumer(consumer_group, client_id):
            changed.append(consumer_group)
        return changed

    def connection_closed(self, conn: Conn) -> list[str]:
        """Every client of a closed connection leaves; the consumer groups that changed."""
        for group, clients in list(self.producers.items()):
            for cid in [c for c, live in clients.items() if live.conn == conn]:
                self._drop_producer(group, cid)
        changed = []
        for group, info in list(self.consumers.items()):
            gone = [c for c, live in info.clients.items() if live.conn == conn]
            for cid in gone:
                self._drop_consumer(group, cid)
            if gone:
                changed.append(group)
        return changed

    def scan_expired(self) -> list[str]:
        """Drop clients silent for ``channel_expired_ms``; the consumer groups that changed."""
        deadline = self.clock() - self.channel_expired_ms
        for group, clients in list(self.producers.items()):
            for cid in [c for c, live in clients.items() if live.last_seen_ms < deadline]:
                self._drop_producer(group, cid)
        changed = []
        for group, info in list(self.consumers.items()):
            gone = [c for c, live in info.clients.items() if live.last_seen_ms < deadline]
            for cid in gone:
                self._drop_consumer(group, cid)
            if gone:
                changed.append(group)
        return changed

    # -- reads -------------------------------------------------------------------------

    def consumer_ids(self, group: str) -> list[str]:
        info = self.consumers.get(group)
        return sorted(info.clients) if info else []

    def consumer_conns(self, group: str) -> list[Conn]:
        info = self.consumers.get(group)
        return [live.conn for live in info.clients.values()] if info else []

    def consumer_group(self, group: str) -> ConsumerGroupInfo | None:
        return self.consumers.get(group)

    def producer_clients(self, group: str) -> list[LiveClient]:
        return sorted(self.producers.get(group, {}).values(), key=lambda c: c.client_id)

    def producer_conns(self, group: str) -> list[Conn]:
        return [live.conn for live in self.producers.get(group, {}).values()]

    def subscription(self, group: str, topic: str) -> str | None:
        info = self.consumers.get(group)
        return info.subscriptions.get(topic) if info else None

    # -- helpers -----------------------------------------------------------------------

    def _drop_producer(self, group: str, client_id: str) -> None:
        clients = self.producers.get(group)
        if clients is not None and clients.pop(client_id, None) is not None and not clients:
            del self.producers[group]

    def _drop_consumer(self, group: str, client_id: str) -> bool:
        info = self.consumers.get(group)
        if info is None or info.clients.pop(client_id, None) is None:
            return False
        if self.on_consumer_dropped is not None:
            self.on_consumer_dropped(group, client_id)
        if not info.clients:
            del self.consumers[group]
        return True
