"""The broker's REST edge: decode a request, call a processor, encode its result.

Plain FastAPI routes: admin, docs, curl, dashboards and languages without a
RocketMQ client (the data plane is remoting, ``broker.remoting``; both call
the same processors). The routes live in ``broker.routes``, one router per
resource; this module builds the app around them (lifespan, ACL, body limit,
error mapping). Handlers are ``async`` and call the processors directly: a
store append or read takes microseconds, less than a hop to a thread pool;
SYNC_FLUSH sends await their group commit without holding a thread. Errors
are PyMQErrors, mapped to ``{"code", "message"}`` once, by
``connector.server.http_errors``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from broker.controller import BrokerController
from broker.routes import consumers, ops, pull, query, send, topics, transactions
from connector import __version__
from connector.server.acl.rest import SIGNING_DOC, AclMiddleware
from connector.server.http_errors import install_error_handlers
from connector.server.limits import BodyLimit

__all__ = ["create_app"]

ROUTERS = (
    ops.router,
    topics.router,
    send.router,
    transactions.router,
    pull.router,
    query.router,
    consumers.router,
    consumers.producers,
)


def create_app(controller: BrokerController) -> FastAPI:
    """The broker's REST app; its lifespan starts and stops ``controller``."""
    ctrl = controller
    cfg = ctrl.config

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await ctrl.start()
        try:
            yield
        finally:
            await ctrl.stop()

    app = FastAPI(
        title=f"pymq broker {cfg.broker_name}",
        version=__version__,
        lifespan=lifespan,
        description="Send, pull and admin API of one pymq broker.\n" + SIGNING_DOC,
    )
    install_error_handlers(app)
    if ctrl.acl is not None:
        app.add_middleware(AclMiddleware, acl=ctrl.acl, routes=lambda: app.router.routes)
    app.add_middleware(BodyLimit, max_bytes=cfg.max_frame_bytes)  # outermost
    app.state.controller = ctrl
    for router in ROUTERS:
        # the routes themselves, not include_router's lazy wrapper (FastAPI >= 0.165):
        # AclMiddleware looks up each request's route template in the app's routes
        app.router.routes.extend(router.routes)
    return app
