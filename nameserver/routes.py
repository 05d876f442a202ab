"""The NameServer's REST routes, one router per resource; ``nameserver.app`` mounts them.

Handlers take the route table and the KV config from the app's state
(``Routes``, ``Kv``). Route handlers only touch in-memory tables, so they
are ``async def``; KV writes fsync a file, so those handlers are plain
``def`` and run in the threadpool.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from connector.protocol.names import validate_topic
from connector.protocol.route import (
    ClusterInfo,
    KvEntry,
    KvValue,
    RegisterBrokerRequest,
    RegisterBrokerResult,
    TopicList,
    TopicRouteData,
    UnregisterBrokerRequest,
)
from nameserver.kvconfig import KvConfigManager
from nameserver.routeinfo import RouteInfoManager

__all__ = ["ROUTERS"]


def _routes(request: Request) -> RouteInfoManager:
    table: RouteInfoManager = request.app.state.routes
    return table


def _kv(request: Request) -> KvConfigManager:
    kv: KvConfigManager = request.app.state.kv
    return kv


Routes = Annotated[RouteInfoManager, Depends(_routes)]
Kv = Annotated[KvConfigManager, Depends(_kv)]

admin = APIRouter(tags=["admin"])
routes = APIRouter(tags=["routes"])
brokers = APIRouter(tags=["brokers"])
kv = APIRouter(tags=["kv"])
ROUTERS = (admin, routes, brokers, kv)


@admin.get("/health")
async def health(table: Routes) -> dict[str, Any]:
    """Liveness, and how many broker processes are registered."""
    return {"status": "ok", "role": "namesrv", "brokers": table.live_count()}


@routes.get("/routes/{topic}")
async def get_route(table: Routes, store: Kv, topic: str) -> TopicRouteData:
    """A topic's queues and brokers; 404 TOPIC_NOT_EXIST, 400 TOPIC_ILLEGAL."""
    validate_topic(topic)
    return table.pick_topic_route(topic, kv_lookup=store.find)


@routes.get("/clusters")
async def get_clusters(table: Routes) -> ClusterInfo:
    """Clusters, their broker groups and every live broker with its last heartbeat (ms)."""
    return table.cluster_info()


@routes.get("/topics")
async def get_topics(table: Routes) -> TopicList:
    """Every topic some registered broker holds queues for."""
    return table.topic_list()


@brokers.post(
    "/brokers/register", response_model=None, responses={200: {"model": RegisterBrokerResult}}
)
async def register_broker(table: Routes, req: RegisterBrokerRequest) -> dict[str, Any]:
    """A broker's heartbeat with its full topic config (every 30 s by default); the
    answer names the group's master, and its HA address when it has one."""
    result = table.register_broker(req).model_dump()
    if result["ha_server_addr"] is None:
        del result["ha_server_addr"]
    return result


@brokers.post("/brokers/unregister")
async def unregister_broker(table: Routes, req: UnregisterBrokerRequest) -> dict[str, bool]:
    """A broker shutting down cleanly; answers ok even if it was not registered."""
    table.unregister_broker(req)
    return {"ok": True}


@kv.get("/kv/{namespace}")
async def get_kv_namespace(store: Kv, namespace: str) -> dict[str, Any]:
    """Every key of a namespace: ``{"namespace", "entries": {key: value}}``."""
    return {"namespace": namespace, "entries": store.namespace(namespace)}


@kv.get("/kv/{namespace}/{key}")
async def get_kv(store: Kv, namespace: str, key: str) -> KvEntry:
    """One value; 404 KV_NOT_EXIST when unset, 400 KEY_ILLEGAL for a bad name."""
    return KvEntry(namespace=namespace, key=key, value=store.get(namespace, key))


@kv.put("/kv/{namespace}/{key}")
def put_kv(store: Kv, namespace: str, key: str, body: KvValue) -> KvEntry:
    """Set a value (at most 64 KiB) and persist it before answering."""
    store.put(namespace, key, body.value)
    return KvEntry(namespace=namespace, key=key, value=body.value)


@kv.delete("/kv/{namespace}/{key}")
def delete_kv(store: Kv, namespace: str, key: str) -> dict[str, bool]:
    """Remove a value (idempotent): ``{"ok": true, "deleted": <it existed>}``."""
    return {"ok": True, "deleted": store.delete(namespace, key)}
