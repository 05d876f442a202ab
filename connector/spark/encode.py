"""Arrow columns -> the batch encoding: the Spark sink's path for plain rows.

Rows with only a ``body`` (binary or string) and optionally ``tags`` need
no Python object per row: ``encode_columns`` hands the Arrow buffers to
``connector.protocol.fastbatch.encode_plain`` (compiled) and returns a
``PreparedBatch`` for ``Producer.send_prepared_batch``. The same checks as
``Producer.send_batch``, plus: no null body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from connector.errors import MessageIllegalError
from connector.protocol.batch import PreparedBatch
from connector.protocol.fastbatch import encode_plain

__all__ = ["arrow_bytes", "encode_columns"]


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
    msg_ids: Sequence[str],
    max_body_size: int,
) -> PreparedBatch:
    """One batch of ``len(bodies)`` messages; ``msg_ids`` their UNIQ_KEYs (32 chars each,
    or an ``IdBlock``)."""
    body, body_off, body_valid = arrow_bytes(bodies)
    if not body_valid.all():
        raise MessageIllegalError("a row has a null body")
    if tags is None:
        return encode_plain(topic, body, body_off, None, None, None, msg_ids, max_body_size)
    tag_data, tag_off, tag_valid = arrow_bytes(tags)
    has_tag = tag_valid & (np.diff(tag_off) > 0)  # "" is no tag, as Message.tags = ""
    return encode_plain(topic, body, body_off, tag_data, tag_off, has_tag, msg_ids, max_body_size)
