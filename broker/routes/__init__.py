"""The broker's REST routes, one router per resource; ``broker.app`` mounts them.

Each handler takes the ``BrokerController`` through ``Ctrl`` (the app's
``state.controller``) and calls the same processors as the remoting edge.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from broker.controller import BrokerController
from broker.rest import born_host
from broker.store.results import PutMessageStatus
from connector.errors import ServiceNotAvailableError, UnsupportedMediaTypeError
from connector.protocol.acl import REST_ACCESS_KEY

__all__ = ["Ctrl", "JsonBody", "client_born_host", "replicated", "sender"]


def _controller(request: Request) -> BrokerController:
    ctrl: BrokerController = request.app.state.controller
    return ctrl


Ctrl = Annotated[BrokerController, Depends(_controller)]


async def _json_body(request: Request) -> None:
    ctype = request.headers.get("content-type", "")
    if not ctype.split(";")[0].strip().lower().endswith(("/json", "+json")):
        raise UnsupportedMediaTypeError(f"expected application/json, got {ctype or 'nothing'}")


JsonBody = Depends(_json_body)


def sender(request: Request, ctrl: BrokerController) -> str:
    """Whom a send counts against (``send_rate_limit``): the signing account when ACL
    checked it (else a client could name a new one per request), else the client's
    address."""
    key = request.headers.get(REST_ACCESS_KEY) if ctrl.acl is not None else None
    if key:
        return key
    return request.client.host if request.client else ""


def client_born_host(request: Request) -> bytes:
    client = request.client
    return born_host((client.host, client.port) if client else None)


async def replicated(ctrl: BrokerController) -> None:
    """SYNC_MASTER: a transaction's decision answers once the in-sync slaves have it."""
    status = await ctrl.replicated()
    if status is not PutMessageStatus.PUT_OK:
        raise ServiceNotAvailableError(
            f"the decision is taken here but not known to be on the slaves ({status.value}); "
            "asking again changes nothing"
        )
