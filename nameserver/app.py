"""The NameServer's HTTP edge: a thin FastAPI layer over RouteInfoManager and the KV config.

The routes live in ``nameserver.routes``, one router per resource. Errors
are ``{"code", "message"}`` (``connector.server.http_errors``). A background
task started in the lifespan expires silent brokers every
``scan_not_active_broker_interval_ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI

from connector import __version__
from connector.server.acl import AclService
from connector.server.acl.rest import SIGNING_DOC, AclMiddleware
from connector.server.http_errors import install_error_handlers
from connector.server.limits import BodyLimit
from nameserver.config import NamesrvConfig
from nameserver.kvconfig import KvConfigManager
from nameserver.routeinfo import RouteInfoManager
from nameserver.routes import ROUTERS

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
    app.state.kv = kv

    for router in ROUTERS:
        # the routes themselves, not include_router's lazy wrapper (FastAPI >= 0.165):
        # AclMiddleware looks up each request's route template in the app's routes
        app.router.routes.extend(router.routes)
    return app
