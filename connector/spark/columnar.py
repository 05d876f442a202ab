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

from collections.abc import Collection
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.errors import CorruptRecordError
from connector.protocol.message import SysFlag
from connector.protocol.properties import PropertyKeys
from connector.protocol.record import decode_record
from connector.protocol.scan import gather, header_fields, index_records, split_properties

__all__ = ["arrow_schema", "records_to_batch", "rows_to_batch"]

_SPECIAL = (PropertyKeys.TAGS, PropertyKeys.KEYS, PropertyKeys.UNIQ_KEY)


def arrow_schema(spark_schema: Any) -> pa.Schema:
    """The Arrow schema Spark expects back for ``spark_schema`` (its own conversion)."""
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

    return to_arrow_schema(spark_schema, timezone="UTC")


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
    n = len(starts)
    body_start, body_len = index.body_start[:keep], index.body_len[:keep]
    sys_flag, born, stored, offset_ids, bad = header_fields(data, starts, body_start, body_len)
    if bad >= 0:
        raise CorruptRecordError(f"body CRC mismatch at byte {int(starts[bad])} of a pull answer")
    if (sys_flag & SysFlag.COMPRESSED).any():
        return rows_to_batch(data, schema, topic=topic, broker_name=broker_name, end=end, tags=tags)
    pairs, counts, found, repeated = split_properties(
        data, index.props_start[:keep], index.props_len[:keep], _SPECIAL
    )
    if repeated:  # a property named twice (not written by pymq): keep the last, as a dict
        return rows_to_batch(data, schema, topic=topic, broker_name=broker_name, end=end, tags=tags)
    names = _strings(data, pairs[:, 0], pairs[:, 1])
    values = _strings(data, pairs[:, 2], pairs[:, 3])
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
    value_len = pairs[:, 3]

    def special(w: int) -> pa.Array:
        """Property ``_SPECIAL[w]`` of every row; null when absent or empty."""
        idx = found[:, w]
        missing = idx < 0
        missing[~missing] = value_len[idx[~missing]] == 0
        return values.take(pa.array(np.where(missing, 0, idx), mask=missing))

    tag_col, key_col, uniq = special(0), special(1), special(2)
    if uniq.null_count:  # no UNIQ_KEY (not sent by a pymq producer): the offset msgId
        ids = pa.array(offset_ids.view("S32").ravel(), pa.binary(32)).cast(pa.string())
        uniq = pc.coalesce(uniq, ids)
    batch = pa.RecordBatch.from_arrays(
        [
            _const(topic, n, pa.string()),
            _const(broker_name, n, pa.string()),
            pa.array(np.full(n, queue_id, dtype=np.int32)),
            pa.array(index.queue_offset[:keep]),
            uniq,
            tag_col,
            key_col,
            _strings(data, body_start, body_len, pa.binary()),
            props,
            _timestamps(born),
            _timestamps(stored),
        ],
        schema=schema,
    )
    if tags is not None:
        batch = batch.filter(pc.fill_null(pc.is_in(tag_col, pa.array(sorted(tags))), False))
    return batch


def _strings(
    data: bytes, starts: np.ndarray, lens: np.ndarray, typ: pa.DataType | None = None
) -> pa.Array:
    """An Arrow string (or ``typ``) array of the slices, copied back to back in one pass."""
    raw, offsets = gather(data, starts, lens)
    return pa.Array.from_buffers(
        typ or pa.string(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(raw)]
    )


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
