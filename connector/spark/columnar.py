"""Pulled records -> one Arrow RecordBatch in the read schema, without a Python loop per row.

A pull answer is the stored records back to back. ``records_to_batch``
indexes them in compiled code (``connector.protocol.scan``), takes the
fixed-width header fields with numpy, copies bodies and property pairs into
Arrow buffers in one pass each, and checks every body's CRC. Three cases
take the row-by-row decoder instead (``rows_to_batch``, also the reference
the tests compare against): compressed bodies (they must be inflated),
properties that are not valid UTF-8 (decoded with replacement characters, as
``decode_properties`` does) and a property named twice in one record (the
last one wins, as in a dict). pymq's own producers write none of these
except compressed bodies above 4 KiB.

Columns: ``tags``/``keys`` are the TAGS/KEYS properties (null when absent
or empty), ``msgId`` the producer's UNIQ_KEY or else the offset msgId,
``properties`` every stored property.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.errors import CorruptRecordError
from connector.protocol.message import SysFlag
from connector.protocol.properties import PropertyKeys
from connector.protocol.record import (
    OFF_BODYCRC,
    OFF_PHYSICALOFFSET,
    OFF_STORETIMESTAMP,
    OFF_SYSFLAG,
    decode_record,
)
from connector.protocol.scan import gather, index_records, split_properties

__all__ = ["arrow_schema", "records_to_batch", "rows_to_batch"]

OFF_BORNTIMESTAMP = 40
OFF_STOREHOST = 64
_SPECIAL = (PropertyKeys.TAGS, PropertyKeys.KEYS, PropertyKeys.UNIQ_KEY)
_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def arrow_schema(spark_schema: Any) -> pa.Schema:
    """The Arrow schema Spark expects back for ``spark_schema`` (its own conversion)."""
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

    return to_arrow_schema(spark_schema, timezone="UTC")


def _field(buf: np.ndarray, starts: np.ndarray, at: int, width: int) -> np.ndarray:
    """Bytes ``[at, at+width)`` of every record, as an (n, width) uint8 array."""
    return buf[(starts + at)[:, None] + np.arange(width)]


def _be(buf: np.ndarray, starts: np.ndarray, at: int, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return _field(buf, starts, at, width).copy().view(dtype).ravel().astype(np.int64)


def _const(value: Any, n: int, typ: pa.DataType) -> pa.Array:
    return pa.array([value], typ).take(pa.array(np.zeros(n, dtype=np.int32)))


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pa.array(ms * 1000, pa.timestamp("us", tz="UTC"))


def records_to_batch(
    data: bytes,
    schema: pa.Schema,
    *,
    topic: str,
    broker_name: str,
    queue_id: int,
    end: int,
    tags: Collection[str] | None = None,
) -> pa.RecordBatch:
    """The records of ``data`` with queue offset below ``end`` (and tag in ``tags``)."""
    index = index_records(data)
    keep = int(np.searchsorted(index.queue_offset, end))  # offsets ascend within a queue
    starts = index.start[:keep]
    buf = np.frombuffer(data, dtype=np.uint8)
    n = len(starts)
    if n and (_be(buf, starts, OFF_SYSFLAG, ">i4") & SysFlag.COMPRESSED).any():
        return rows_to_batch(data, schema, topic=topic, broker_name=broker_name, end=end, tags=tags)
    body_start, body_len = index.body_start[:keep], index.body_len[:keep]
    crc = _be(buf, starts, OFF_BODYCRC, ">i4")
    view = memoryview(data)
    for i, (s, ln) in enumerate(zip(body_start.tolist(), body_len.tolist(), strict=True)):
        if zlib.crc32(view[s : s + ln]) & 0x7FFFFFFF != crc[i]:
            raise CorruptRecordError(f"body CRC mismatch at byte {int(starts[i])} of a pull answer")
    body_bytes, body_offsets = gather(data, body_start, body_len)
    bodies = pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(body_offsets), pa.py_buffer(body_bytes)]
    )
    pairs, counts, found, repeated = split_properties(
        data, index.props_start[:keep], index.props_len[:keep], _SPECIAL
    )
    if repeated:  # a property named twice (not written by pymq): keep the last, as a dict
        return rows_to_batch(data, schema, topic=topic, broker_name=broker_name, end=end, tags=tags)
    name_bytes, name_offsets = gather(data, pairs[:, 0], pairs[:, 1])
    value_bytes, value_offsets = gather(data, pairs[:, 2], pairs[:, 3])
    m = len(pairs)
    names = pa.Array.from_buffers(
        pa.string(), m, [None, pa.py_buffer(name_offsets), pa.py_buffer(name_bytes)]
    )
    values = pa.Array.from_buffers(
        pa.string(), m, [None, pa.py_buffer(value_offsets), pa.py_buffer(value_bytes)]
    )
    try:
        names.validate(full=True)
        values.validate(full=True)
    except pa.ArrowInvalid:  # not UTF-8: decode with replacement characters, row by row
        return rows_to_batch(data, schema, topic=topic, broker_name=broker_name, end=end, tags=tags)
    map_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=map_offsets[1:])
    props = pa.MapArray.from_arrays(
        pa.array(map_offsets), names, values, type=schema.field("properties").type
    )

    def special(w: int) -> pa.Array:
        idx = found[:, w]
        picked = values.take(pa.array(idx, mask=idx < 0))
        return pc.if_else(pc.equal(picked, ""), pa.scalar(None, pa.string()), picked)

    tag_col, key_col, uniq = special(0), special(1), special(2)
    raw_ids = np.concatenate(
        [_field(buf, starts, OFF_STOREHOST, 8), _field(buf, starts, OFF_PHYSICALOFFSET, 8)], axis=1
    )
    hex_ids = np.empty((n, 32), dtype=np.uint8)
    hex_ids[:, 0::2] = _HEX[raw_ids >> 4]
    hex_ids[:, 1::2] = _HEX[raw_ids & 15]
    offset_ids = pa.array(hex_ids.view("S32").ravel(), pa.binary(32)).cast(pa.string())
    batch = pa.RecordBatch.from_arrays(
        [
            _const(topic, n, pa.string()),
            _const(broker_name, n, pa.string()),
            _const(queue_id, n, pa.int32()),
            pa.array(index.queue_offset[:keep], pa.int64()),
            pc.coalesce(uniq, offset_ids),
            tag_col,
            key_col,
            bodies,
            props,
            _timestamps(_be(buf, starts, OFF_BORNTIMESTAMP, ">i8")),
            _timestamps(_be(buf, starts, OFF_STORETIMESTAMP, ">i8")),
        ],
        schema=schema,
    )
    if tags is not None:
        batch = batch.filter(pc.fill_null(pc.is_in(tag_col, pa.array(sorted(tags))), False))
    return batch


def rows_to_batch(
    data: bytes,
    schema: pa.Schema,
    *,
    topic: str,
    broker_name: str,
    end: int,
    tags: Collection[str] | None = None,
) -> pa.RecordBatch:
    """The same batch through the record decoder, one row at a time."""
    cols: list[list[Any]] = [[] for _ in schema.names]
    pos = 0
    while pos < len(data):
        m = decode_record(data, pos)
        pos += m.store_size
        if m.queue_offset >= end:
            break
        if tags is not None and m.tags not in tags:
            continue
        row = (
            topic,
            broker_name,
            m.queue_id,
            m.queue_offset,
            m.msg_id,
            m.tags or None,
            m.properties.get(PropertyKeys.KEYS) or None,
            m.body,
            list(m.properties.items()),
            m.born_timestamp * 1000,  # ms -> the schema's microseconds
            m.store_timestamp * 1000,
        )
        for col, value in zip(cols, row, strict=True):
            col.append(value)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
    )
