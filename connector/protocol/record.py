"""The CommitLog record codec: RocketMQ's v1 layout, big-endian, IPv4 hosts.

======  ====================  =====================================
offset  field                 type
======  ====================  =====================================
0       TOTALSIZE             i32, the whole record
4       MAGICCODE             0xdaa320a7
8       BODYCRC               i32, CRC32 of the body & 0x7fffffff
12      QUEUEID               i32
16      FLAG                  i32
20      QUEUEOFFSET           i64, logical offset in the queue
28      PHYSICALOFFSET        i64, the record's own CommitLog offset
36      SYSFLAG               i32
40      BORNTIMESTAMP         i64, ms
48      BORNHOST              ip(4) + port(i32)
56      STORETIMESTAMP        i64, ms
64      STOREHOST             ip(4) + port(i32)
72      RECONSUMETIMES        i32
76      PREPARED_TX_OFFSET    i64
84      BODYLEN               i32, then the body
..      TOPICLEN              i8, then the topic (UTF-8)
..      PROPLEN               i16, then the properties
======  ====================  =====================================

A record that does not fit in what is left of a segment (with 8 bytes to
spare) is replaced by a BLANK record: TOTALSIZE = bytes left, MAGICCODE
0xcbd43194, and the message goes to the next segment.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass

from connector.errors import CorruptRecordError, InvalidTopicError
from connector.protocol.compression import decompress as inflate
from connector.protocol.hashing import crc32
from connector.protocol.message import MessageExt, SysFlag
from connector.protocol.msgid import decode_host, encode_offset_msg_id
from connector.protocol.names import validate_topic
from connector.protocol.properties import decode_properties, properties_well_formed

__all__ = [
    "BLANK_MAGIC_CODE",
    "END_FILE_MIN_BLANK_LENGTH",
    "HEADER",
    "HEADER_SIZE",
    "MESSAGE_MAGIC_CODE",
    "RecordHeader",
    "body_crc",
    "check_record",
    "decode_record",
    "encode_blank",
    "encode_record",
    "read_header",
    "record_size",
]

MESSAGE_MAGIC_CODE = 0xDAA320A7
BLANK_MAGIC_CODE = 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
MAX_TOPIC_BYTES = 127
# readers' bound on an inflated body: what a broker with max_message_size 16 MiB lets in
# (it accepts bodies that inflate to 64 times the limit, checked on the way in)
MAX_INFLATED_BYTES = 64 * 16 * (1 << 20)
MAX_PROPERTIES_BYTES = 32767

HEADER = struct.Struct(">iIiiiqqiq8sq8siqi")
HEADER_SIZE = HEADER.size  # 88: everything up to and including BODYLEN
_BLANK = struct.Struct(">iI")
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

# Field offsets inside a record, for readers that pick single fields.
OFF_TOTALSIZE = 0
OFF_MAGIC = 4
OFF_BODYCRC = 8
OFF_QUEUEID = 12
OFF_QUEUEOFFSET = 20
OFF_PHYSICALOFFSET = 28
OFF_SYSFLAG = 36
OFF_STORETIMESTAMP = 56
OFF_BODYLEN = 84


def body_crc(body: bytes | memoryview) -> int:
    """RocketMQ's ``UtilAll.crc32``: CRC32 masked to a non-negative i32."""
    return crc32(body) & 0x7FFFFFFF


def record_size(body_len: int, topic_len: int, properties_len: int) -> int:
    return HEADER_SIZE + body_len + 1 + topic_len + 2 + properties_len


def encode_record(
    *,
    topic: bytes,
    body: bytes,
    properties: bytes,
    queue_id: int,
    queue_offset: int,
    physical_offset: int,
    flag: int = 0,
    sys_flag: int = 0,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytes:
    """One record in v1 layout; ``topic``/``properties`` are already UTF-8."""
    if len(topic) > MAX_TOPIC_BYTES:
        raise CorruptRecordError(f"topic of {len(topic)} bytes does not fit TOPICLEN (i8)")
    if len(properties) > MAX_PROPERTIES_BYTES:
        raise CorruptRecordError(f"properties of {len(properties)} bytes do not fit PROPLEN")
    total = record_size(len(body), len(topic), len(properties))
    head = HEADER.pack(
        total,
        MESSAGE_MAGIC_CODE,
        body_crc(body) if crc is None else crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        len(body),
    )
    return b"".join(
        (head, body, _I8.pack(len(topic)), topic, _I16.pack(len(properties)), properties)
    )


def encode_blank(length: int) -> bytes:
    """The 8-byte head of a BLANK record that claims ``length`` bytes."""
    return _BLANK.pack(length, BLANK_MAGIC_CODE)


@dataclass(frozen=True, slots=True)
class RecordHeader:
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body_len: int


def read_header(buf: bytes | memoryview, pos: int = 0) -> RecordHeader:
    return RecordHeader(*HEADER.unpack_from(buf, pos))


@dataclass(frozen=True, slots=True)
class RecordCheck:
    """What a validity check found at one position."""

    size: int
    blank: bool
    topic: str = ""
    queue_id: int = 0
    queue_offset: int = 0
    store_timestamp: int = 0
    properties: bytes = b""
    body_len: int = 0


def check_record(
    buf: bytes | bytearray | memoryview | mmap.mmap,
    pos: int,
    *,
    expected_offset: int,
    limit: int,
    check_crc: bool = True,
) -> RecordCheck:
    """Validate the record at ``buf[pos:]`` without trusting any of its bytes.

    ``expected_offset`` is the CommitLog offset of ``pos``; ``limit`` is the
    end of the readable region. Raises CorruptRecordError saying what is wrong
    (bad magic, size out of range, body CRC mismatch, PHYSICALOFFSET not equal
    to the record's own position, lengths that do not add up, a topic that is
    not a valid name, properties that are not well formed).
    """
    if limit - pos < _BLANK.size:
        raise CorruptRecordError("no room for a record header", position=expected_offset)
    total, magic = _BLANK.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        if total != limit - pos:
            raise CorruptRecordError(
                f"BLANK record claims {total} bytes, {limit - pos} are left",
                position=expected_offset,
            )
        return RecordCheck(size=total, blank=True)
    if magic != MESSAGE_MAGIC_CODE:
        raise CorruptRecordError(f"bad magic code {magic:#010x}", position=expected_offset)
    if total < HEADER_SIZE + 3 or total > limit - pos:
        raise CorruptRecordError(f"record size {total} out of range", position=expected_offset)
    h = HEADER.unpack_from(buf, pos)
    crc, queue_id, queue_offset, phys, store_ts, body_len = h[2], h[3], h[5], h[6], h[10], h[14]
    if phys != expected_offset:
        raise CorruptRecordError(
            f"PHYSICALOFFSET {phys} is not the record's position {expected_offset}",
            position=expected_offset,
        )
    if body_len < 0 or HEADER_SIZE + body_len + 3 > total:
        raise CorruptRecordError(f"body length {body_len} out of range", position=expected_offset)
    body_start = pos + HEADER_SIZE
    topic_pos = body_start + body_len
    topic_len = buf[topic_pos]
    if topic_len > MAX_TOPIC_BYTES or topic_pos + 1 + topic_len + 2 > pos + total:
        raise CorruptRecordError(f"topic length {topic_len} out of range", position=expected_offset)
    props_pos = topic_pos + 1 + topic_len
    (props_len,) = _I16.unpack_from(buf, props_pos)
    if props_len < 0 or props_pos + 2 + props_len != pos + total:
        raise CorruptRecordError("lengths do not add up to TOTALSIZE", position=expected_offset)
    if check_crc and crc32(buf[body_start:topic_pos]) & 0x7FFFFFFF != crc:
        raise CorruptRecordError("body CRC mismatch", position=expected_offset)
    try:
        topic = bytes(buf[topic_pos + 1 : props_pos]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecordError("topic is not UTF-8", position=expected_offset) from exc
    try:
        validate_topic(topic)
    except InvalidTopicError as exc:
        raise CorruptRecordError(
            f"topic {topic!r} is not a valid name", position=expected_offset
        ) from exc
    properties = bytes(buf[props_pos + 2 : props_pos + 2 + props_len])
    if not properties_well_formed(properties):  # e.g. zeros: the record's end was never written
        raise CorruptRecordError(
            "properties are not name\\x01value\\x02 pairs", position=expected_offset
        )
    return RecordCheck(
        size=total,
        blank=False,
        topic=topic,
        queue_id=queue_id,
        queue_offset=queue_offset,
        store_timestamp=store_ts,
        properties=properties,
        body_len=body_len,
    )


def decode_record(
    buf: bytes | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = True,
    decompress: bool = True,
    with_body: bool = True,
) -> MessageExt:
    """Decode one message record; raise CorruptRecordError on any inconsistency.

    ``with_body=False``: every field but the body (left empty, its CRC unchecked),
    for a caller that needs only the header and properties of a large record."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError("record shorter than its header", position=pos)
    h = HEADER.unpack_from(buf, pos)
    total, magic, crc, body_len = h[0], h[1], h[2], h[14]
    if magic != MESSAGE_MAGIC_CODE:
        raise CorruptRecordError(f"bad magic code {magic:#010x}", position=pos)
    if (
        total < HEADER_SIZE + 3
        or pos + total > len(buf)
        or body_len < 0
        or HEADER_SIZE + body_len + 3 > total
    ):
        raise CorruptRecordError(f"record size {total} out of range", position=pos)
    body_start = pos + HEADER_SIZE
    body = bytes(buf[body_start : body_start + body_len]) if with_body else b""
    if with_body and check_crc and crc32(body) & 0x7FFFFFFF != crc:
        raise CorruptRecordError("body CRC mismatch", position=pos)
    topic_pos = body_start + body_len
    topic_len = buf[topic_pos]
    props_pos = topic_pos + 1 + topic_len
    if topic_len > MAX_TOPIC_BYTES or props_pos + 2 > pos + total:
        raise CorruptRecordError("topic length out of range", position=pos)
    (props_len,) = _I16.unpack_from(buf, props_pos)
    if props_len < 0 or props_pos + 2 + props_len != pos + total:
        raise CorruptRecordError("lengths do not add up to TOTALSIZE", position=pos)
    sys_flag = h[7]
    if with_body and decompress and sys_flag & SysFlag.COMPRESSED:
        try:
            body = inflate(body, sys_flag, limit=MAX_INFLATED_BYTES)
        except ValueError as exc:
            raise CorruptRecordError(
                f"compressed body does not inflate: {exc}", position=pos
            ) from exc
    store_host = h[11]
    return MessageExt(
        topic=bytes(buf[topic_pos + 1 : props_pos]).decode("utf-8", errors="replace"),
        body=body,
        queue_id=h[3],
        queue_offset=h[5],
        commit_log_offset=h[6],
        properties=decode_properties(buf[props_pos + 2 : props_pos + 2 + props_len]),
        flag=h[4],
        sys_flag=sys_flag,
        body_crc=crc,
        born_timestamp=h[8],
        born_host=decode_host(h[9]),
        store_timestamp=h[10],
        store_host=decode_host(store_host),
        reconsume_times=h[12],
        prepared_transaction_offset=h[13],
        store_size=total,
        offset_msg_id=encode_offset_msg_id(store_host, h[6]),
    )
