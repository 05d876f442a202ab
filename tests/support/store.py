"""The store tests' helpers: tiny configs, messages to put, and a raw CommitLog walker
that reads segment files the way an outside tool would.

The ``make_store`` fixture (started stores under tmp_path) is tests/broker/store/conftest.py's.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.store.inner import BatchInner, MessageInner
from broker.store.results import PutMessageResult, PutMessageStatus
from broker.store.store import MessageStore
from connector.protocol.message import Message

MESSAGE_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194
# Everything up to and including BODYLEN, RocketMQ's v1 layout, big-endian.
RAW_HEADER = struct.Struct(">iIiiiqqiq8sq8siqi")
RAW_HEADER_SIZE = RAW_HEADER.size  # 88
TOPIC = "TopicTest"
BORN_TS = 1_700_000_000_000

# Small everything, and no background cleaner racing the retention tests.
SMALL: dict[str, Any] = {
    "mapped_file_size_commit_log": 65536,
    "consume_queue_entries_per_file": 100,
    "max_hash_slot_num": 64,
    "max_index_num": 1000,
    "clean_resource_interval_ms": 3_600_000,
    "flush_interval_consume_queue_ms": 3_600_000,
    # each checkpoint a test takes flushes the index too (the lag of the default interval
    # is tested on its own, test_store_index.py)
    "flush_interval_index_ms": 1,
}


def record_len(body_len: int, topic: str = TOPIC, props_len: int = 0) -> int:
    """Bytes a record takes in the CommitLog (computed here, independently of the store)."""
    return RAW_HEADER_SIZE + body_len + 1 + len(topic.encode()) + 2 + props_len


StoreFactory = Callable[..., MessageStore]


def inner(
    body: bytes,
    *,
    topic: str = TOPIC,
    queue_id: int = 0,
    tags: str | None = None,
    keys: list[str] | None = None,
    uniq_key: str | None = None,
    properties: dict[str, str] | None = None,
) -> MessageInner:
    msg = Message(topic=topic, body=body, tags=tags, keys=keys or [], properties=properties or {})
    return MessageInner.from_message(
        msg, queue_id=queue_id, born_timestamp=BORN_TS, uniq_key=uniq_key
    )


def put(store: MessageStore, body: bytes, **kwargs: Any) -> PutMessageResult:
    """Append one message and insist it was stored."""
    result = store.put_message(inner(body, **kwargs))
    assert result.status is PutMessageStatus.PUT_OK, result
    assert result.append is not None
    return result


def put_batch(
    store: MessageStore,
    bodies: list[bytes],
    *,
    topic: str = TOPIC,
    queue_id: int = 0,
    tags: str | None = None,
) -> PutMessageResult:
    msgs = [Message(topic=topic, body=b, tags=tags) for b in bodies]
    result = store.put_messages(
        BatchInner.from_messages(msgs, queue_id=queue_id, born_timestamp=BORN_TS)
    )
    assert result.status is PutMessageStatus.PUT_OK, result
    assert result.append is not None
    return result


@dataclass(frozen=True)
class RawRecord:
    """One record as parsed from a segment file's bytes."""

    position: int  # global CommitLog offset where it starts
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    queue_offset: int
    physical_offset: int
    store_timestamp: int
    body: bytes
    topic: str
    properties: bytes

    @property
    def blank(self) -> bool:
        return self.magic == BLANK_MAGIC


def segment_files(commit_log_dir: Path) -> list[Path]:
    return sorted(p for p in commit_log_dir.iterdir() if p.name.isdigit() and len(p.name) == 20)


def walk_commit_log(commit_log_dir: Path) -> list[RawRecord]:
    """Every record (BLANKs included) of every segment, from each file's byte 0.

    Reads the files with ``open()``, independently of the store's code, and
    checks what every reader relies on: the magic, TOTALSIZE adding up,
    PHYSICALOFFSET equal to the record's own position and the body CRC.
    A segment ends at a BLANK (which must claim exactly what is left) or at
    zeros (the unwritten tail of the active segment).
    """
    out: list[RawRecord] = []
    expected_start: int | None = None
    for path in segment_files(commit_log_dir):
        start = int(path.name)
        if expected_start is not None:
            assert start == expected_start, f"segment {path.name} leaves a gap"
        data = path.read_bytes()
        expected_start = start + len(data)
        pos = 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">iI", data, pos)
            if total == 0 and magic == 0:
                assert not data[pos:].strip(b"\0"), "bytes after the end of data"
                break
            if magic == BLANK_MAGIC:
                assert total == len(data) - pos, "BLANK does not claim the rest of the segment"
                out.append(RawRecord(start + pos, total, magic, 0, 0, 0, 0, 0, b"", "", b""))
                break
            assert magic == MESSAGE_MAGIC, f"bad magic {magic:#x} at {start + pos}"
            assert RAW_HEADER_SIZE + 3 <= total <= len(data) - pos
            h = RAW_HEADER.unpack_from(data, pos)
            body_len = h[14]
            body = data[pos + RAW_HEADER_SIZE : pos + RAW_HEADER_SIZE + body_len]
            tpos = pos + RAW_HEADER_SIZE + body_len
            topic_len = data[tpos]
            topic = data[tpos + 1 : tpos + 1 + topic_len].decode()
            (props_len,) = struct.unpack_from(">h", data, tpos + 1 + topic_len)
            ppos = tpos + 3 + topic_len
            assert ppos + props_len == pos + total, "field lengths do not add up to TOTALSIZE"
            assert h[6] == start + pos, "PHYSICALOFFSET is not the record's own position"
            assert h[2] == zlib.crc32(body) & 0x7FFFFFFF, "BODYCRC mismatch"
            out.append(
                RawRecord(
                    position=start + pos,
                    total_size=total,
                    magic=magic,
                    body_crc=h[2],
                    queue_id=h[3],
                    queue_offset=h[5],
                    physical_offset=h[6],
                    store_timestamp=h[10],
                    body=body,
                    topic=topic,
                    properties=data[ppos : ppos + props_len],
                )
            )
            pos += total
    return out


def messages_only(records: list[RawRecord]) -> list[RawRecord]:
    return [r for r in records if not r.blank]
