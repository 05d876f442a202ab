"""Pulled records -> one Arrow RecordBatch in the read schema, without a Python loop per row.

A pull answer is the stored records back to back. ``records_to_batch``
indexes them in compiled code (``connector.protocol.scan``), then one
compiled pass (``_fill``) checks every body's CRC and writes every column's
Arrow buffers: bodies, property names and values, the TAGS/KEYS/msgId
columns, offsets and timestamps; the arrays are built over those buffers
without copying them again. Three cases take the row-by-row decoder instead
(``rows_to_batch``, also the reference the tests compare against):
compressed bodies (they must be inflated), properties that are not valid
UTF-8 (decoded with replacement characters, as ``decode_properties`` does)
and a property named twice in one record (the last one wins, as in a dict).
pymq's own producers write none of these except compressed bodies above 4 KiB.

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
from numba import njit

from connector.errors import CorruptRecordError
from connector.protocol.jit import CRC_TABLE, byte_at, copy_bytes, crc32_masked, get_u32
from connector.protocol.message import SysFlag
from connector.protocol.properties import PropertyKeys
from connector.protocol.record import (
    OFF_BODYCRC,
    OFF_PHYSICALOFFSET,
    OFF_STORETIMESTAMP,
    OFF_SYSFLAG,
    decode_record,
)
from connector.protocol.scan import index_records

__all__ = ["arrow_schema", "records_to_batch", "rows_to_batch"]

# the properties with a column of their own, in the kernel's order
_SPECIAL = (PropertyKeys.UNIQ_KEY, PropertyKeys.TAGS, PropertyKeys.KEYS)
_SPECIAL_BYTES = np.frombuffer(b"".join(k.encode() for k in _SPECIAL), dtype=np.uint8)
_SPECIAL_STARTS = np.cumsum([0] + [len(k.encode()) for k in _SPECIAL], dtype=np.int64)
_HEXD = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
# the header fields record.py names no offset for (see its layout table)
_OFF_BORNTIMESTAMP = 40
_OFF_STOREHOST = 64
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
    status, pairs = _fill(
        np.frombuffer(data, dtype=np.uint8), CRC_TABLE, _HEXD, _SPECIAL_BYTES, _SPECIAL_STARTS,
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


@njit(cache=True, nogil=True, inline="always")
def _same(a: Any, pos: int, n: int, b: Any, bpos: int, bn: int) -> bool:  # pragma: no cover
    """``a[pos:pos+n] == b[bpos:bpos+bn]`` without building views."""
    if n != bn:
        return False
    for k in range(n):  # noqa: SIM110 - numba compiles loops, not generators
        if byte_at(a, pos + k) != byte_at(b, bpos + k):
            return False
    return True


@njit(cache=True, nogil=True)
def _fill(
    buf: Any,
    table: Any,
    hexd: Any,
    specials: Any,
    special_starts: Any,
    starts: Any,
    body_start: Any,
    body_len: Any,
    props_start: Any,
    props_len: Any,
    queue_offset: Any,
    n: int,
    ints: Any,
    body: Any,
    body_off: Any,
    pair_data: Any,
    pair_off: Any,
    map_off: Any,
    special: Any,
    special_off: Any,
    valid: Any,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Every column's buffers for the first ``n`` indexed records, in one pass.

    Returns ``(status, pairs)``: status 1 + the first record whose body CRC does
    not match, else 0 when some body is compressed or some record names a
    property twice (the caller decodes row by row; the CRCs of all records are
    checked first all the same), else -1 when the columns are done. Property
    pairs (``name\x01value\x02``; one without ``\x01`` or with an empty name is
    skipped, as ``decode_properties`` does) go to ``pair_data`` row 0 (names)
    and row 1 (values); each record's UNIQ_KEY, TAGS and KEYS again to rows 0-2
    of ``special``, invalid when absent or empty, except that a record without
    UNIQ_KEY gets its offset msgId (STOREHOST then PHYSICALOFFSET in hex).
    """
    # views taken once: a view taken in the loop costs reference counting per record
    offsets, born_us, stored_us = ints[0], ints[1], ints[2]
    names, values = pair_data[0], pair_data[1]
    name_off, value_off = pair_off[0], pair_off[1]
    msg_ids, tag_data, key_data = special[0], special[1], special[2]
    msg_id_off, tag_off, key_off = special_off[0], special_off[1], special_off[2]
    msg_id_ok, tag_ok, key_ok = valid[0], valid[1], valid[2]
    uniq_name = specials[special_starts[0] : special_starts[1]]
    tags_name = specials[special_starts[1] : special_starts[2]]
    keys_name = specials[special_starts[2] : special_starts[3]]
    row_by_row = False
    body_at = 0
    npairs = 0
    name_at = 0
    value_at = 0
    msg_id_at = 0
    tag_at = 0
    key_at = 0
    for i in range(n):
        p = starts[i]
        b_start = body_start[i]
        b_len = body_len[i]
        if crc32_masked(table, buf, b_start, b_start + b_len) != get_u32(buf, p + OFF_BODYCRC):
            return i + 1, npairs
        if row_by_row:
            continue
        if get_u32(buf, p + OFF_SYSFLAG) & _COMPRESSED:
            row_by_row = True
            continue
        offsets[i] = queue_offset[i]
        born = (get_u32(buf, p + _OFF_BORNTIMESTAMP) << 32) | get_u32(
            buf, p + _OFF_BORNTIMESTAMP + 4
        )
        born_us[i] = born * 1000  # ms -> the schema's microseconds
        stored = (get_u32(buf, p + OFF_STORETIMESTAMP) << 32) | get_u32(
            buf, p + OFF_STORETIMESTAMP + 4
        )
        stored_us[i] = stored * 1000
        body_off[i] = body_at
        copy_bytes(body, body_at, buf, b_start, b_len)
        body_at += b_len
        map_off[i] = npairs
        first = npairs
        uniq_at, uniq_len, tags_at, tags_len, keys_at, keys_len = -1, 0, -1, 0, -1, 0
        pos = props_start[i]
        props_end = pos + props_len[i]
        while pos < props_end and not row_by_row:
            stop = pos
            sep = -1
            while stop < props_end:
                c = byte_at(buf, stop)
                if c == 2:
                    break
                if c == 1 and sep < 0:
                    sep = stop
                stop += 1
            if sep > pos:
                name_len = sep - pos
                value_len = stop - sep - 1
                for q in range(first, npairs):
                    other = name_off[q]
                    if _same(buf, pos, name_len, names, other, name_off[q + 1] - other):
                        row_by_row = True  # named twice: the last one wins, as in a dict
                if row_by_row:
                    break
                name_off[npairs] = name_at
                value_off[npairs] = value_at
                copy_bytes(names, name_at, buf, pos, name_len)
                copy_bytes(values, value_at, buf, sep + 1, value_len)
                name_at += name_len
                value_at += value_len
                npairs += 1
                name_off[npairs] = name_at
                if _same(buf, pos, name_len, uniq_name, 0, len(uniq_name)):
                    uniq_at, uniq_len = sep + 1, value_len
                elif _same(buf, pos, name_len, tags_name, 0, len(tags_name)):
                    tags_at, tags_len = sep + 1, value_len
                elif _same(buf, pos, name_len, keys_name, 0, len(keys_name)):
                    keys_at, keys_len = sep + 1, value_len
            pos = stop + 1
        if row_by_row:
            continue
        msg_id_off[i] = msg_id_at
        msg_id_ok[i] = True
        if uniq_len > 0:
            copy_bytes(msg_ids, msg_id_at, buf, uniq_at, uniq_len)
            msg_id_at += uniq_len
        else:  # no UNIQ_KEY (not sent by a pymq producer): the offset msgId
            for k in range(8):
                c = byte_at(buf, p + _OFF_STOREHOST + k)
                msg_ids[msg_id_at + 2 * k] = hexd[c >> 4]
                msg_ids[msg_id_at + 2 * k + 1] = hexd[c & 15]
                c = byte_at(buf, p + OFF_PHYSICALOFFSET + k)
                msg_ids[msg_id_at + 16 + 2 * k] = hexd[c >> 4]
                msg_ids[msg_id_at + 16 + 2 * k + 1] = hexd[c & 15]
            msg_id_at += 32
        tag_off[i] = tag_at
        tag_ok[i] = tags_len > 0
        copy_bytes(tag_data, tag_at, buf, tags_at, tags_len)
        tag_at += tags_len
        key_off[i] = key_at
        key_ok[i] = keys_len > 0
        copy_bytes(key_data, key_at, buf, keys_at, keys_len)
        key_at += keys_len
    if row_by_row:
        return 0, npairs
    body_off[n] = body_at
    map_off[n] = npairs
    name_off[npairs] = name_at
    value_off[npairs] = value_at
    msg_id_off[n] = msg_id_at
    tag_off[n] = tag_at
    key_off[n] = key_at
    return -1, npairs


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
