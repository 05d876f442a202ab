"""HTTP calls to pymq servers, errors decoded into the ``connector.errors`` hierarchy.

One ``HttpPool`` per server address, shared by every thread of a client. A
non-2xx answer carries ``{"code", "message"}``; it becomes the exception of
that code (``error_for_code``), so callers decide on retries with
``error.retriable`` / ``error.invalid_metadata``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

import orjson

from connector.errors import PyMQError, RemotingError, error_for_code
from connector.remoting import HttpPool, HttpResponse

__all__ = ["ClientTransport", "path"]

JSON_HEADERS = {"content-type": "application/json"}


def path(*parts: str | int, query: Mapping[str, Any] | None = None) -> str:
    """``/a/b`` with each part percent-encoded (topics may hold ``%``), plus a query."""
    out = "/" + "/".join(quote(str(p), safe="") for p in parts)
    if query:
        items = {k: ("true" if v is True else "false" if v is False else v)
                 for k, v in query.items() if v is not None}  # fmt: skip
        if items:
            out += "?" + urlencode(items)
    return out


class ClientTransport:
    def __init__(self, *, connect_timeout_s: float = 3.0, max_idle_per_addr: int = 16) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.max_idle_per_addr = max_idle_per_addr
        self._pools: dict[str, HttpPool] = {}
        self._lock = threading.Lock()

    def pool(self, addr: str) -> HttpPool:
        pool = self._pools.get(addr)
        if pool is None:
            with self._lock:
                pool = self._pools.get(addr)
                if pool is None:
                    pool = HttpPool(
                        addr,
                        max_idle=self.max_idle_per_addr,
                        connect_timeout_s=self.connect_timeout_s,
                    )
                    self._pools[addr] = pool
        return pool

    def request(
        self,
        addr: str,
        method: str,
        target: str,
        body: bytes | memoryview | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        timeout_s: float,
    ) -> HttpResponse:
        """The raw answer if 2xx, else the error it carries."""
        resp = self.pool(addr).request(method, target, body, headers, timeout_s=timeout_s)
        if not resp.ok:
            raise decode_error(addr, resp)
        return resp

    def call(
        self,
        addr: str,
        method: str,
        target: str,
        payload: Any = None,
        *,
        timeout_s: float,
    ) -> Any:
        """A JSON request (``payload`` None: no body) and its decoded JSON answer."""
        body = None if payload is None else json.dumps(payload).encode()
        headers = JSON_HEADERS if body is not None else None
        resp = self.request(addr, method, target, body, headers, timeout_s=timeout_s)
        return decode_json(addr, resp)

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()


def decode_json(addr: str, resp: HttpResponse) -> Any:
    try:
        return json.loads(resp.body)
    except ValueError:
        raise RemotingError(f"{addr} answered with something that is not JSON") from None


def decode_send_json(addr: str, resp: HttpResponse) -> Any:
    """A send result (the producer's hot path): orjson, ~2 us less than json.

    Exact for what a broker answers there (strings and 64-bit integers);
    orjson would read an integer beyond 64 bits as a float, so other answers
    go through ``decode_json``. What orjson refuses (NaN) json decides.
    """
    try:
        return orjson.loads(resp.body)
    except ValueError:
        return decode_json(addr, resp)


def decode_error(addr: str, resp: HttpResponse) -> PyMQError:
    try:
        raw = json.loads(resp.body)
        code, message = str(raw["code"]), str(raw.get("message", ""))
    except (ValueError, KeyError, TypeError):
        return RemotingError(f"{addr} answered HTTP {resp.status}: {resp.body[:200]!r}")
    err = error_for_code(code, message)
    err.fields.update({k: v for k, v in raw.items() if k not in ("code", "message")})
    err.fields["http_status"] = resp.status
    err.fields["addr"] = addr
    return err
