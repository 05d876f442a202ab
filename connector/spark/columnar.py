"""Pulled records -> one Arrow RecordBatch in the read schema, without a Python loop per row.

A pull answer is the stored records back to back. ``records_to_batch``
indexes them in compiled code (``connector.protocol.scan``), then one
compiled pass (the ``fill`` kernel of ``connector.protocol._kernels``, C built
with pymq) checks every body's CRC and writes every column's Arrow buffers:
bodies, property names and values, the TAGS/KEYS/msgId columns, offsets and
timestamps; the arrays are built over those buffers without copying them
again. ``fill`` returns ``(status, pairs)``: status 1 + the first record
whose body CRC does not match, else 0 when some body is compressed or some
record names a property twice (the CRCs of all records are checked first all
the same), else -1 when the columns are done. Property pairs
(``name\x01value\x02``; one without ``\x01`` or with an empty name is
skipped, as ``decode_properties`` does) go to ``pair_data`` row 0 (names) and
row 1 (values); each record's UNIQ_KEY, TAGS and KEYS again to rows 0-2 of
``special``, invalid when absent or empty, except that a record without
UNIQ_KEY gets its offset msgId (STOREHOST then PHYSICALOFFSET in hex).

Three cases take the row-by-row decoder instead (``rows_to_batch``, also the
reference the tests compare against): compressed bodies (they must be
inflated), properties that are not valid UTF-8 (decoded with replacement
characters, as ``decode_properties`` does) and a property named twice in one
record (the last one wins, as in a dict). pymq's own producers write none of
these except compressed bodies above 4 KiB.

Columns: ``tags``/``keys`` are the TAGS/KEYS properties (null when absent
or empty), ``msgId`` the producer's UNIQ_KEY or else the offset msgId,
``properties`` every stored property. A batch holds the columns of the
schema it is given, in its order: the read schema, or the part of it a
schema given to the read names (``options.check_read_schema``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connector.errors import CorruptRecordError
from connector.protocol.message import SysFlag
from connector.protocol.properties import PropertyKeys
from connector.protocol.record import decode_record
from connector.protocol.scan import index_records, kernels

__all__ = ["arrow_schema", "records_to_batch", "rows_to_batch"]

# the properties with a column of their own, in the kernel's order
_SPECIAL = (PropertyKeys.UNIQ_KEY, PropertyKeys.TAGS, PropertyKeys.KEYS)
_SPECIAL_BYTES = np.frombuffer(b"".join(k.encode() for k in _SPECIAL), dtype=np.uint8)
_SPECIAL_STARTS = np.cumsum([0] + [len(k.encode()) for k in _SPECIAL], dtype=np.int64)
_TIMESTAMP = pa.timestamp("us", tz="UTC")
_COMPRESSED = int(SysFlag.COMPRESSED)


def arrow_schema(spark_schema: Any) -> pa.Schema:
    """The Arrow schema Spark expects back for ``spark_schema`` (its own conversion)."""
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

    return to_arrow_schema(spark_schema, timezone="UTC")


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
    n = int(np.searchsorted(index.queue_offset, end))  # offsets ascend within a queue
    props_len = int(index.props_len[:n].sum())
    pairs_max = props_len // 2 + 1  # a pair takes at least 2 bytes (name, \x01)
    ints = np.empty((3, n), dtype=np.int64)  # queue offset, born and store time (us)
    body = np.empty(int(index.body_len[:n].sum()), dtype=np.uint8)
    body_off = np.empty(n + 1, dtype=np.int32)
    pair_data = np.empty((2, props_len), dtype=np.uint8)  # names, values
    pair_off = np.empty((2, pairs_max + 1), dtype=np.int32)
    map_off = np.empty(n + 1, dtype=np.int32)
    # msgId (UNIQ_KEY or the 32 hex digits of the offset msgId), tags, keys
    special = np.empty((3, props_len + 32 * n), dtype=np.uint8)
    special_off = np.empty((3, n + 1), dtype=np.int32)
    valid = np.empty((3, n), dtype=np.bool_)
    status, pairs = kernels.fill(
        np.frombuffer(data, dtype=np.uint8), _SPECIAL_BYTES, _SPECIAL_STARTS, _COMPRESSED,
        index.start, index.body_start, index.body_len, index.props_start, index.props_len,
        index.queue_offset, n, ints, body, body_off, pair_data, pair_off, map_off,
        special, special_off, valid,
    )  # fmt: skip
    if status > 0:
        at = int(index.start[status - 1])
        raise CorruptRecordError(f"body CRC mismatch at byte {at} of a pull answer")
    if status == 0:  # compressed bodies or a property named twice: row by row
        return rows_to_batch(data, schema, topic=topic, broker_name=broker_name, end=end, tags=tags)
    names, values = (
        _strings(pairs, pair_off[k, : pairs + 1], pair_data[k, : pair_off[k, pairs]])
        for k in range(2)
    )
    try:
        names.validate(full=True)
        values.validate(full=True)
    except pa.ArrowInvalid:  # not UTF-8: decode with replacement characters, row by row
        return rows_to_batch(data, schema, topic=topic, broker_name=broker_name, end=end, tags=tags)
    msg_id, tag_col, key_col = (
        _strings(n, special_off[w], special[w, : special_off[w, n]], valid[w]) for w in range(3)
    )
    built: dict[str, Callable[[], pa.Array]] = {
        "topic": lambda: _const(topic, n),
        "brokerName": lambda: _const(broker_name, n),
        "queueId": lambda: _fixed(pa.int32(), np.full(n, queue_id, dtype=np.int32)),
        "queueOffset": lambda: _fixed(pa.int64(), ints[0]),
        "msgId": lambda: msg_id,
        "tags": lambda: tag_col,
        "keys": lambda: key_col,
        "body": lambda: _strings(n, body_off, body, typ=pa.binary()),
        "properties": lambda: pa.MapArray.from_arrays(
            _fixed(pa.int32(), map_off), names, values, type=schema.field("properties").type
        ),
        "bornTimestamp": lambda: _fixed(_TIMESTAMP, ints[1]),
        "storeTimestamp": lambda: _fixed(_TIMESTAMP, ints[2]),
    }
    # the columns asked for only (a schema given to the read may name fewer)
    batch = pa.RecordBatch.from_arrays([built[name]() for name in schema.names], schema=schema)
    if tags is not None:
        batch = batch.filter(pc.fill_null(pc.is_in(tag_col, pa.array(sorted(tags))), False))
    return batch


def _strings(
    n: int,
    offsets: np.ndarray,
    data: np.ndarray,
    valid: np.ndarray | None = None,
    typ: pa.DataType | None = None,
) -> pa.Array:
    """A string (or ``typ``) array over the kernel's buffers, not copied; ``valid``: a
    bool per row (None: no nulls)."""
    bitmap, nulls = None, 0
    if valid is not None:
        nulls = n - int(np.count_nonzero(valid))
        if nulls:
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        typ or pa.string(), n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls
    )


def _fixed(typ: pa.DataType, values: np.ndarray) -> pa.Array:
    """A fixed-width array over contiguous ``values``, not copied."""
    return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values)], null_count=0)


def _const(value: str, n: int) -> pa.Array:
    """``n`` times the string ``value``: its bytes repeated, evenly spaced offsets."""
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(raw * n)], null_count=0
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
    cols: dict[str, list[Any]] = {name: [] for name in schema.names}
    pos = 0
    while pos < len(data):
        m = decode_record(data, pos)
        pos += m.store_size
        if m.queue_offset >= end:
            break
        if tags is not None and m.tags not in tags:
            continue
        row = {
            "topic": topic,
            "brokerName": broker_name,
            "queueId": m.queue_id,
            "queueOffset": m.queue_offset,
            "msgId": m.msg_id,
            "tags": m.tags or None,
            "keys": m.properties.get(PropertyKeys.KEYS) or None,
            "body": m.body,
            "properties": list(m.properties.items()),
            "bornTimestamp": m.born_timestamp * 1000,  # ms -> the schema's microseconds
            "storeTimestamp": m.store_timestamp * 1000,
        }
        for name, col in cols.items():
            col.append(row[name])
    return pa.RecordBatch.from_arrays(
        [pa.array(cols[f.name], f.type) for f in schema], schema=schema
    )
