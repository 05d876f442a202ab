"""The remoting edge both servers share: RocketMQ's protocol over asyncio.

Each connection is a ``Channel`` (an ``asyncio.Protocol``). Frames are cut
by ``connector.protocol.remoting.FrameDecoder``; each request goes to the
handler registered for its code and is answered when the handler is done,
so a slow request (a long poll, a SYNC_FLUSH send waiting for its group
commit) never holds up the ones behind it: answers go out in the order they
are ready, matched by ``opaque``. A handler returns the response at once, an
``asyncio.Future`` of it, or a coroutine (run as a task); ``None`` means no
answer now: oneway requests never get one, and a handler that answers later
from a callback of its own (a held pull) calls ``Channel.reply`` then, having
told the channel what to cancel should the connection close first (``owe``).

The server can call a client on its connection (``Channel.invoke``: the
broker's CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED); the client's
answer comes back as a response frame with the same opaque.

Errors: a ``PyMQError`` from a handler becomes the RocketMQ response code of
its kind with the message as remark and pymq's own code in the ext field
``errorCode`` (RocketMQ clients ignore it; pymq's client rebuilds the exact
exception). A frame that cannot be decoded closes that connection, with a
log line; every other connection goes on.

ACL: every request is checked before its handler runs, but for one with a
large body (``ACL_OVERLAP_BODY``) to a handler registered with
``verifies=True``: its signature is then hashed on another thread while the
handler decodes and scans the request, and the handler calls
``Channel.verify()`` before it stores, answers or counts anything. A refusal
is the answer whatever the handler did before it; the channel checks again
when the handler returns.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

from connector.errors import ClientError, PyMQError
from connector.protocol.acl import Credentials, SignSequence, sign_remoting
from connector.protocol.remoting import (
    FLAG_ONEWAY,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_header,
    frame_prefix,
)
from connector.server.acl import AclService, PendingCheck
from connector.server.busy_poll import BusyPoll

__all__ = [
    "ERROR_CODE_EXT",
    "Channel",
    "Ext",
    "Handler",
    "RemotingServer",
    "error_response",
    "response_code_for",
]

log = logging.getLogger(__name__)

ERROR_CODE_EXT = "errorCode"
# a signed body at least this large is hashed beside its handler's first steps (a
# hand-over to the hashing thread costs ~20-30 us: smaller ones are hashed first)
ACL_OVERLAP_BODY = 16384
Reply = RemotingCommand | None


class Cancellable(Protocol):
    def cancel(self) -> object: ...


Handler = Callable[["Channel", RemotingCommand], "Reply | Awaitable[Reply]"]

# pymq error codes -> the RocketMQ response code a RocketMQ client acts on
_RESPONSE_CODES: dict[str, int] = {
    "TOPIC_NOT_EXIST": ResponseCode.TOPIC_NOT_EXIST,
    "NO_PERMISSION": ResponseCode.NO_PERMISSION,
    "AUTHENTICATION_FAILED": ResponseCode.NO_PERMISSION,
    "SYSTEM_BUSY": ResponseCode.SYSTEM_BUSY,
    "SERVICE_NOT_AVAILABLE": ResponseCode.SERVICE_NOT_AVAILABLE,
    "NOT_MASTER": ResponseCode.SERVICE_NOT_AVAILABLE,  # RocketMQ's slave answers this
    "MESSAGE_ILLEGAL": ResponseCode.MESSAGE_ILLEGAL,
    "MESSAGE_SIZE_EXCEEDED": ResponseCode.MESSAGE_ILLEGAL,
    "KEY_ILLEGAL": ResponseCode.MESSAGE_ILLEGAL,
    "TOPIC_ILLEGAL": ResponseCode.MESSAGE_ILLEGAL,
    "MESSAGE_NOT_EXIST": ResponseCode.QUERY_NOT_FOUND,
    "KV_NOT_EXIST": ResponseCode.QUERY_NOT_FOUND,
    "OFFSET_NOT_EXIST": ResponseCode.QUERY_NOT_FOUND,
    "NOT_FOUND": ResponseCode.QUERY_NOT_FOUND,
    "TRANSACTION_ALREADY_DECIDED": ResponseCode.SYSTEM_ERROR,  # the errorCode ext says which
    "REQUEST_CODE_NOT_SUPPORTED": ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
}


def response_code_for(exc: PyMQError) -> int:
    return _RESPONSE_CODES.get(exc.code, ResponseCode.SYSTEM_ERROR)


def error_response(request: RemotingCommand, exc: PyMQError) -> RemotingCommand:
    ext = {ERROR_CODE_EXT: exc.code}
    for key, value in exc.fields.items():
        if isinstance(value, str | int) and not isinstance(value, bool):
            ext[key] = str(value)
    return request.response(response_code_for(exc), ext, remark=exc.message)


def _verified() -> None:
    """``Channel.verify`` when the request was checked before its handler ran."""


def _not_supported(_channel: Channel, request: RemotingCommand) -> RemotingCommand:
    return request.response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        {ERROR_CODE_EXT: "REQUEST_CODE_NOT_SUPPORTED"},
        remark=f"request code {request.code} is not supported",
    )


class Channel(asyncio.Protocol):
    """One client connection."""

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.decoder = FrameDecoder(server.max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        self.peer: tuple[str, int] = ("", 0)
        self.closed = False
        self._calls: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._owed: set[Cancellable] = set()  # answers a handler gives later (held pulls)
        self.counted = False  # in the server's per-address count
        # the ACL check a ``verifies`` handler calls before it changes anything
        self.verify: Callable[[], None] = _verified

    # -- asyncio.Protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = (str(peer[0]), int(peer[1]))
        if not self.server.admit(self.peer[0]):
            self.transport.abort()
            return
        self.counted = True
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.channels.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.counted:
            self.server.release(self.peer[0])
        self.server.channels.discard(self)
        for fut in self._calls.values():
            if not fut.done():
                fut.set_exception(ConnectionError("the client's connection closed"))
        self._calls.clear()
        for task in self._tasks:
            task.cancel()
        owed, self._owed = self._owed, set()
        for pending in owed:
            pending.cancel()
        for listener in self.server.close_listeners:
            try:
                listener(self)
            except Exception:  # a listener's defect must not stop the others
                log.exception("channel close listener %r failed", listener)

    def data_received(self, data: bytes) -> None:
        self.server.busy_poll.touch()
        try:
            commands = self.decoder.feed(data)
        except FrameError as exc:
            log.warning("closing the connection from %s:%d: %s", *self.peer, exc)
            self.close()
            return
        for cmd in commands:
            if cmd.is_response:
                fut = self._calls.pop(cmd.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(cmd)
                continue
            self._dispatch(cmd)

    # -- requests ----------------------------------------------------------------------

    def _dispatch(self, request: RemotingCommand) -> None:
        server = self.server
        acl = server.acl
        if acl is not None:
            try:
                if len(request.body) >= ACL_OVERLAP_BODY and request.code in server.verifying:
                    pending = acl.begin_remoting(request, self.peer[0])
                    if pending is not None:
                        self._dispatch_verifying(request, pending)
                        return
                else:
                    acl.check_remoting(request, self.peer[0])
            except PyMQError as exc:
                self.reply_error(request, exc)
                return
        handler = server.handlers.get(request.code, _not_supported)
        try:
            out = handler(self, request)
        except Exception as exc:  # noqa: BLE001 - answered (a defect: logged), keep serving
            self.reply_error(request, exc)
            return
        self._answer(request, out)

    def _dispatch_verifying(self, request: RemotingCommand, pending: PendingCheck) -> None:
        """The handler runs with ``verify`` = ``pending``; a refusal is the answer,
        whatever the handler did or raised before it called it."""
        handler = self.server.handlers[request.code]
        self.verify = pending
        try:
            out = handler(self, request)
        except Exception as exc:  # noqa: BLE001 - answered (a defect: logged), keep serving
            self.reply_error(request, pending.refusal() or exc)
            return
        finally:
            self.verify = _verified
        refusal = pending.refusal()
        if refusal is not None:  # a handler that verifies first never gets here refused
            self.reply_error(request, refusal)
            return
        self._answer(request, out)

    def _answer(self, request: RemotingCommand, out: Reply | Awaitable[Reply]) -> None:
        if out is None or isinstance(out, RemotingCommand):
            self.reply(request, out)
            return
        if inspect.iscoroutine(out):
            task = asyncio.ensure_future(out)
            self._tasks.add(task)
            task.add_done_callback(lambda t: self._settled(request, t))
        else:
            fut = asyncio.ensure_future(out)
            fut.add_done_callback(lambda f: self._settled(request, f))

    def _settled(self, request: RemotingCommand, fut: asyncio.Future[Reply]) -> None:
        if isinstance(fut, asyncio.Task):
            self._tasks.discard(fut)
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is None:
            self.reply(request, fut.result())
        else:
            self.reply_error(request, exc)

    def reply_error(self, request: RemotingCommand, exc: BaseException) -> None:
        """Answer ``request`` with what ``exc`` means: a ``PyMQError`` as its response
        code, anything else (a defect) as SYSTEM_ERROR, logged."""
        if isinstance(exc, PyMQError):
            self.reply(request, error_response(request, exc))
            return
        log.error("request code %d failed", request.code, exc_info=exc)
        self.reply(request, request.response(ResponseCode.SYSTEM_ERROR, remark="internal error"))

    def owe(self, pending: Cancellable) -> None:
        """A handler that returned None answers later (``reply``); until it does,
        ``pending.cancel()`` runs if the connection closes first."""
        self._owed.add(pending)

    def paid(self, pending: Cancellable) -> None:
        self._owed.discard(pending)

    def reply(self, request: RemotingCommand, response: Reply) -> None:
        if response is None or request.flag & FLAG_ONEWAY:
            return
        self.write(response)

    def write(self, cmd: RemotingCommand) -> None:
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            return
        header = encode_header(cmd)
        body = cmd.body
        if len(body) < 16384:
            transport.write(b"".join((frame_prefix(len(header), len(body)), header, body)))
        else:  # a pull's records: written as they are, not copied into one frame
            transport.write(frame_prefix(len(header), len(body)) + header)
            transport.write(body)

    # -- server -> client calls --------------------------------------------------------

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Send a request to the client on this connection and await its answer."""
        request.opaque = next(self.server.opaques)
        fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        self._calls[request.opaque] = fut
        self.write(request)
        try:
            return await asyncio.wait_for(fut, timeout_s)
        finally:
            self._calls.pop(request.opaque, None)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        request.opaque = next(self.server.opaques)
        request.flag |= FLAG_ONEWAY
        self.write(request)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class RemotingServer:
    """Handlers by request code, and the connections being served."""

    def __init__(
        self,
        *,
        max_frame_bytes: int | None = None,
        busy_poll_us: int = 0,
        acl: AclService | None = None,
        tls: ssl.SSLContext | None = None,
        max_connections_per_address: int = 0,
    ) -> None:
        """``busy_poll_us``: how long the event loop keeps polling after bytes arrive
        before it sleeps in the kernel (``BusyPoll``); 0: it sleeps at once. ``acl``:
        every request is checked against it before its handler acts on it (before the
        handler runs, but see the module's text on large bodies). ``tls``: the
        listener serves TLS with this context. ``max_connections_per_address``: more
        from one address are closed as they come (0: no limit)."""
        from connector.protocol.remoting import MAX_FRAME_BYTES  # noqa: PLC0415

        self.max_frame_bytes = max_frame_bytes or MAX_FRAME_BYTES
        self.handlers: dict[int, Handler] = {}
        self.verifying: set[int] = set()  # codes whose handlers call channel.verify()
        self.acl = acl
        self.tls = tls
        self.max_connections_per_address = max_connections_per_address
        self.per_address: dict[str, int] = {}
        self.connections_refused = 0
        self._refusal_logged = 0.0
        self.channels: set[Channel] = set()
        self.close_listeners: list[Callable[[Channel], None]] = []
        self.opaques = itertools.count(1)
        self.busy_poll = BusyPoll(busy_poll_us / 1e6)
        self._server: asyncio.AbstractServer | None = None

    def admit(self, addr: str) -> bool:
        """Count a new connection from ``addr``; False if it is one too many."""
        count = self.per_address.get(addr, 0)
        limit = self.max_connections_per_address
        if limit and count >= limit:
            self.connections_refused += 1
            now = time.monotonic()
            if now - self._refusal_logged > 10:  # a flood is logged, not every connection
                self._refusal_logged = now
                log.warning(
                    "refusing connections from %s: it has %d (max_connections_per_address); "
                    "%d refused so far", addr, count, self.connections_refused,
                )  # fmt: skip
            return False
        self.per_address[addr] = count + 1
        return True

    def release(self, addr: str) -> None:
        count = self.per_address.get(addr, 0) - 1
        if count > 0:
            self.per_address[addr] = count
        else:
            self.per_address.pop(addr, None)

    def register(
        self, code: int | RequestCode, handler: Handler, *, verifies: bool = False
    ) -> None:
        """``verifies``: the handler calls ``channel.verify()`` before it stores,
        answers or counts anything (see the module's text: its ACL check may then
        overlap its first steps)."""
        self.handlers[int(code)] = handler
        if verifies:
            self.verifying.add(int(code))
        else:
            self.verifying.discard(int(code))

    async def start(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: Channel(self), sock=sock, ssl=self.tls)

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting; give requests in flight ``grace_s`` to be answered; close."""
        if self._server is not None:
            self._server.close()
        pending = [t for ch in self.channels for t in ch._tasks]
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
        for ch in list(self.channels):
            ch.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None


class Ext:
    """A request's ext fields, read with clear errors for missing or malformed values."""

    __slots__ = ("fields",)

    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields

    def text(self, name: str, default: str | None = None) -> str:
        value = self.fields.get(name)
        if value is None:
            if default is None:
                raise ClientError(f"request field {name} is missing")
            return default
        return value

    def number(self, name: str, default: int | None = None) -> int:
        value = self.fields.get(name)
        if value is None or value == "":
            if default is None:
                raise ClientError(f"request field {name} is missing")
            return default
        try:
            return int(value)
        except ValueError:
            raise ClientError(f"request field {name} is not an integer: {value[:64]!r}") from None

    def flag(self, name: str, default: bool = False) -> bool:
        value = self.fields.get(name)
        if value is None or value == "":
            return default
        return value.lower() in ("true", "1")


_SEQUENCE = SignSequence()  # this process's signed server-to-server requests


async def call(
    addr: str,
    request: RemotingCommand,
    timeout_s: float,
    credentials: Credentials | None = None,
    tls: ssl.SSLContext | None = None,
) -> RemotingCommand:
    """One request on a connection of its own, for a server calling another now and
    then (a broker registering with a NameServer), signed with ``credentials`` if
    given. ``OSError`` or ``TimeoutError`` when the other side is down or silent;
    ``FrameError`` when it answers nonsense."""
    host, _, port = addr.rpartition(":")
    request.opaque = 1
    if credentials is not None:
        sign_remoting(request.ext, request.body, credentials, _SEQUENCE)

    async def exchange() -> RemotingCommand:
        reader, writer = await asyncio.open_connection(
            host.strip("[]"), int(port), ssl=tls, server_hostname=host.strip("[]") if tls else None
        )
        try:
            header = encode_header(request)
            writer.write(frame_prefix(len(header), len(request.body)) + header)
            writer.write(request.body)
            await writer.drain()
            decoder = FrameDecoder()
            while True:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError(f"{addr} closed the connection without answering")
                for cmd in decoder.feed(data):
                    if cmd.is_response and cmd.opaque == request.opaque:
                        return cmd
        finally:
            writer.close()

    return await asyncio.wait_for(exchange(), timeout_s)
