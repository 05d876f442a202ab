"""Serve both listeners of a pymq server: the REST app (uvicorn) and remoting.

The socket is bound before uvicorn starts, so ``--port 0`` works (the ready
line carries the real port) and a busy port is a one-line error, not a
traceback. uvloop and httptools are used where installed. SIGTERM and SIGINT
stop the server gracefully: uvicorn finishes in-flight requests and runs the
app's lifespan shutdown (where the broker unregisters and flushes).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import socket
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import uvicorn

from connector.errors import ConfigError

if TYPE_CHECKING:
    from connector.server.remoting import RemotingServer

__all__ = ["ServerSpec", "bind_socket", "serve"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    host: str
    port: int


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket, or ConfigError with a one-line reason."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"port {port} is out of range 0..65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = "address already in use" if exc.errno == 98 else (exc.strerror or str(exc))
        raise ConfigError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.set_inheritable(True)
    return sock


_TOO_MANY = (
    b'{"code":"TOO_MANY_CONNECTIONS","message":"this address has '
    b'max_connections_per_address connections open"}'
)
_TOO_MANY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"connection: close\r\ncontent-length: "
    + str(len(_TOO_MANY)).encode()
    + b"\r\n\r\n"
    + _TOO_MANY
)


def limited_http(protocol: type[asyncio.Protocol], limit: int) -> type[asyncio.Protocol]:
    """``protocol`` (uvicorn's HTTP protocol) refusing a connection from an address that
    has ``limit`` open already (0: no limit): answered 503 ``TOO_MANY_CONNECTIONS``
    and closed before any request is read (logged at most every 10 s)."""
    if not limit:
        return protocol
    open_by_addr: dict[str, int] = {}
    refused = [0, 0.0]  # count, when last logged

    class Limited(protocol):  # type: ignore[misc, valid-type]
        _pymq_addr: str | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            peer = transport.get_extra_info("peername")
            addr = str(peer[0]) if peer else ""
            count = open_by_addr.get(addr, 0)
            if count >= limit:
                refused[0] += 1
                if time.monotonic() - refused[1] > 10:
                    refused[1] = time.monotonic()
                    log.warning(
                        "refusing HTTP connections from %s: it has %d "
                        "(max_connections_per_address); %d refused so far",
                        addr, count, refused[0],
                    )  # fmt: skip
                transport.write(_TOO_MANY_RESPONSE)  # type: ignore[attr-defined]
                transport.close()
                return
            open_by_addr[addr] = count + 1
            self._pymq_addr = addr
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            if self._pymq_addr is not None:
                super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            addr = self._pymq_addr
            if addr is None:  # refused: the protocol never started
                return
            left = open_by_addr.get(addr, 0) - 1
            if left > 0:
                open_by_addr[addr] = left
            else:
                open_by_addr.pop(addr, None)
            super().connection_lost(exc)

    return Limited


def _uvicorn_config(
    app: Any, log_level: str, tls: tuple[str, str] | None, max_connections_per_address: int
) -> uvicorn.Config:
    has = importlib.util.find_spec
    http = importlib.import_module(
        "uvicorn.protocols.http.httptools_impl" if has("httptools")
        else "uvicorn.protocols.http.h11_impl"
    )  # fmt: skip
    protocol = getattr(http, "HttpToolsProtocol", None) or http.H11Protocol
    return uvicorn.Config(
        app,
        ssl_certfile=tls[0] if tls else None,
        ssl_keyfile=tls[1] if tls else None,
        loop="uvloop" if has("uvloop") else "asyncio",
        http=limited_http(protocol, max_connections_per_address),
        # the peer is the client: no X-Forwarded-For rewriting (and no middleware)
        proxy_headers=False,
        lifespan="on",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=10,
        timeout_keep_alive=75,  # clients keep pooled connections; fewer close races
        server_header=False,
        date_header=False,
    )


class _Server(uvicorn.Server):
    def __init__(
        self,
        config: uvicorn.Config,
        on_ready: Callable[[], None],
        on_exit: Callable[[], None] | None,
        remoting: tuple[RemotingServer, socket.socket] | None,
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._on_exit = on_exit
        self._remoting = remoting

    def handle_exit(self, sig: int, frame: types.FrameType | None) -> None:
        if self._on_exit is not None and not self.should_exit:
            self._on_exit()
        super().handle_exit(sig, frame)
        # uvicorn re-raises a captured signal after its graceful shutdown, so the
        # process would die of it (exit -15); a clean stop is a normal exit here
        captured = getattr(self, "_captured_signals", None)  # uvicorn >= 0.29
        if isinstance(captured, list):
            captured.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)  # runs the app's lifespan startup first
        if self.started and self._remoting is not None:
            server, sock = self._remoting
            try:
                await server.start(sock)
            except OSError as exc:
                log.error("the remoting listener failed to start: %s", exc)
                self.should_exit = True
                self.started = False
                return
        if self.started:
            self._on_ready()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # remoting requests in flight are answered before the app's lifespan shutdown
        # (where the broker unregisters and flushes) runs
        if self._remoting is not None:
            await self._remoting[0].stop()
        await super().shutdown(sockets)


def serve(
    app: Any,
    sock: socket.socket,
    *,
    ready_line: str,
    log_level: str = "warning",
    on_exit: Callable[[], None] | None = None,
    remoting: tuple[RemotingServer, socket.socket] | None = None,
    on_ready: Callable[[], None] | None = None,
    tls: tuple[str, str] | None = None,
    max_connections_per_address: int = 0,
) -> int:
    """Run until SIGTERM/SIGINT; print ``ready_line`` once, when both listeners accept.

    ``sock`` is the HTTP listener; ``remoting`` the remoting server and its listener,
    started once the app's lifespan startup is done and stopped before its shutdown.

    ``on_exit`` runs when the signal arrives (e.g. to answer held long polls
    so the graceful shutdown does not wait for them); ``on_ready`` once the
    startup is done, just before the ready line. ``tls``: (certificate, key) PEM files:
    the REST listener serves HTTPS (the remoting server has its own context).
    ``max_connections_per_address``: HTTP connections one address may hold open
    (``limited_http``; 0: no limit), as the remoting server's own limit.
    """

    def ready() -> None:
        if on_ready is not None:
            on_ready()
        print(ready_line, flush=True)

    config = _uvicorn_config(app, log_level, tls, max_connections_per_address)
    server = _Server(config, ready, on_exit, remoting)
    config = server.config
    runner: Callable[[Any], Any] = asyncio.run
    if config.loop == "uvloop":  # optional dependency, present with uvicorn[standard]
        runner = importlib.import_module("uvloop").run
    runner(server.serve(sockets=[sock]))
    if not server.started:
        print("pymq: server failed to start (see the log above)", file=sys.stderr)
        return 1
    return 0
