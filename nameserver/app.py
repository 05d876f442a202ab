"""The NameServer's HTTP edge: a thin FastAPI layer over RouteInfoManager and the KV config.

Route handlers only touch in-memory tables, so they are ``async def``; KV
writes fsync a file, so those handlers are plain ``def`` and run in the
threadpool. Errors are ``{"code", "message"}`` (``connector.server.http_errors``). A
background task started in the lifespan expires silent brokers every
``scan_not_active_broker_interval_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI

from connector import __version__
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
from connector.server.acl import AclService
from connector.server.acl.rest import SIGNING_DOC, AclMiddleware
from connector.server.http_errors import install_error_handlers
from connector.server.limits import BodyLimit
from nameserver.config import NamesrvConfig
from nameserver.kvconfig import KvConfigManager
from nameserver.routeinfo import RouteInfoManager

__all__ = ["create_app"]

log = logging.getLogger(__name__)


async def _expire_brokers(routes: RouteInfoManager, interval_ms: int, expired_ms: int) -> None:
    """Every ``interval_ms``, drop brokers silent for ``expired_ms``; runs until cancelled."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            removed = routes.scan_not_active_broker()
        except Exception:
            log.exception("the broker expiry scan failed; retrying at the next interval")
            continue
        for addr in removed:
            log.info("broker at %s expired: no heartbeat for more than %d ms", addr, expired_ms)


def create_app(
    config: NamesrvConfig,
    *,
    routes: RouteInfoManager | None = None,
    kv: KvConfigManager | None = None,
) -> FastAPI:
    """A NameServer app. ``routes`` / ``kv`` default to fresh ones built from ``config``.

    ``app.state.routes``, ``app.state.kv`` and ``app.state.config`` expose them.
    """
    if routes is None:
        routes = RouteInfoManager(
            broker_channel_expired_time_ms=config.broker_channel_expired_time_ms
        )
    if kv is None:
        kv = KvConfigManager(config.kv_config_path)
    table = routes
    store = kv

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(
            _expire_brokers(
                table,
                config.scan_not_active_broker_interval_ms,
                config.broker_channel_expired_time_ms,
            ),
            name="namesrv-expire-brokers",
        )
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    app = FastAPI(
        title="pymq NameServer",
        version=__version__,
        description="Route registry: brokers register their topics, clients look routes up.\n"
        + SIGNING_DOC,
        lifespan=lifespan,
    )
    install_error_handlers(app)
    acl = AclService(config.acl_file) if config.acl_enable and config.acl_file else None
    app.state.acl = acl  # the remoting edge checks against the same rules
    if acl is not None:
        app.add_middleware(AclMiddleware, acl=acl, routes=lambda: app.router.routes)
    app.add_middleware(BodyLimit, max_bytes=config.max_frame_bytes)  # outermost
    app.state.config = config
    app.state.routes = table
    app.state.kv = store

    @app.get("/health", tags=["admin"])
    async def health() -> dict[str, Any]:
        """Liveness, and how many broker processes are registered."""
        return {"status": "ok", "role": "namesrv", "brokers": table.live_count()}

    @app.get("/routes/{topic}", tags=["routes"])
    async def get_route(topic: str) -> TopicRouteData:
        """A topic's queues and brokers; 404 TOPIC_NOT_EXIST, 400 TOPIC_ILLEGAL."""
        validate_topic(topic)
        return table.pick_topic_route(topic, kv_lookup=store.find)

    @app.get("/clusters", tags=["routes"])
    async def get_clusters() -> ClusterInfo:
        """Clusters, their broker groups and every live broker with its last heartbeat (ms)."""
        return table.cluster_info()

    @app.get("/topics", tags=["routes"])
    async def get_topics() -> TopicList:
        """Every topic some registered broker holds queues for."""
        return table.topic_list()

    @app.post(
        "/brokers/register",
        tags=["brokers"],
        response_model=None,
        responses={200: {"model": RegisterBrokerResult}},
    )
    async def register_broker(req: RegisterBrokerRequest) -> dict[str, Any]:
        """A broker's heartbeat with its full topic config (every 30 s by default); the
        answer names the group's master, and its HA address when it has one."""
        result = table.register_broker(req).model_dump()
        if result["ha_server_addr"] is None:
            del result["ha_server_addr"]
        return result

    @app.post("/brokers/unregister", tags=["brokers"])
    async def unregister_broker(req: UnregisterBrokerRequest) -> dict[str, bool]:
        """A broker shutting down cleanly; answers ok even if it was not registered."""
        table.unregister_broker(req)
        return {"ok": True}

    @app.get("/kv/{namespace}", tags=["kv"])
    async def get_kv_namespace(namespace: str) -> dict[str, Any]:
        """Every key of a namespace: ``{"namespace", "entries": {key: value}}``."""
        return {"namespace": namespace, "entries": store.namespace(namespace)}

    @app.get("/kv/{namespace}/{key}", tags=["kv"])
    async def get_kv(namespace: str, key: str) -> KvEntry:
        """One value; 404 KV_NOT_EXIST when unset, 400 KEY_ILLEGAL for a bad name."""
        return KvEntry(namespace=namespace, key=key, value=store.get(namespace, key))

    @app.put("/kv/{namespace}/{key}", tags=["kv"])
    def put_kv(namespace: str, key: str, body: KvValue) -> KvEntry:
        """Set a value (at most 64 KiB) and persist it before answering."""
        store.put(namespace, key, body.value)
        return KvEntry(namespace=namespace, key=key, value=body.value)

    @app.delete("/kv/{namespace}/{key}", tags=["kv"])
    def delete_kv(namespace: str, key: str) -> dict[str, bool]:
        """Remove a value (idempotent): ``{"ok": true, "deleted": <it existed>}``."""
        return {"ok": True, "deleted": store.delete(namespace, key)}

    return app
