"""Vectorised CommitLog encoding for batches.

The fixed fields of N records are filled column by column in one numpy
structured array; the variable parts (bodies, properties) are interleaved
with slices of it and joined once. Output is byte-for-byte what
``connector.protocol.record.encode_record`` writes, message by message.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from connector.protocol.record import HEADER_SIZE, MESSAGE_MAGIC_CODE

__all__ = ["CQ_DTYPE", "encode_records", "record_sizes"]

# The ConsumeQueue entry: commitLogOffset i64, size i32, tagsCode i64, big-endian.
CQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
_MID = 3  # TOPICLEN i8 + PROPLEN i16 around the topic


@lru_cache(maxsize=64)
def _record_dtype(topic_len: int) -> np.dtype[Any]:
    return np.dtype(
        [
            ("total", ">i4"),
            ("magic", ">u4"),
            ("crc", ">i4"),
            ("queue_id", ">i4"),
            ("flag", ">i4"),
            ("queue_offset", ">i8"),
            ("physical_offset", ">i8"),
            ("sys_flag", ">i4"),
            ("born_timestamp", ">i8"),
            ("born_host", "V8"),
            ("store_timestamp", ">i8"),
            ("store_host", "V8"),
            ("reconsume_times", ">i4"),
            ("prepared_tx_offset", ">i8"),
            ("body_len", ">i4"),
            ("topic_len", "i1"),
            ("topic", f"S{topic_len}"),
            ("props_len", ">i2"),
        ]
    )


def record_sizes(body_lens: np.ndarray, props_lens: np.ndarray, topic_len: int) -> np.ndarray:
    sizes: np.ndarray = body_lens + props_lens + (HEADER_SIZE + _MID + topic_len)
    return sizes


def encode_records(
    *,
    topic: bytes,
    queue_id: int,
    first_queue_offset: int,
    physical_offsets: np.ndarray,
    sizes: np.ndarray,
    body_lens: np.ndarray,
    props_lens: np.ndarray,
    bodies: Sequence[bytes],
    properties: Sequence[bytes],
    crcs: np.ndarray,
    flags: np.ndarray | int,
    sys_flag: np.ndarray | int,
    born_timestamp: np.ndarray | int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int = 0,
) -> bytes:
    """Encode N records that follow each other in the log; returns their bytes."""
    n = len(bodies)
    dtype = _record_dtype(len(topic))
    rec = np.empty(n, dtype=dtype)
    rec["total"] = sizes
    rec["magic"] = MESSAGE_MAGIC_CODE
    rec["crc"] = crcs
    rec["queue_id"] = queue_id
    rec["flag"] = flags
    rec["queue_offset"] = np.arange(first_queue_offset, first_queue_offset + n, dtype=np.int64)
    rec["physical_offset"] = physical_offsets
    rec["sys_flag"] = sys_flag
    rec["born_timestamp"] = born_timestamp
    rec["born_host"] = np.void(born_host)
    rec["store_timestamp"] = store_timestamp
    rec["store_host"] = np.void(store_host)
    rec["reconsume_times"] = reconsume_times
    rec["prepared_tx_offset"] = 0
    rec["body_len"] = body_lens
    rec["topic_len"] = len(topic)
    rec["topic"] = topic
    rec["props_len"] = props_lens
    view = memoryview(rec.tobytes())
    width = dtype.itemsize
    stops = range(0, n * width, width)
    pieces: list[Any] = [None] * (4 * n)
    pieces[0::4] = [view[i : i + HEADER_SIZE] for i in stops]
    pieces[1::4] = bodies
    pieces[2::4] = [view[i + HEADER_SIZE : i + width] for i in stops]
    pieces[3::4] = properties
    return b"".join(pieces)
