"""Limits both servers put on what one peer may take: request size, connections per
address, and (the broker) a send rate per account.

- ``BodyLimit``: an ASGI middleware answering 413 ``MESSAGE_SIZE_EXCEEDED`` to a REST
  request whose body is larger than the server's ``max_frame_bytes`` (the remoting
  edge's frame cap, applied by its decoder), before the body is read into memory.
- ``RateLimiter``: a token bucket per key (an account's access key, or the peer's
  address when requests are not signed): ``rate`` requests a second, as many at once
  (one second's worth) after a quiet spell. A request over it is answered SYSTEM_BUSY
  (retriable) without being decoded further.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connector.errors import BrokerBusyError, MessageTooLargeError, PyMQError

__all__ = ["BodyLimit", "RateLimiter"]


class RateLimiter:
    """Use from one thread (the server's event loop)."""

    def __init__(self, rate: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self.refused = 0

    def admit(self, key: str, what: str = "sends") -> None:
        """Take a token for ``key``, or raise BrokerBusyError (SYSTEM_BUSY)."""
        now = self.clock()
        tokens, at = self._buckets.get(key, (self.rate, now))
        tokens = min(self.rate, tokens + (now - at) * self.rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            self.refused += 1
            raise BrokerBusyError(
                f"{what} of {key or 'this client'} are over this broker's limit of "
                f"{self.rate:g} a second (send_rate_limit): slow down"
            )
        self._buckets[key] = (tokens - 1, now)
        if len(self._buckets) > 100_000:  # forget keys full again
            self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < 1.0}


class BodyLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await _too_large(send, int(value), self.max_bytes)
                return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(seen)
            return message

        try:
            await self.app(scope, counted, send)
        except _TooLarge as exc:  # a chunked body over the limit: refused as it grows
            await _too_large(send, exc.size, self.max_bytes)


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


async def _too_large(send: Send, size: int, limit: int) -> None:
    err: PyMQError = MessageTooLargeError(
        message=f"the request body is {size} bytes, over this server's {limit} (max_frame_bytes)"
    )
    payload = orjson.dumps(err.to_dict())
    await send({
        "type": "http.response.start",
        "status": 413,
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode())],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": payload})
