"""Remoting calls to pymq's servers (and RocketMQ's), errors decoded.

One ``RemotingClient`` (one connection per server address, many requests in
flight on each) is shared by every thread of a pymq client. An answer whose
code is not one the caller expects becomes the exception of its kind: pymq's
servers name their exact error in the ext field ``errorCode``; for other
servers the RocketMQ response code decides (``error_for_response``), so
callers decide on retries with ``error.retriable`` /
``error.invalid_metadata``.
"""

from __future__ import annotations

import ssl
from collections.abc import Collection, Mapping

import orjson

from connector.client.connection import RemotingClient, RequestHandler
from connector.errors import (
    BrokerBusyError,
    MessageIllegalError,
    NoPermissionError,
    NotFoundError,
    PyMQError,
    RemotingError,
    ServiceNotAvailableError,
    TopicNotExistError,
    error_for_code,
)
from connector.protocol.acl import Credentials
from connector.protocol.remoting import RemotingCommand, ResponseCode

__all__ = ["Rpc", "error_for_response"]

_SUCCESS = frozenset({ResponseCode.SUCCESS})
_BY_RESPONSE_CODE: dict[int, type[PyMQError]] = {
    ResponseCode.TOPIC_NOT_EXIST: TopicNotExistError,
    ResponseCode.NO_PERMISSION: NoPermissionError,
    ResponseCode.SYSTEM_BUSY: BrokerBusyError,
    ResponseCode.SERVICE_NOT_AVAILABLE: ServiceNotAvailableError,
    ResponseCode.MESSAGE_ILLEGAL: MessageIllegalError,
    ResponseCode.QUERY_NOT_FOUND: NotFoundError,
}


def error_for_response(addr: str, resp: RemotingCommand) -> PyMQError:
    message = resp.remark or f"{addr} answered code {resp.code}"
    code = resp.ext.get("errorCode")
    if code:
        err = error_for_code(code, message)
        err.fields.update({k: v for k, v in resp.ext.items() if k != "errorCode"})
    else:
        cls = _BY_RESPONSE_CODE.get(resp.code)
        err = cls(message) if cls is not None else error_for_code(_name(resp.code), message)
    err.fields["response_code"] = resp.code
    err.fields["addr"] = addr
    return err


def _name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"RESPONSE_CODE_{code}"


class Rpc:
    """Requests to servers by address; thread-safe."""

    def __init__(
        self,
        *,
        connect_timeout_s: float = 3.0,
        on_request: RequestHandler | None = None,
        busy_poll_us: int = 0,
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``credentials``: every request is signed with them (servers with ACL on);
        ``tls``: every connection is TLS, the servers verified with this context."""
        self.client = RemotingClient(
            connect_timeout_s=connect_timeout_s,
            on_request=on_request,
            busy_poll_us=busy_poll_us,
            credentials=credentials,
            tls=tls,
        )

    def call(
        self,
        addr: str,
        code: int,
        ext: Mapping[str, str] | None = None,
        body: bytes | memoryview = b"",
        *,
        timeout_s: float,
        ok: Collection[int] = _SUCCESS,
        busy_poll: bool = True,
        background: bool = False,
    ) -> RemotingCommand:
        """The answer if its code is in ``ok``, else the error it carries. ``busy_poll``
        False: a lone caller waits for it asleep at once (a long poll); ``background``:
        a rare call that starts no reader thread (see ``RemotingConnection.invoke``)."""
        cmd = RemotingCommand(code, dict(ext) if ext else {}, body)
        resp = self.client.invoke(addr, cmd, timeout_s, busy_poll=busy_poll, background=background)
        if resp.code not in ok:
            raise error_for_response(addr, resp)
        return resp

    def call_json(
        self,
        addr: str,
        code: int,
        ext: Mapping[str, str] | None = None,
        *,
        timeout_s: float,
    ) -> object:
        """A request whose answer's body is JSON, decoded."""
        resp = self.call(addr, code, ext, timeout_s=timeout_s)
        try:
            return orjson.loads(resp.body)
        except orjson.JSONDecodeError:
            raise RemotingError(
                f"{addr} answered code {code} with a body that is not JSON"
            ) from None

    def oneway(self, addr: str, code: int, ext: Mapping[str, str] | None = None) -> None:
        self.client.invoke_oneway(addr, RemotingCommand(code, dict(ext) if ext else {}))

    def close(self) -> None:
        self.client.close()
