"""Message ids.

* ``offset_msg_id``: store host ip(4) + port(4) + CommitLog offset(8) as 32
  upper-case hex chars, RocketMQ's ``MessageDecoder.createMessageId``. It can
  be decoded back to the broker address and the record's physical offset.
* UNIQ_KEY: the producer's id, fixed before the first attempt and kept across
  retries: ip(4) + pid(2) + random(4) + ms since the start of the month(4) +
  counter(2), also 32 hex chars (RocketMQ's ``MessageClientIDSetter`` shape).
"""

from __future__ import annotations

import functools
import os
import socket
import struct
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from connector.errors import MessageIllegalError

__all__ = [
    "IdBlock",
    "UniqKeyGenerator",
    "decode_host",
    "decode_offset_msg_id",
    "encode_host",
    "encode_offset_msg_id",
    "is_msg_id",
]

_HOST = struct.Struct(">4sI")
_MSG_ID = struct.Struct(">4sIq")


def encode_host(ip: str, port: int) -> bytes:
    """8 bytes: IPv4 address then port as a big-endian i32 (RocketMQ's host encoding)."""
    try:
        packed = socket.inet_aton(ip)
    except OSError as exc:
        raise MessageIllegalError(f"not an IPv4 address: {ip!r}") from exc
    if not 0 <= port <= 0xFFFF:
        raise MessageIllegalError(f"port out of range: {port}")
    return _HOST.pack(packed, port)


@functools.lru_cache(maxsize=1024)  # a pull answer names the same few hosts again and again
def decode_host(data: bytes) -> str:
    ip, port = _HOST.unpack(data)
    return f"{socket.inet_ntoa(ip)}:{port}"


def encode_offset_msg_id(store_host: bytes, commit_log_offset: int) -> str:
    """``store_host`` is the 8-byte host encoding; returns 32 upper-case hex chars."""
    return (store_host + struct.pack(">q", commit_log_offset)).hex().upper()


def hex_ids(prefix: str, values: Sequence[int] | Any, digits: int) -> list[str]:
    """``prefix`` + each value as ``digits`` upper-case hex digits (its low bits), built
    in numpy: many ids cost a fraction of an f-string each."""
    import numpy as np  # noqa: PLC0415 - numpy stays out of the servers' import path

    hex_digits = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
    width = len(prefix) + digits
    out = np.empty((len(values), width + 1), dtype=np.uint8)
    out[:, : len(prefix)] = np.frombuffer(prefix.encode("ascii"), dtype=np.uint8)
    out[:, width] = 32  # a space after each id: one decode and one split make the strs
    v = np.asarray(values, dtype=np.uint64)
    shifts = np.arange(4 * (digits - 1), -1, -4, dtype=np.uint64)  # the last digit: lowest nibble
    out[:, len(prefix) : width] = hex_digits[(v[:, None] >> shifts) & np.uint64(15)]
    return out.tobytes().decode("ascii").split()


def offset_msg_ids(store_host_hex: str, offsets: Sequence[int]) -> tuple[str, ...]:
    """``store_host_hex`` (16 hex chars) + each offset as 16 hex chars: in numpy for
    many, with f-strings for a few (numpy's fixed cost is ~15 us; an f-string ~0.3)."""
    if len(offsets) <= 32:
        return tuple([f"{store_host_hex}{offset:016X}" for offset in offsets])
    return tuple(hex_ids(store_host_hex, offsets, 16))


def is_msg_id(text: str) -> bool:
    """32 hex characters: the shape of both ids, the offset msgId and the UNIQ_KEY."""
    return len(text) == 32 and all(c in "0123456789abcdefABCDEF" for c in text)


def decode_offset_msg_id(msg_id: str) -> tuple[str, int]:
    """Return ``("ip:port", commit_log_offset)``; raise MessageIllegalError if malformed."""
    if not isinstance(msg_id, str) or len(msg_id) != 32:
        raise MessageIllegalError(f"an offset msgId is 32 hex chars, got {msg_id!r}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise MessageIllegalError(f"offset msgId {msg_id!r} is not hex") from exc
    if len(raw) != _MSG_ID.size:  # fromhex skips whitespace: "  " + 30 hex chars
        raise MessageIllegalError(f"offset msgId {msg_id!r} is not hex")
    ip, port, offset = _MSG_ID.unpack(raw)
    if offset < 0:
        raise MessageIllegalError(f"offset msgId {msg_id!r} holds a negative offset")
    return f"{socket.inet_ntoa(ip)}:{port}", offset


def _local_ip() -> bytes:
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return b"\x7f\x00\x00\x01"


class UniqKeyGenerator:
    """Thread-safe generator of UNIQ_KEY ids, unique per process and time."""

    def __init__(self) -> None:
        self._prefix = (
            (_local_ip() + struct.pack(">H", os.getpid() & 0xFFFF) + os.urandom(4)).hex().upper()
        )
        self._lock = threading.Lock()
        self._counter = 0
        self._month_start_ms = 0
        self._next_month_ms = 0

    def _month_bounds(self, now_ms: int) -> None:
        now = datetime.fromtimestamp(now_ms / 1000, tz=timezone.utc)
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        nxt = (
            start.replace(year=start.year + 1, month=1)
            if start.month == 12
            else start.replace(month=start.month + 1)
        )
        self._month_start_ms = int(start.timestamp() * 1000)
        self._next_month_ms = int(nxt.timestamp() * 1000)

    def next_id(self) -> str:
        now_ms = int(time.time() * 1000)
        with self._lock:
            if now_ms >= self._next_month_ms or now_ms < self._month_start_ms:
                self._month_bounds(now_ms)
            n = self._counter & 0xFFFF
            self._counter += 1
            delta = (now_ms - self._month_start_ms) & 0xFFFFFFFF
        return f"{self._prefix}{delta:08X}{n:04X}"

    def next_block(self, count: int) -> IdBlock:
        """``count`` ids at once (one clock read, one lock), as an ``IdBlock``: compiled
        encoders write them straight into a batch; the strs are made only if read."""
        now_ms = int(time.time() * 1000)
        with self._lock:
            if now_ms >= self._next_month_ms or now_ms < self._month_start_ms:
                self._month_bounds(now_ms)
            first = self._counter
            self._counter += count
            delta = (now_ms - self._month_start_ms) & 0xFFFFFFFF
        return IdBlock(f"{self._prefix}{delta:08X}", first & 0xFFFF, count)

    def next_ids(self, count: int) -> list[str]:
        """``count`` ids at once (one clock read, one lock): for batches."""
        return self.next_block(count).tolist()


class IdBlock(Sequence[str]):
    """Consecutive UNIQ_KEYs from one ``UniqKeyGenerator`` call: ``head`` (28 hex
    chars: the generator's prefix and the time) then a 16-bit counter from
    ``first``, as 4 hex chars, wrapping. A read-only sequence of str whose strs
    are made on first read: a Spark task sending a million rows never needs them."""

    __slots__ = ("_strs", "first", "head", "size")

    def __init__(self, head: str, first: int, count: int) -> None:
        if len(head) != 28 or not 0 <= first <= 0xFFFF or count < 0:
            raise ValueError("an id block is a 28-char head, a 16-bit counter and a count")
        self.head, self.first, self.size = head, first, count
        self._strs: list[str] | None = None

    def tolist(self) -> list[str]:
        if self._strs is None:
            head, first, count = self.head, self.first, self.size
            if count > 32:
                import numpy as np  # noqa: PLC0415 - numpy stays out of the servers' import path

                self._strs = hex_ids(head, np.arange(first, first + count, dtype=np.uint64), 4)
            else:
                self._strs = [f"{head}{(first + i) & 0xFFFF:04X}" for i in range(count)]
        return self._strs

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: Any) -> Any:
        return self.tolist()[index]

    def __iter__(self) -> Any:
        return iter(self.tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IdBlock):
            return (self.head, self.first, self.size) == (other.head, other.first, other.size)
        return isinstance(other, Sequence) and list(other) == self.tolist()

    __hash__ = None  # type: ignore[assignment]  # mutable-looking, like a list

    def __repr__(self) -> str:
        return f"IdBlock({self.head!r}, first={self.first}, size={self.size})"
