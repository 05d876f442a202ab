"""Batch encoding: many messages of one topic in one request body.

Each message is RocketMQ's ``MessageDecoder.encodeMessage`` layout, with the
magic and body CRC filled in so a broker can reject a damaged batch whole
(RocketMQ's own clients leave both zero: such an entry is taken, its CRC
computed, not checked):

    TOTALSIZE i32 | MAGICCODE i32 (0xdaa320a7) | BODYCRC i32 | FLAG i32
    | BODYLEN i32 | body | PROPLEN i16 | properties

TOTALSIZE counts the whole entry (22 + body + properties bytes).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from connector.errors import MessageIllegalError, MessageTooLargeError
from connector.protocol.hashing import crc32
from connector.protocol.properties import properties_well_formed
from connector.protocol.record import MAX_PROPERTIES_BYTES, MESSAGE_MAGIC_CODE

__all__ = [
    "BATCH_ENTRY_OVERHEAD",
    "DecodedBatch",
    "PreparedBatch",
    "decode_batch",
    "encode_batch",
    "encode_entry",
]

_HEAD = struct.Struct(">iIiii")  # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN
_PROPLEN = struct.Struct(">h")
BATCH_ENTRY_OVERHEAD = _HEAD.size + _PROPLEN.size


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A batch already in the batch encoding, built outside ``Producer`` (column-wise, by
    the Spark sink) and sent with ``Producer.send_prepared_batch``.

    ``msg_ids`` are the messages' UNIQ_KEYs in order (``Producer.new_msg_ids``
    makes them, as an ``IdBlock``; the properties must carry the same), ``record_sizes`` the
    size each message will have as a stored record (``record.record_size``).
    """

    topic: str
    data: bytes | memoryview
    msg_ids: Sequence[str]
    record_sizes: list[int]


@dataclass(slots=True)
class DecodedBatch:
    """Columns of a decoded batch: one list entry per message."""

    bodies: list[bytes]
    flags: list[int]
    properties: list[bytes]
    crcs: list[int]

    def __len__(self) -> int:
        return len(self.bodies)


def encode_batch(entries: Sequence[tuple[bytes, int, bytes]]) -> bytes:
    """Encode ``(body, flag, properties)`` triples; properties already encoded."""
    parts: list[bytes] = []
    head = _HEAD.pack
    for body, flag, props in entries:
        if len(props) > MAX_PROPERTIES_BYTES:
            raise MessageIllegalError(
                f"properties of {len(props)} bytes exceed {MAX_PROPERTIES_BYTES}"
            )
        total = BATCH_ENTRY_OVERHEAD + len(body) + len(props)
        crc = crc32(body) & 0x7FFFFFFF
        parts += (
            head(total, MESSAGE_MAGIC_CODE, crc, flag, len(body)),
            body,
            _PROPLEN.pack(len(props)),
            props,
        )
    return b"".join(parts)


def encode_entry(body: bytes, props: bytes) -> bytes:
    """One entry of flag 0, as ``encode_batch`` encodes it, without its checks: for a
    caller that made ``props`` itself (well formed and short: a message of only a
    body, tags and its UNIQ_KEY, the common case and the producer's fast path)."""
    n, plen = len(body), len(props)
    return b"".join(
        (
            _HEAD.pack(
                BATCH_ENTRY_OVERHEAD + n + plen, MESSAGE_MAGIC_CODE,
                crc32(body) & 0x7FFFFFFF, 0, n,
            ),
            body,
            _PROPLEN.pack(plen),
            props,
        )
    )  # fmt: skip


def decode_batch(
    data: bytes | memoryview, *, max_message_size: int, max_count: int = 1 << 20
) -> DecodedBatch:
    """Decode and check a whole batch; any defect rejects all of it.

    Checks every entry's magic, that each length lies inside the entry and the
    entry inside the buffer, that the body CRC matches, that no body is empty
    or larger than ``max_message_size``, that the properties are well formed
    (see ``properties_well_formed``) and that no bytes trail the last entry.
    """
    buf = memoryview(data)
    end = len(buf)
    if end == 0:
        raise MessageIllegalError("empty batch")
    bodies: list[bytes] = []
    flags: list[int] = []
    props: list[bytes] = []
    crcs: list[int] = []
    pos = 0
    unpack_head = _HEAD.unpack_from
    while pos < end:
        index = len(bodies)
        if index >= max_count:
            raise MessageIllegalError(f"batch holds more than {max_count} messages")
        if end - pos < BATCH_ENTRY_OVERHEAD:
            raise MessageIllegalError(f"batch truncated inside entry {index}")
        total, magic, crc, flag, body_len = unpack_head(buf, pos)
        if magic not in (MESSAGE_MAGIC_CODE, 0):
            raise MessageIllegalError(f"batch entry {index} has a bad magic code {magic:#x}")
        if total < BATCH_ENTRY_OVERHEAD or total > end - pos:
            raise MessageIllegalError(f"batch entry {index} claims {total} bytes, {end - pos} left")
        if body_len <= 0:
            raise MessageIllegalError(f"batch entry {index} has an empty body")
        if body_len > max_message_size:
            raise MessageTooLargeError(body_len, max_message_size)
        body_end = pos + _HEAD.size + body_len
        if body_end + _PROPLEN.size > pos + total:
            raise MessageIllegalError(f"batch entry {index}: body length overruns the entry")
        (props_len,) = _PROPLEN.unpack_from(buf, body_end)
        if props_len < 0 or body_end + _PROPLEN.size + props_len != pos + total:
            raise MessageIllegalError(f"batch entry {index}: lengths do not add up")
        body = bytes(buf[pos + _HEAD.size : body_end])
        actual = crc32(body) & 0x7FFFFFFF
        if magic == 0:  # RocketMQ's clients leave magic and CRC zero (MessageDecoder)
            crc = actual
        elif actual != crc:
            raise MessageIllegalError(f"batch entry {index}: body CRC mismatch")
        raw_props = bytes(buf[body_end + _PROPLEN.size : pos + total])
        if not properties_well_formed(raw_props):
            raise MessageIllegalError(
                f"batch entry {index}: properties are not name\\x01value\\x02 pairs"
            )
        bodies.append(body)
        flags.append(flag)
        props.append(raw_props)
        crcs.append(crc)
        pos += total
    return DecodedBatch(bodies=bodies, flags=flags, properties=props, crcs=crcs)
