"""The frames of the HA port: pure encoders and an incremental decoder.

Every frame is ``u32 length | u8 type | payload`` (length counts the type
byte and the payload). The handshake is JSON; the data path is binary:

======  ===========  =========================================================
type    direction    payload
======  ===========  =========================================================
HELLO   slave ->     JSON: magic, version, cluster, broker_name, broker_id,
                     segment_size, max_offset, epochs ``[[epoch, start]...]``
WELCOME -> slave     JSON: start_offset (the slave truncates to it and the
                     stream starts there), epochs (the master's), confirm_offset
REFUSE  -> slave     JSON: code, message (the connection closes)
DATA    -> slave     i64 offset, i64 confirm offset, i32 epoch, CommitLog bytes
BEAT    -> slave     i64 master max offset, i64 confirm offset
ACK     slave ->     i64 the slave's max offset (all bytes below it written)
META    both ways    JSON: topics, consumer offsets, delay progress (master ->
                     slave); consumer offsets committed on the slave (slave ->)
======  ===========  =========================================================
"""

from __future__ import annotations

import enum
import struct
from typing import Any

import orjson

__all__ = [
    "HA_MAGIC",
    "HA_VERSION",
    "MAX_CONTROL_FRAME",
    "Frame",
    "FrameDecoder",
    "HaFrameError",
    "ack",
    "beat",
    "data_header",
    "json_frame",
    "unpack_ack",
    "unpack_beat",
    "unpack_data",
    "unpack_json",
]

HA_MAGIC = "pymq-ha"
HA_VERSION = 1
MAX_CONTROL_FRAME = 16 << 20  # a JSON frame (metadata of many topics and groups)
_LEN = struct.Struct(">IB")
_DATA = struct.Struct(">qqi")
_BEAT = struct.Struct(">qq")
_ACK = struct.Struct(">q")


class Frame(enum.IntEnum):
    HELLO = 1
    WELCOME = 2
    REFUSE = 3
    DATA = 4
    BEAT = 5
    ACK = 6
    META = 7


class HaFrameError(Exception):
    """Bytes on the HA port that are not a frame of this protocol."""


def json_frame(kind: Frame, value: Any) -> bytes:
    payload = orjson.dumps(value)
    return _LEN.pack(len(payload) + 1, kind) + payload


def data_header(offset: int, confirm: int, epoch: int, size: int) -> bytes:
    """The header of a DATA frame; ``size`` CommitLog bytes follow it."""
    return _LEN.pack(_DATA.size + size + 1, Frame.DATA) + _DATA.pack(offset, confirm, epoch)


def beat(max_offset: int, confirm: int) -> bytes:
    return _LEN.pack(_BEAT.size + 1, Frame.BEAT) + _BEAT.pack(max_offset, confirm)


def ack(offset: int) -> bytes:
    return _LEN.pack(_ACK.size + 1, Frame.ACK) + _ACK.pack(offset)


def unpack_data(payload: memoryview) -> tuple[int, int, int, memoryview]:
    if len(payload) < _DATA.size:
        raise HaFrameError("DATA frame shorter than its header")
    offset, confirm, epoch = _DATA.unpack_from(payload)
    if offset < 0 or confirm < 0:
        raise HaFrameError("DATA frame with a negative offset")
    return offset, confirm, epoch, payload[_DATA.size :]


def unpack_beat(payload: memoryview) -> tuple[int, int]:
    if len(payload) != _BEAT.size:
        raise HaFrameError("BEAT frame of the wrong size")
    max_offset, confirm = _BEAT.unpack(payload)
    return int(max_offset), int(confirm)


def unpack_ack(payload: memoryview) -> int:
    if len(payload) != _ACK.size:
        raise HaFrameError("ACK frame of the wrong size")
    (offset,) = _ACK.unpack(payload)
    if offset < 0:
        raise HaFrameError("ACK of a negative offset")
    return int(offset)


def unpack_json(payload: memoryview) -> dict[str, Any]:
    try:
        value = orjson.loads(payload)
    except orjson.JSONDecodeError as exc:
        raise HaFrameError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise HaFrameError("not a JSON object")
    return value


class FrameDecoder:
    """Cuts frames out of a byte stream. ``max_frame`` bounds every frame; until the
    handshake is done the caller keeps it small (``set_limit``)."""

    def __init__(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    def set_limit(self, max_frame: int) -> None:
        self.max_frame = max_frame

    def feed(self, data: bytes) -> list[tuple[Frame, memoryview]]:
        buf = self._buf
        buf += data
        out: list[tuple[Frame, memoryview]] = []
        pos = 0
        n = len(buf)
        while n - pos >= _LEN.size:
            length, kind = _LEN.unpack_from(buf, pos)
            if length < 1 or length > self.max_frame:
                raise HaFrameError(f"frame of {length} bytes (at most {self.max_frame})")
            try:
                frame = Frame(kind)
            except ValueError:
                raise HaFrameError(f"unknown frame type {kind}") from None
            end = pos + 4 + length
            if end > n:
                break
            with memoryview(buf) as view:
                out.append((frame, memoryview(bytes(view[pos + _LEN.size : end]))))
            pos = end
        if pos:
            del buf[:pos]
        return out
