"""ACL on the REST edge: an ASGI middleware that checks every request's signature and
what its route needs before FastAPI sees it.

Signing (``connector.protocol.acl``) covers the method, the path and query
as sent, the time, a nonce and the body, so the middleware reads the whole
body first (and hands the same bytes on). Refusals are ``{"code",
"message"}``: 401 AUTHENTICATION_FAILED, 403 NO_PERMISSION. ``open_paths``
(``/health``, ``/metrics`` and the docs by default) need no signature.

What a route needs is looked up by its path template (``NEEDS``); a route
not listed needs an admin account, so a new route is closed until someone
says who may call it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connector.errors import PyMQError
from connector.protocol.acl import (
    REST_ACCESS_KEY,
    REST_NONCE,
    REST_SIGNATURE,
    REST_TIMESTAMP,
    rest_string_to_sign,
)
from connector.server.acl.model import ADMIN, ANYONE, GROUP, PUB, SUB, TOPIC, Needs
from connector.server.acl.remoting import RETRY_PREFIX
from connector.server.acl.service import AclService

__all__ = ["DEFAULT_OPEN_PATHS", "NEEDS", "SIGNING_DOC", "AclMiddleware"]

DEFAULT_OPEN_PATHS = frozenset({"/health", "/metrics", "/docs", "/openapi.json", "/redoc",
                                "/docs/oauth2-redirect"})  # fmt: skip

Params = Mapping[str, Any]


def _send(p: Params) -> Needs:
    topic = str(p["topic"])
    if topic.startswith(RETRY_PREFIX):
        return Needs.of((GROUP, topic[len(RETRY_PREFIX) :], SUB))
    return Needs.of((TOPIC, topic, PUB))


def _topic_sub(p: Params) -> Needs:
    return Needs.of((TOPIC, str(p["topic"]), SUB))


def _group_sub(p: Params) -> Needs:
    return Needs.of((GROUP, str(p["group"]), SUB))


def _offsets(p: Params) -> Needs:
    return Needs.of((TOPIC, str(p["topic"]), SUB), (GROUP, str(p["group"]), SUB))


def _anyone(_p: Params) -> Needs:
    return ANYONE


def _admin(_p: Params) -> Needs:
    return ADMIN


# (method, path template) -> what the request needs; both servers' routes
NEEDS: dict[tuple[str, str], Callable[[Params], Needs]] = {
    # broker
    ("GET", "/topics"): _anyone,
    ("GET", "/topics/{topic}"): _anyone,
    ("PUT", "/topics/{topic}"): _admin,
    ("DELETE", "/topics/{topic}"): _admin,
    ("POST", "/topics/{topic}/messages"): _send,
    ("POST", "/topics/{topic}/messages/batch"): _send,
    ("POST", "/transactions/end"): _anyone,
    ("POST", "/transactions/batch-commit"): _anyone,
    ("GET", "/transactions"): _anyone,
    ("GET", "/transactions/{half_queue_offset}"): _anyone,
    ("GET", "/topics/{topic}/queues/{queue_id}/messages"): _topic_sub,
    ("GET", "/topics/{topic}/queues/{queue_id}/offsets"): _topic_sub,
    ("GET", "/topics/{topic}/queues/{queue_id}/offset-by-time"): _topic_sub,
    ("GET", "/topics/{topic}/messages"): _topic_sub,
    ("GET", "/messages/{msg_id}"): _anyone,
    ("GET", "/consumers"): _anyone,
    ("GET", "/consumers/{group}/connections"): _anyone,
    ("GET", "/producers/{group}/connections"): _anyone,
    ("GET", "/consumers/{group}/offsets/{topic}/{queue_id}"): _offsets,
    ("PUT", "/consumers/{group}/offsets/{topic}/{queue_id}"): _offsets,
    ("GET", "/consumers/{group}/progress"): _group_sub,
    ("POST", "/consumers/{group}/send-back"): _group_sub,
    ("GET", "/config"): _admin,
    ("PUT", "/config"): _admin,
    # NameServer
    ("GET", "/routes/{topic}"): _anyone,
    ("GET", "/clusters"): _anyone,
    ("POST", "/brokers/register"): _admin,
    ("POST", "/brokers/unregister"): _admin,
    ("GET", "/kv/{namespace}"): _anyone,
    ("GET", "/kv/{namespace}/{key}"): _anyone,
    ("PUT", "/kv/{namespace}/{key}"): _admin,
    ("DELETE", "/kv/{namespace}/{key}"): _admin,
}

SIGNING_DOC = """
**Access control.** When the server runs with `acl_enable`, every request but
`/health`, `/metrics` and these docs is signed with an account of its `acl_file`:

| header | value |
|---|---|
| `X-Pymq-Access-Key` | the account's accessKey |
| `X-Pymq-Timestamp` | Unix time in milliseconds (accepted within 5 minutes of the server's) |
| `X-Pymq-Nonce` | 8-64 characters, never repeated within the window |
| `X-Pymq-Signature` | Base64(HMAC-SHA256(secretKey, string to sign)) |

The string to sign is five lines joined by `\\n`: the method (upper case), the
path and query exactly as sent (`/topics/T/messages?x=1`), the timestamp, the
nonce, and the hex SHA-256 of the body (of no bytes when there is none).
401 `AUTHENTICATION_FAILED`: no or unknown key, a signature that does not
match, a timestamp out of the window, a nonce seen before. 403
`NO_PERMISSION`: the account may not make this request (send: PUB on the
topic; pull, offsets, progress: SUB on the topic and the group; topic,
config and broker admin: an admin account). pymq's clients sign for you
(`access_key=`, `secret_key=`).
"""


class AclMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        acl: AclService,
        routes: Callable[[], list[Any]],
        open_paths: frozenset[str] = DEFAULT_OPEN_PATHS,
    ) -> None:
        self.app = app
        self.acl = acl
        self.routes = routes  # the app's routes, read when a request comes
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        body, tail = await _read_body(receive)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        raw_path = scope.get("raw_path") or scope["path"].encode()
        query = scope.get("query_string", b"")
        target = raw_path.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        client = scope.get("client")
        try:
            self.acl.check_rest(
                access_key=headers.get(REST_ACCESS_KEY.lower()),
                timestamp=headers.get(REST_TIMESTAMP.lower()),
                nonce=headers.get(REST_NONCE.lower()),
                signature=headers.get(REST_SIGNATURE.lower()),
                string_to_sign=lambda: rest_string_to_sign(
                    scope["method"],
                    target,
                    headers.get(REST_TIMESTAMP.lower(), ""),
                    headers.get(REST_NONCE.lower(), ""),
                    body,
                ),
                needs=self._needs(scope),
                addr=str(client[0]) if client else "",
            )
        except PyMQError as exc:
            await _refuse(send, exc)
            return
        await self.app(scope, _replay(body, tail, receive), send)

    def _needs(self, scope: Scope) -> Needs:
        for route in self.routes():
            match, child = route.matches(scope)
            if match is Match.FULL:
                path = getattr(route, "path", "")
                rule = NEEDS.get((scope["method"], path))
                return rule(child.get("path_params", {})) if rule is not None else ADMIN
        return ANYONE  # no such route: a 404 (or 405) once signed


async def _read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The whole body, and a disconnect message if one came instead."""
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts), message
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts), None


def _replay(body: bytes, tail: Message | None, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        if tail is not None:
            return tail
        return await receive()

    return replay


async def _refuse(send: Send, exc: PyMQError) -> None:
    payload = orjson.dumps(exc.to_dict())
    await send({
        "type": "http.response.start",
        "status": exc.http_status,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode())],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": payload})
