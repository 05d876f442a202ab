"""JSON calls to the servers' REST API over httpx, errors decoded into ``connector.errors``.

What ``Admin`` uses for broker administration (the data plane speaks
remoting). A non-2xx answer carries ``{"code", "message"}``; it becomes the
exception of that code (``error_for_code``) with the answer's other fields,
``http_status`` and ``addr``, so callers decide on retries with
``error.retriable`` / ``error.invalid_metadata``. Transport failures:

    RemotingError           the connection broke mid-request (it may have been processed),
    │                       or the answer is not JSON
    ├── ConnectError        no connection could be made (safe to retry anywhere)
    └── RemotingTimeoutError no answer in time
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Generator, Mapping
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from connector.errors import (
    ConnectError,
    PyMQError,
    RemotingError,
    RemotingTimeoutError,
    error_for_code,
)
from connector.protocol.acl import Credentials, rest_headers

__all__ = ["DEFAULT_TIMEOUT_MS", "RestClient", "decode_error", "path"]

DEFAULT_TIMEOUT_MS = 5000


def path(*parts: str | int, query: Mapping[str, Any] | None = None) -> str:
    """``/a/b`` with each part percent-encoded (topics may hold ``%``), plus a query."""
    out = "/" + "/".join(quote(str(p), safe="") for p in parts)
    if query:
        items = {k: ("true" if v is True else "false" if v is False else v)
                 for k, v in query.items() if v is not None}  # fmt: skip
        if items:
            out += "?" + urlencode(items)
    return out


def _host_port(url: str) -> str:
    """``http://h:p`` -> ``h:p`` (a bare ``h:p`` stays as it is)."""
    return url.split("://", 1)[-1].rstrip("/")


def decode_error(addr: str, status: int, body: bytes) -> PyMQError:
    """The error a non-2xx answer of the server at ``addr`` (host:port) carries."""
    try:
        raw = json.loads(body)
        code, message = str(raw["code"]), str(raw.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return RemotingError(f"{addr} answered HTTP {status}: {body[:200]!r}")
    err = error_for_code(code, message)
    err.fields.update({k: v for k, v in raw.items() if k not in ("code", "message")})
    err.fields["http_status"] = status
    err.fields["addr"] = addr
    return err


class SignedRequests(httpx.Auth):
    """Signs each request as pymq's servers check it (``connector.protocol.acl``)."""

    requires_request_body = True

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        target = request.url.raw_path.decode("ascii")
        request.headers.update(
            rest_headers(self.credentials, request.method, target, request.content)
        )
        yield request


class RestClient:
    """One ``httpx.Client`` (keep-alive connections, safe to share between threads).

    ``timeout_ms`` bounds connecting, each write and each read of an answer
    (httpx has no deadline for a whole call). Proxies and other settings from
    the environment are not used: the servers are reached directly.
    """

    def __init__(
        self,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``credentials``: every request is signed with them (servers with ACL on);
        ``tls``: how ``https://`` servers are verified (addresses without a scheme are
        taken as https then)."""
        self.timeout_ms = timeout_ms
        self.tls = tls
        self._client = httpx.Client(
            timeout=timeout_ms / 1000,
            trust_env=False,
            auth=SignedRequests(credentials) if credentials is not None else None,
            verify=tls if tls is not None else True,
        )

    def close(self) -> None:
        self._client.close()

    def call(self, base_url: str, method: str, target: str, payload: Any = None) -> Any:
        """A JSON request to ``base_url`` + ``target`` (from ``path``; ``payload`` None:
        no body) and its decoded JSON answer. ``base_url``: ``http://h:p`` or ``h:p``."""
        if "://" not in base_url:
            base_url = ("https://" if self.tls is not None else "http://") + base_url
        addr = _host_port(base_url)
        try:
            resp = self._client.request(method, base_url.rstrip("/") + target, json=payload)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ConnectError(f"cannot connect to {addr}: {exc}") from None
        except httpx.TimeoutException:
            raise RemotingTimeoutError(
                f"{method} {target} to {addr}: no answer within {self.timeout_ms} ms"
            ) from None
        except httpx.TransportError as exc:
            raise RemotingError(f"{method} {target} to {addr} failed: {exc!r}") from None
        except httpx.InvalidURL as exc:
            raise ConnectError(f"address {addr!r} is not a server's address: {exc}") from None
        if not resp.is_success:
            raise decode_error(addr, resp.status_code, resp.content)
        try:
            return json.loads(resp.content)
        except ValueError:
            raise RemotingError(f"{addr} answered with something that is not JSON") from None
