"""Direct routes: hot requests answered by the HTTP protocol itself, without ASGI.

A request through uvicorn's ASGI cycle builds a scope, a ``RequestResponseCycle``
and an asyncio task, passes messages through ``receive`` and ``send`` and
validates every response header again: about 100 us of Python per request on
the 2-core dev machine, as much as a broker's whole send path. A server that
knows which of its requests are hot (the broker's send and pull) gives the
protocol a ``DirectRouter``; a request it claims is read by the parser
callbacks, handed to the route with its whole body, and answered with one
write. Every other request, and a claimed one the protocol cannot take
directly (pipelined behind an unfinished response, ``Expect: 100-continue``,
a paused transport), goes through the ASGI app as before, so the app must
answer the same paths (the broker's ``HotPath`` middleware does, with the same
routes).

What a route returns is a ``Reply`` or an ``asyncio.Future`` of one (a send
that waits for its group commit); the protocol writes it when it is ready,
keeps the connection's keep-alive and pipelining rules, and drops the reply
of a client that went away.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from connector.edge.onewrite import OneWriteHttpToolsProtocol

__all__ = ["DirectRequest", "DirectRoute", "DirectRouter", "Reply", "direct_protocol"]


class Reply(NamedTuple):
    status: int
    content_type: bytes
    body: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()


@dataclass(slots=True)
class DirectRequest:
    method: str
    path: str  # percent-decoded, as an ASGI scope's
    query: bytes
    headers: list[tuple[bytes, bytes]]  # names lower-cased
    client: tuple[str, int] | None
    body: bytes

    def header(self, name: bytes) -> str:
        for key, value in self.headers:
            if key == name:
                return value.decode("latin-1")
        return ""


class DirectRoute(Protocol):
    max_body_bytes: int

    def __call__(self, request: DirectRequest) -> Reply | asyncio.Future[Reply]:
        """The reply, or a future of it; never raises (errors are replies)."""

    def too_large(self, size: int) -> Reply:
        """The reply to a body longer than ``max_body_bytes``."""

    def settled(self, future: asyncio.Future[Reply]) -> Reply:
        """The reply a finished future stands for (its error's reply if it failed)."""


class DirectRouter(Protocol):
    def route(self, method: str, path: str) -> DirectRoute | None:
        """The route that answers ``method path``, or None for the ASGI app."""


class _NoEvent:
    """uvicorn's protocol sets its cycle's message event on body and disconnect."""

    __slots__ = ()

    def set(self) -> None:
        pass


_NO_EVENT = _NoEvent()


class _DirectCycle:
    """Stands where uvicorn's protocol expects its ``RequestResponseCycle``."""

    __slots__ = (
        "chunks",
        "disconnected",
        "keep_alive",
        "message_event",
        "request",
        "response_complete",
        "route",
        "size",
    )

    def __init__(self, route: DirectRoute, request: DirectRequest, keep_alive: bool) -> None:
        self.route = route
        self.request = request
        self.keep_alive = keep_alive
        self.chunks: list[bytes] = []
        self.size = 0
        self.disconnected = False
        self.response_complete = False
        self.message_event = _NO_EVENT


class DirectHttpToolsProtocol(OneWriteHttpToolsProtocol):
    """uvicorn's httptools protocol that answers the router's routes itself.

    Two per-request costs of the base protocol are cut here. The ASGI scope is
    built only for a request the app answers (uvicorn builds it for every
    request as it begins). And the keep-alive timer is not cancelled by every
    request and armed again by every response (a timer handle and a heap entry
    each, ~2 us): one timer stays armed, notes when the connection last went
    idle, and when it fires closes the connection only if it has been idle the
    whole ``timeout_keep_alive`` since, else fires again when that time is up.
    """

    router: DirectRouter | None = None
    _idle_since: float | None = None  # loop time the last response went out; None: busy

    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100_continue = False
        self.headers = []

    def _begin_scope(self) -> None:
        """The ASGI scope uvicorn begins a request with, for a request the app answers."""
        url, headers, expect = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()  # new url, headers and scope (which holds the headers)
        self.url, self.expect_100_continue = url, expect
        self.headers.extend(headers)

    def _unset_keepalive_if_required(self) -> None:
        """uvicorn calls this as data arrives: the connection is busy, the timer stays."""
        self._idle_since = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:  # a request that waited for this response
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        self._idle_since = self.loop.time()
        if self.timeout_keep_alive_task is None:
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self._keep_alive_check
            )

    def _keep_alive_check(self) -> None:
        self.timeout_keep_alive_task = None
        since = self._idle_since
        if since is None or self.transport.is_closing():
            return  # busy: its response arms the timer again
        left = since + self.timeout_keep_alive - self.loop.time()
        if left > 0:
            self.timeout_keep_alive_task = self.loop.call_later(left, self._keep_alive_check)
        else:
            self.timeout_keep_alive_handler()

    def on_headers_complete(self) -> None:
        router = self.router
        current: Any = self.cycle
        if (
            router is not None
            and (current is None or current.response_complete)
            and not self.expect_100_continue
            and not self.flow.write_paused
            and self.limit_concurrency is None
            and not self.parser.should_upgrade()
        ):
            method = self.parser.get_method().decode("ascii")
            parsed = httptools.parse_url(self.url)
            path = parsed.path.decode("ascii")
            if "%" in path:
                path = urllib.parse.unquote(path)
            route = router.route(method, path)
            if route is not None:
                keep_alive = (
                    self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()
                )
                request = DirectRequest(
                    method, path, parsed.query or b"", self.headers, self.client, b""
                )
                self.cycle = _DirectCycle(route, request, keep_alive)  # type: ignore[assignment]
                return
        self._begin_scope()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        cycle: Any = self.cycle
        if type(cycle) is not _DirectCycle:
            super().on_body(body)
            return
        cycle.size += len(body)
        if cycle.size <= cycle.route.max_body_bytes:
            cycle.chunks.append(body)
        else:
            cycle.chunks.clear()  # read on to the end of the request, keep nothing

    def on_message_complete(self) -> None:
        cycle: Any = self.cycle
        if type(cycle) is not _DirectCycle:
            super().on_message_complete()
            return
        route = cycle.route
        if cycle.size > route.max_body_bytes:
            self._finish(cycle, route.too_large(cycle.size))
            return
        chunks = cycle.chunks
        request = cycle.request
        request.body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        cycle.chunks = []
        reply = route(request)
        if isinstance(reply, Reply):
            self._finish(cycle, reply)
        else:
            self.tasks.add(reply)  # type: ignore[arg-type] # graceful shutdown waits for it
            reply.add_done_callback(self._done_callback(cycle))

    def _done_callback(self, cycle: _DirectCycle) -> Callable[[asyncio.Future[Reply]], None]:
        def done(future: asyncio.Future[Reply]) -> None:
            self.tasks.discard(future)
            self._finish(cycle, cycle.route.settled(future))

        return done

    def _finish(self, cycle: _DirectCycle, reply: Reply) -> None:
        if cycle.disconnected or self.transport.is_closing():
            cycle.response_complete = True
            return
        status, content_type, body, extra = reply
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [b"content-type: ", content_type, b"\r\ncontent-length: "]
        head += [str(len(body)).encode(), b"\r\n"]
        for name, value in extra:
            head += [name, b": ", value, b"\r\n"]
        if not cycle.keep_alive:
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        self.transport.write_response(b"".join(head), body)  # type: ignore[attr-defined]
        cycle.response_complete = True
        if not cycle.keep_alive:
            self.transport.close()
        self.on_response_complete()


def direct_protocol(router: DirectRouter) -> type[DirectHttpToolsProtocol]:
    """A protocol class for uvicorn's ``http`` setting that routes through ``router``."""
    return type("DirectHttpToolsProtocol", (DirectHttpToolsProtocol,), {"router": router})
