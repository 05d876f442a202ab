"""The NameServer's remoting edge (RocketMQ's DefaultRequestProcessor).

GET_ROUTEINFO_BY_TOPIC (105), GET_BROKER_CLUSTER_INFO (106),
GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), the KV config (100-102) and
REGISTER_BROKER / UNREGISTER_BROKER (103 / 104) call the same route table
and KV store as the REST edge. Bodies are RocketMQ's JSON; routes also carry
each broker's REST address (``httpAddrs``), which RocketMQ clients ignore.
A broker's registration body is pymq's ``RegisterBrokerRequest`` JSON.
"""

from __future__ import annotations

import ssl

import orjson
from pydantic import ValidationError

from connector.errors import ClientError, TopicNotExistError
from connector.protocol.names import validate_topic
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.route import (
    RegisterBrokerRequest,
    UnregisterBrokerRequest,
    cluster_to_remoting,
    route_to_remoting,
)
from connector.server.acl import AclService
from connector.server.remoting import Channel, Ext, RemotingServer
from nameserver.kvconfig import KvConfigManager
from nameserver.routeinfo import RouteInfoManager

__all__ = ["remoting_server"]


def remoting_server(
    routes: RouteInfoManager,
    kv: KvConfigManager,
    acl: AclService | None = None,
    *,
    tls: ssl.SSLContext | None = None,
    max_frame_bytes: int | None = None,
    max_connections_per_address: int = 0,
) -> RemotingServer:
    server = RemotingServer(
        acl=acl, tls=tls, max_frame_bytes=max_frame_bytes,
        max_connections_per_address=max_connections_per_address,
    )  # fmt: skip

    def route(_: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = validate_topic(Ext(request.ext).text("topic"))
        try:
            data = routes.pick_topic_route(topic, kv_lookup=kv.find)
        except TopicNotExistError as exc:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, remark=exc.message)
        return request.response(body=orjson.dumps(route_to_remoting(data)))

    def cluster(_: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=orjson.dumps(cluster_to_remoting(routes.cluster_info())))

    def topics(_: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.response(body=orjson.dumps({"topicList": routes.topic_list().topics}))

    def get_kv(_: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = Ext(request.ext)
        value = kv.find(ext.text("namespace"), ext.text("key"))
        if value is None:
            return request.response(ResponseCode.QUERY_NOT_FOUND, remark="no such KV config")
        return request.response(ext={"value": value})

    def put_kv(_: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = Ext(request.ext)
        kv.put(ext.text("namespace"), ext.text("key"), ext.text("value"))
        return request.response()

    def delete_kv(_: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = Ext(request.ext)
        kv.delete(ext.text("namespace"), ext.text("key"))
        return request.response()

    def register(_: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            req = RegisterBrokerRequest.model_validate_json(bytes(request.body))
        except ValidationError as exc:
            raise ClientError(f"registration body: {_first_error(exc)}") from None
        result = routes.register_broker(req)
        ext = {"masterAddr": result.master_addr} if result.master_addr else {}
        if result.ha_server_addr:
            ext["haServerAddr"] = result.ha_server_addr
        return request.response(ext=ext)

    def unregister(_: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            req = UnregisterBrokerRequest.model_validate_json(bytes(request.body))
        except ValidationError as exc:
            raise ClientError(f"unregistration body: {_first_error(exc)}") from None
        routes.unregister_broker(req)
        return request.response()

    server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, route)
    server.register(RequestCode.GET_BROKER_CLUSTER_INFO, cluster)
    server.register(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, topics)
    server.register(RequestCode.GET_KV_CONFIG, get_kv)
    server.register(RequestCode.PUT_KV_CONFIG, put_kv)
    server.register(RequestCode.DELETE_KV_CONFIG, delete_kv)
    server.register(RequestCode.REGISTER_BROKER, register)
    server.register(RequestCode.UNREGISTER_BROKER, unregister)
    return server


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "body"
    return f"{where}: {err.get('msg', 'invalid')}"
