"""The broker's remoting edge: RocketMQ's request codes mapped to the processors.

``remoting_server(controller)`` returns a ``RemotingServer`` with a handler
for every code a RocketMQ producer, pull consumer and push consumer sends;
others answer REQUEST_CODE_NOT_SUPPORTED.
"""

from __future__ import annotations

from broker.controller import BrokerController
from broker.remoting.admin import AdminHandlers
from broker.remoting.clients import ClientHandlers
from broker.remoting.pull import PullHandlers
from broker.remoting.send import SendHandlers
from broker.remoting.transaction import TransactionHandlers
from connector.protocol.remoting import RequestCode as C
from connector.server.remoting import Channel, RemotingServer

__all__ = ["remoting_server"]


def remoting_server(ctrl: BrokerController) -> RemotingServer:
    cfg = ctrl.config
    server = RemotingServer(
        busy_poll_us=cfg.busy_poll_us, acl=ctrl.acl, tls=ctrl.tls,
        max_frame_bytes=cfg.max_frame_bytes,
        max_connections_per_address=cfg.max_connections_per_address,
    )  # fmt: skip
    send = SendHandlers(ctrl)
    pull = PullHandlers(ctrl)
    admin = AdminHandlers(ctrl)
    clients = ClientHandlers(ctrl.clients, ctrl.topics, ctrl.queue_locks)
    ctrl.on_clients_expired = clients.scan_expired
    ctrl.on_offset_reset = lambda group, topic, queue_id, offset: clients.reset_offset(
        group, topic, cfg.broker_name, queue_id, offset
    )
    ctrl.call_consumer = clients.call_consumer
    for code in (C.SEND_MESSAGE, C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE):
        server.register(code, send.send, verifies=True)
    server.register(C.CONSUMER_SEND_MSG_BACK, send.send_back)
    transactions = TransactionHandlers(ctrl)
    server.register(C.END_TRANSACTION, transactions.end)
    server.register(C.COMMIT_TRANSACTION_BATCH, transactions.commit_batch)
    ctrl.transactions.ask = transactions.ask
    server.register(C.PULL_MESSAGE, pull.pull)
    server.register(C.LITE_PULL_MESSAGE, pull.pull)
    server.register(C.QUERY_CONSUMER_OFFSET, admin.query_consumer_offset)
    server.register(C.UPDATE_CONSUMER_OFFSET, admin.update_consumer_offset)
    server.register(C.GET_MAX_OFFSET, admin.max_offset)
    server.register(C.GET_MIN_OFFSET, admin.min_offset)
    server.register(C.SEARCH_OFFSET_BY_TIMESTAMP, admin.search_offset)
    server.register(C.GET_EARLIEST_MSG_STORETIME, admin.earliest_msg_store_time)
    server.register(C.VIEW_MESSAGE_BY_ID, admin.view_message_by_id)
    server.register(C.QUERY_MESSAGE, admin.query_message)
    server.register(C.UPDATE_AND_CREATE_TOPIC, admin.create_topic)
    server.register(C.DELETE_TOPIC_IN_BROKER, admin.delete_topic)
    server.register(C.GET_ALL_TOPIC_CONFIG, admin.all_topic_config)
    server.register(C.GET_CONSUMER_CONNECTION_LIST, admin.consumer_connections)
    server.register(C.GET_PRODUCER_CONNECTION_LIST, admin.producer_connections)
    server.register(C.GET_BROKER_CONFIG, admin.broker_config)
    server.register(C.UPDATE_BROKER_CONFIG, admin.update_broker_config)
    server.register(C.HEART_BEAT, clients.heartbeat)
    server.register(C.UNREGISTER_CLIENT, clients.unregister)
    server.register(C.GET_CONSUMER_LIST_BY_GROUP, clients.consumer_list)
    server.register(C.LOCK_BATCH_MQ, clients.lock_batch)
    server.register(C.UNLOCK_BATCH_MQ, clients.unlock_batch)

    def closed(channel: Channel) -> None:
        send.forget(channel)
        clients.connection_closed(channel)

    server.close_listeners.append(closed)
    return server
