"""Arrow columns -> the batch encoding, in compiled code: the sink's path for plain rows.

Rows with only a ``body`` (binary or string) and optionally ``tags`` need
no Python object per row: ``encode_columns`` writes each message's batch
entry (``connector.protocol.batch``: TOTALSIZE, MAGIC, BODYCRC, FLAG,
BODYLEN, body, PROPLEN, properties ``UNIQ_KEY`` and ``TAGS``) straight from
the Arrow buffers, CRC included, and returns a ``PreparedBatch`` for
``Producer.send_prepared_batch``. The same checks as ``Producer.send_batch``:
no null or empty body, none above the size limit, tags without the
properties separators.
"""

# numba needs explicit np.int64 casts that mypy types apart from int
# mypy: disable-error-code="return-value,arg-type"

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from numba import njit

from connector.errors import MessageIllegalError, MessageTooLargeError
from connector.protocol.batch import BATCH_ENTRY_OVERHEAD, PreparedBatch
from connector.protocol.jit import CRC_TABLE, copy_bytes, crc32_masked
from connector.protocol.record import MESSAGE_MAGIC_CODE, record_size

__all__ = ["arrow_bytes", "encode_columns"]

UNIQ_PREFIX = b"UNIQ_KEY\x01"
TAGS_PREFIX = b"TAGS\x01"
_UNIQ = np.frombuffer(UNIQ_PREFIX, dtype=np.uint8)
_TAGS = np.frombuffer(TAGS_PREFIX, dtype=np.uint8)
ID_LEN = 32


@njit(cache=True, nogil=True, inline="always")
def _put32(out: Any, pos: int, v: int) -> None:  # pragma: no cover - compiled
    at = np.uint64(pos)  # unsigned: no negative-index branch (see connector.protocol.jit)
    out[at] = (v >> 24) & 0xFF
    out[at + np.uint64(1)] = (v >> 16) & 0xFF
    out[at + np.uint64(2)] = (v >> 8) & 0xFF
    out[at + np.uint64(3)] = v & 0xFF


@njit(cache=True, nogil=True)
def _encode(
    body: Any,
    body_off: Any,
    ids: Any,
    tags: Any,
    tags_off: Any,
    has_tag: Any,
    uniq: Any,
    tag_prefix: Any,
    crc_table: Any,
    magic: int,
    out: Any,
    totals: Any,
) -> None:  # pragma: no cover - compiled
    pos = 0
    for i in range(len(body_off) - 1):
        b0, b1 = body_off[i], body_off[i + 1]
        props = len(uniq) + 33
        if has_tag[i]:
            props += len(tag_prefix) + tags_off[i + 1] - tags_off[i] + 1
        total = 22 + (b1 - b0) + props
        totals[i] = total
        crc = crc32_masked(crc_table, body, b0, b1)
        _put32(out, pos, total)
        _put32(out, pos + 4, magic)
        _put32(out, pos + 8, crc)
        _put32(out, pos + 12, 0)
        _put32(out, pos + 16, b1 - b0)
        pos += 20
        copy_bytes(out, pos, body, b0, b1 - b0)
        pos += b1 - b0
        out[pos] = (props >> 8) & 0xFF
        out[pos + 1] = props & 0xFF
        pos += 2
        copy_bytes(out, pos, uniq, 0, len(uniq))
        pos += len(uniq)
        copy_bytes(out, pos, ids, i * 32, 32)
        out[pos + 32] = 2
        pos += 33
        if has_tag[i]:
            copy_bytes(out, pos, tag_prefix, 0, len(tag_prefix))
            pos += len(tag_prefix)
            t0, t1 = tags_off[i], tags_off[i + 1]
            copy_bytes(out, pos, tags, t0, t1 - t0)
            pos += t1 - t0
            out[pos] = 2
            pos += 1


def arrow_bytes(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A binary/string column's (data, offsets, valid) as numpy arrays, slices honoured."""
    if pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type):
        width: Any = np.int64
    elif pa.types.is_binary(column.type) or pa.types.is_string(column.type):
        width = np.int32
    else:
        raise MessageIllegalError(f"expected a binary or string column, not {column.type}")
    n = len(column)
    _validity, offsets_buf, data_buf = column.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=width)[column.offset : column.offset + n + 1]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.empty(0, np.uint8)
    )
    valid = (
        np.ones(n, dtype=np.bool_)
        if column.null_count == 0
        else column.is_valid().to_numpy(zero_copy_only=False)
    )
    return data, offsets.astype(np.int64), valid


def encode_columns(
    topic: str,
    bodies: pa.Array,
    tags: pa.Array | None,
    msg_ids: list[str],
    max_body_size: int,
) -> PreparedBatch:
    """One batch of ``len(bodies)`` messages; ``msg_ids`` their UNIQ_KEYs (32 chars each)."""
    body, body_off, body_valid = arrow_bytes(bodies)
    n = len(bodies)
    if not body_valid.all():
        raise MessageIllegalError("a row has a null body")
    lengths = np.diff(body_off)
    if n and lengths.min() <= 0:
        raise MessageIllegalError("message body must be non-empty")
    if n and lengths.max() > max_body_size:
        raise MessageTooLargeError(int(lengths.max()), max_body_size)
    ids = "".join(msg_ids).encode()
    if len(ids) != n * ID_LEN:
        raise MessageIllegalError("one 32-char msg id per row is needed")
    if tags is not None:
        tag_data, tag_off, tag_valid = arrow_bytes(tags)
        span = tag_data[tag_off[0] : tag_off[-1]] if n else tag_data[:0]
        if ((span == 1) | (span == 2)).any():
            raise MessageIllegalError("tags contain a \\x01 or \\x02 separator")
        has_tag = tag_valid & (np.diff(tag_off) > 0)  # "" is no tag, as Message.tags = ""
    else:
        tag_data, tag_off, has_tag = (
            np.empty(0, np.uint8),
            np.zeros(n + 1, np.int64),
            np.zeros(n, np.bool_),
        )
    props = (
        len(UNIQ_PREFIX)
        + ID_LEN
        + 1
        + np.where(has_tag, len(TAGS_PREFIX) + np.diff(tag_off) + 1, 0)
    )
    out = np.empty(int((BATCH_ENTRY_OVERHEAD + lengths + props).sum()), dtype=np.uint8)
    totals = np.empty(n, dtype=np.int64)
    _encode(
        body, body_off, np.frombuffer(ids, dtype=np.uint8), tag_data, tag_off, has_tag,
        _UNIQ, _TAGS, CRC_TABLE, MESSAGE_MAGIC_CODE, out, totals,
    )  # fmt: skip
    topic_len = len(topic.encode())
    sizes = (lengths + props + record_size(0, topic_len, 0)).tolist()
    return PreparedBatch(topic, out.tobytes(), msg_ids, sizes)
