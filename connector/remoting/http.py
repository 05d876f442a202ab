"""Blocking keep-alive HTTP/1.1 connections and a per-address pool.

Errors: ``ConnectError`` when no connection can be made (safe to retry
anywhere), ``RemotingTimeoutError`` when the answer does not come in time and
``RemotingError`` when the connection breaks mid-request (the request may or
may not have been processed).
"""

from __future__ import annotations

import select
import socket
import struct
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from connector.errors import ConnectError, RemotingError, RemotingTimeoutError

__all__ = ["HttpConnection", "HttpPool", "HttpResponse"]

_MAX_HEAD = 64 * 1024
_RECV = 256 * 1024
# bodies with at least this much still to come are received in place (_read_body), up
# to the max: a bad Content-Length cannot make the client allocate more than that up front
_DIRECT_BODY_MIN = 64 * 1024
_DIRECT_BODY_MAX = 64 * 1024 * 1024
# a connection used this recently is not polled for a close before it is reused: the
# servers keep idle connections 75 s, and a poll is a system call on every request
_FRESH_S = 1.0


@dataclass(slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased
    body: bytes = b""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConnectError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class HttpConnection:
    """One keep-alive connection; not thread-safe (the pool hands it to one thread)."""

    def __init__(self, addr: str, *, connect_timeout_s: float = 3.0) -> None:
        self.addr = addr
        self.host, self.port = split_addr(addr)
        self.connect_timeout_s = connect_timeout_s
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._host_header = f"Host: {addr}\r\n".encode("latin-1")
        self._timeout_s = 0.0  # the socket's SO_RCVTIMEO / SO_SNDTIMEO; 0: none yet
        self._used = 0.0  # time.monotonic() of the last complete answer

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), self.connect_timeout_s)
        except TimeoutError:
            raise ConnectError(f"connecting to {self.addr} timed out") from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {self.addr}: {exc.strerror or exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A blocking socket with kernel timeouts: Python's own timeouts cost a poll()
        # before every send and recv and an ioctl() per settimeout, 4 of a request's 7
        # system calls (strace of a single send)
        sock.settimeout(None)
        self._timeout_s = 0.0
        self._buf.clear()
        return sock

    def _limit(self, sock: socket.socket, seconds: float) -> None:
        """Bound each send and recv by ``seconds`` (at least 1 ms: 0 means forever)."""
        seconds = max(0.001, seconds)
        if abs(seconds - self._timeout_s) < 0.001:
            return
        whole = int(seconds)
        tv = struct.pack("@ll", whole, int((seconds - whole) * 1_000_000))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
        self._timeout_s = seconds

    def _dropped(self, sock: socket.socket) -> bool:
        """An idle keep-alive socket is readable only if the server closed it.

        Not asked of a connection that answered within ``_FRESH_S``: if the
        server went away since (a restart), the request fails with a
        ``RemotingError``, which producers retry.
        """
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def request(
        self,
        method: str,
        path: str,
        body: bytes | memoryview | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 3.0,
    ) -> HttpResponse:
        sock = self._sock
        if sock is not None and time.monotonic() - self._used > _FRESH_S and self._dropped(sock):
            self.close()
            sock = None
        if sock is None:
            sock = self._sock = self._connect()
        head = [f"{method} {path} HTTP/1.1\r\n".encode("latin-1"), self._host_header]
        if headers:
            head.append("".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1"))
        if body is not None:
            head.append(b"Content-Length: %d\r\n\r\n" % len(body))
        else:
            head.append(b"\r\n")
        deadline = time.monotonic() + timeout_s
        try:
            self._limit(sock, timeout_s)
            if body is not None and len(body) < 16 * 1024:
                sock.sendall(b"".join((*head, body)))
            else:
                sock.sendall(b"".join(head))
                if body:
                    sock.sendall(body)
            resp = self._read_response(sock, deadline, method == "HEAD")
            self._used = time.monotonic()
            return resp
        except (TimeoutError, BlockingIOError):  # BlockingIOError: a kernel timeout
            self.close()
            raise RemotingTimeoutError(
                f"{method} {path} to {self.addr}: no answer within {timeout_s * 1000:.0f} ms"
            ) from None
        except OSError as exc:
            self.close()
            raise RemotingError(f"{method} {path} to {self.addr} failed: {exc}") from None

    def _fill(self, sock: socket.socket, deadline: float) -> None:
        self._before_recv(sock, deadline)
        chunk = sock.recv(_RECV)
        if not chunk:
            raise ConnectionResetError("server closed the connection")
        self._buf += chunk

    def _before_recv(self, sock: socket.socket, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        if remaining < self._timeout_s:
            self._limit(sock, remaining)

    def _read_body(self, sock: socket.socket, deadline: float, length: int) -> bytes:
        """A body of ``length`` bytes (some may be buffered already).

        A large one is received straight into a buffer of its size, then copied
        once into the ``bytes`` returned. Growing ``_buf`` chunk by chunk instead
        costs a ``bytes`` object per recv, a copy of each into ``_buf``, the copies
        of its reallocations, and fresh pages for all of them on every answer.
        """
        buf = self._buf
        if length - len(buf) < _DIRECT_BODY_MIN or length > _DIRECT_BODY_MAX:
            while len(buf) < length:
                self._fill(sock, deadline)
            if len(buf) == length:  # the usual case: one copy, not a slice and a copy
                body = bytes(buf)
                buf.clear()
            else:
                body = bytes(buf[:length])
                del buf[:length]
            return body
        target = bytearray(length)
        have = len(buf)
        target[:have] = buf
        buf.clear()
        with memoryview(target) as view:
            while have < length:
                self._before_recv(sock, deadline)
                got = sock.recv_into(view[have:])
                if not got:
                    raise ConnectionResetError("server closed the connection")
                have += got
        return bytes(target)

    def _read_response(self, sock: socket.socket, deadline: float, head_only: bool) -> HttpResponse:
        buf = self._buf
        while True:
            end = buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(buf) > _MAX_HEAD:
                raise ConnectionResetError("response head too large")
            self._fill(sock, deadline)
        lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
        del buf[: end + 4]
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ConnectionResetError(f"bad status line {lines[0]!r}")
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if head_only or status in (204, 304) or 100 <= status < 200:
            body = b""
        elif "content-length" in headers:
            body = self._read_body(sock, deadline, int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = self._read_chunked(sock, deadline)
        else:  # body until close
            while True:
                try:
                    self._fill(sock, deadline)
                except ConnectionResetError:
                    break
            body = bytes(buf)
            buf.clear()
            self.close()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return HttpResponse(status, headers, body)

    def _read_chunked(self, sock: socket.socket, deadline: float) -> bytes:
        buf = self._buf
        out = bytearray()
        while True:
            while (eol := buf.find(b"\r\n")) < 0:
                self._fill(sock, deadline)
            size = int(bytes(buf[:eol]).split(b";")[0], 16)
            del buf[: eol + 2]
            while len(buf) < size + 2:
                self._fill(sock, deadline)
            out += buf[:size]
            del buf[: size + 2]
            if size == 0:
                return bytes(out)


class HttpPool:
    """Connections to one address, reused LIFO; safe to share between threads."""

    def __init__(self, addr: str, *, max_idle: int = 16, connect_timeout_s: float = 3.0) -> None:
        self.addr = addr
        self.max_idle = max_idle
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[HttpConnection] = []
        self._lock = threading.Lock()
        self.closed = False

    def request(
        self,
        method: str,
        path: str,
        body: bytes | memoryview | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        timeout_s: float = 3.0,
    ) -> HttpResponse:
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = HttpConnection(self.addr, connect_timeout_s=self.connect_timeout_s)
        try:
            resp = conn.request(method, path, body, headers, timeout_s=timeout_s)
        except BaseException:
            conn.close()
            raise
        with self._lock:
            if not self.closed and len(self._idle) < self.max_idle:
                self._idle.append(conn)
                conn = None
        if conn is not None:
            conn.close()
        return resp

    def close(self) -> None:
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
