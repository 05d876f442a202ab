"""Who is connected: consumer groups, their clients and subscriptions, and producer
groups' clients (RocketMQ's GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST
and consumer stats), as the REST and remoting edges answer them."""

from __future__ import annotations

from broker.client_manager import ClientManager, LiveClient
from broker.processors.admin import AdminProcessor
from connector.protocol.names import validate_group
from connector.protocol.rest import (
    ClientConnection,
    ConsumerConnections,
    ConsumerGroupSummary,
    ProducerConnections,
)

__all__ = ["ClientsProcessor"]


def _connection(live: LiveClient) -> ClientConnection:
    return ClientConnection(
        client_id=live.client_id, addr=live.addr, language=live.language,
        version=live.version, last_heartbeat_ms=live.last_seen_ms,
    )  # fmt: skip


class ClientsProcessor:
    def __init__(self, clients: ClientManager, admin: AdminProcessor) -> None:
        self.clients = clients
        self.admin = admin

    def consumer_connections(self, group: str) -> ConsumerConnections:
        validate_group(group)
        info = self.clients.consumer_group(group)
        if info is None:
            return ConsumerConnections(group=group)
        return ConsumerConnections(
            group=group,
            consume_type=info.consume_type,
            message_model=info.message_model,
            consume_from_where=info.consume_from_where,
            subscriptions=dict(sorted(info.subscriptions.items())),
            connections=[_connection(c) for _, c in sorted(info.clients.items())],
        )

    def producer_connections(self, group: str) -> ProducerConnections:
        validate_group(group)
        return ProducerConnections(
            group=group, connections=[_connection(c) for c in self.clients.producer_clients(group)]
        )

    def consumer_groups(self) -> list[ConsumerGroupSummary]:
        """Every group with a client online or an offset committed here, with its lag."""
        committed: dict[str, set[str]] = {}
        for topic, group in self.admin.offsets.groups():
            committed.setdefault(group, set()).add(topic)
        out = []
        for group in sorted(set(self.clients.consumers) | set(committed)):
            info = self.clients.consumer_group(group)
            topics = set(committed.get(group, ())) | set(info.subscriptions if info else ())
            out.append(
                ConsumerGroupSummary(
                    group=group,
                    clients=len(info.clients) if info else 0,
                    consume_type=info.consume_type if info else "",
                    message_model=info.message_model if info else "",
                    topics=sorted(topics),
                    total_lag=self.admin.progress(group).total_lag,
                )
            )
        return out
