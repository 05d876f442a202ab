"""uvicorn's httptools protocol, sending a response's head and body in one write.

uvicorn writes a response head as soon as the app starts the response and
the body when the app sends it: two ``send`` system calls and two TCP
segments per answer, and often two wake-ups of the reader. On a small
machine that is a real share of a request (profiles of the broker's send
path had ~40% of its samples in those two writes). Here the connection's
transport holds a response head back until the next write, which is the
body when the app sends it right away (pymq's handlers and Starlette's
responses do), and sends both at once. A head with nothing after it in the
same event-loop step (a streamed body that is not ready, an empty 204) is
sent at the end of that step, so nothing waits longer than one loop turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["OneWriteHttpToolsProtocol"]

_HEAD_START = b"HTTP/1.1 "
_HEAD_END = b"\r\n\r\n"
_JOIN_BELOW = 64 << 10


class _HeadHoldingTransport:
    """Delegates to the real transport; a write that is a whole response head waits
    for the next write (or the end of the current loop step) and goes out with it."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + bytes(data))
        elif isinstance(data, bytes) and data.startswith(_HEAD_START) and data.endswith(_HEAD_END):
            self._held = data
            self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def write_response(self, head: bytes, body: bytes) -> None:
        """A whole response, after anything held and never held itself; a large body
        goes out with its head without being copied behind it."""
        self.flush()
        if len(body) < _JOIN_BELOW:
            self._transport.write(head + body)
        else:
            self._transport.writelines([head, body])

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` whose responses leave in one write when they can."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        held: Any = _HeadHoldingTransport(transport, self.loop)
        super().connection_made(held)
