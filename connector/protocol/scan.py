"""Index a pull answer (stored records back to back) without a Python loop per record.

``index_records`` walks the records once in compiled code and returns, per
record, where it starts, its size, and where its body and properties are;
callers slice bodies and decode only what they need. This is what lets one
client process take in a million pulled messages a second.
"""

# numba needs explicit np.int64 casts that mypy types apart from int
# mypy: disable-error-code="return-value,arg-type"

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from connector.errors import CorruptRecordError
from connector.protocol.jit import CRC_TABLE, byte_at, copy_bytes, crc32_masked, get_u32
from connector.protocol.record import HEADER_SIZE, MESSAGE_MAGIC_CODE, OFF_BODYLEN, OFF_QUEUEOFFSET

__all__ = [
    "RecordIndex",
    "check_bodies",
    "gather",
    "header_fields",
    "headers",
    "index_records",
    "offset_ids",
    "split_properties",
]


@njit(cache=True, nogil=True)
def _walk(buf: Any, out: Any) -> tuple[int, int]:  # pragma: no cover - compiled
    """Fill ``out`` rows (start, size, body_start, body_len, props_start, props_len,
    queue_offset); return (records, -1) or (records so far, bad position)."""
    n = 0
    pos = 0
    end = len(buf)
    while pos < end:
        if pos + HEADER_SIZE > end or n >= len(out):
            return n, pos
        size = get_u32(buf, pos)
        if size < HEADER_SIZE or pos + size > end or get_u32(buf, pos + 4) != MESSAGE_MAGIC_CODE:
            return n, pos
        body_len = get_u32(buf, pos + OFF_BODYLEN)
        body_start = pos + HEADER_SIZE
        topic_pos = body_start + body_len
        if topic_pos + 1 > pos + size:
            return n, pos
        props_len_pos = topic_pos + 1 + np.int64(byte_at(buf, topic_pos))
        if props_len_pos + 2 > pos + size:
            return n, pos
        props_len = (np.int64(byte_at(buf, props_len_pos)) << 8) | np.int64(
            byte_at(buf, props_len_pos + 1)
        )
        if props_len_pos + 2 + props_len != pos + size:
            return n, pos
        q = np.int64(0)
        for i in range(8):
            q = (q << 8) | np.int64(byte_at(buf, pos + OFF_QUEUEOFFSET + i))
        out[n, 0] = pos
        out[n, 1] = size
        out[n, 2] = body_start
        out[n, 3] = body_len
        out[n, 4] = props_len_pos + 2
        out[n, 5] = props_len
        out[n, 6] = q
        n += 1
        pos += size
    return n, -1


@dataclass(slots=True)
class RecordIndex:
    """Columns over ``data``: record i's body is ``data[body_start[i]:body_end[i]]``."""

    data: bytes
    start: np.ndarray
    size: np.ndarray
    body_start: np.ndarray
    body_len: np.ndarray
    props_start: np.ndarray
    props_len: np.ndarray
    queue_offset: np.ndarray

    def __len__(self) -> int:
        return len(self.start)

    def bodies(self) -> list[bytes]:
        """Raw bodies (compressed ones stay compressed: see SYSFLAG)."""
        data = self.data
        return [
            data[s : s + n]
            for s, n in zip(self.body_start.tolist(), self.body_len.tolist(), strict=True)
        ]


def index_records(data: bytes) -> RecordIndex:
    """Index back-to-back records; CorruptRecordError if the bytes are not records."""
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((len(data) // HEADER_SIZE + 1, 7), dtype=np.int64)
    n, bad = _walk(buf, out)
    if bad >= 0:
        raise CorruptRecordError(f"pull answer is not a record at byte {bad}", position=bad)
    cols = out[:n]
    return RecordIndex(
        data, cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], cols[:, 4], cols[:, 5], cols[:, 6]
    )


@njit(cache=True, nogil=True)
def _gather(buf: Any, starts: Any, lens: Any, out: Any, offsets: Any) -> None:  # pragma: no cover
    pos = 0
    for i in range(len(starts)):
        offsets[i] = pos
        copy_bytes(out, pos, buf, starts[i], lens[i])
        pos += lens[i]
    offsets[len(starts)] = pos


@njit(cache=True, nogil=True)
def _rows(buf: Any, starts: Any, out: Any) -> None:  # pragma: no cover - compiled
    width = out.shape[1]
    for i in range(len(starts)):
        for k in range(width):
            out[i, k] = byte_at(buf, starts[i] + k)


def headers(data: bytes, starts: np.ndarray) -> np.ndarray:
    """The fixed 88-byte header of each record, one row per record (view the rows
    with a structured big-endian dtype to read the fields as columns)."""
    out = np.empty((len(starts), HEADER_SIZE), dtype=np.uint8)
    _rows(np.frombuffer(data, dtype=np.uint8), starts, out)
    return out


def gather(data: bytes, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Copy ``data[starts[i]:starts[i]+lens[i]]`` back to back: (bytes, int32 offsets).

    The two buffers of an Arrow binary/string array, built in one pass.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(int(lens.sum()), dtype=np.uint8)
    offsets = np.empty(len(starts) + 1, dtype=np.int32)
    _gather(buf, starts, lens, out, offsets)
    return out, offsets


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
def _split_props(
    buf: Any,
    starts: Any,
    lens: Any,
    names: Any,
    name_starts: Any,
    pairs: Any,
    counts: Any,
    found: Any,
    repeated: Any,
) -> int:  # pragma: no cover - compiled
    """Pairs ``name\x01value\x02`` of every record's properties; see split_properties."""
    n = 0
    for r in range(len(starts)):
        pos = starts[r]
        end = pos + lens[r]
        first = n
        while pos < end:
            stop = pos
            while stop < end and byte_at(buf, stop) != 2:
                stop += 1
            sep = pos
            while sep < stop and byte_at(buf, sep) != 1:
                sep += 1
            if sep < stop and sep > pos:  # a pair without a separator or name is skipped
                pairs[n, 0] = pos
                pairs[n, 1] = sep - pos
                pairs[n, 2] = sep + 1
                pairs[n, 3] = stop - sep - 1
                for w in range(len(name_starts) - 1):
                    a, b = name_starts[w], name_starts[w + 1]
                    if _same(buf, pos, sep - pos, names, a, b - a):
                        found[r, w] = n  # a repeated name: the last one wins, as in a dict
                for p in range(first, n):
                    if _same(buf, pos, sep - pos, buf, pairs[p, 0], pairs[p, 1]):
                        repeated[0] = 1
                n += 1
            pos = stop + 1
        counts[r] = n - first
    return n


def split_properties(
    data: bytes, starts: np.ndarray, lens: np.ndarray, wanted: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """Find every property pair without decoding: ``(pairs, counts, found, repeated)``.

    ``pairs[k]`` = (name start, name length, value start, value length) in
    ``data``; ``counts[r]`` = pairs of record r (they come in record order);
    ``found[r, w]`` = index in ``pairs`` of property ``wanted[w]`` of record r,
    or -1. Same rules as ``decode_properties``: a pair without ``\x01`` or
    with an empty name is skipped, a repeated name keeps its last value;
    ``repeated`` says whether some record names a property twice (then all its
    pairs are in ``pairs``: a map wants the caller to drop the earlier ones).
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    encoded = [w.encode() for w in wanted]
    names = np.frombuffer(b"".join(encoded) or b"\0", dtype=np.uint8)
    name_starts = np.cumsum([0] + [len(e) for e in encoded], dtype=np.int64)
    pairs = np.empty((int(lens.sum()) // 2 + 1, 4), dtype=np.int64)
    counts = np.empty(len(starts), dtype=np.int64)
    found = np.full((len(starts), len(wanted)), -1, dtype=np.int64)
    repeated = np.zeros(1, dtype=np.int64)
    n = _split_props(buf, starts, lens, names, name_starts, pairs, counts, found, repeated)
    return pairs[:n], counts, found, bool(repeated[0])


@njit(cache=True, nogil=True, inline="always")
def _hex_id(buf: Any, p: int, hexd: Any, ids: Any, i: int) -> None:  # pragma: no cover
    """Row ``i`` of ``ids``: the offset msgId of the record at ``p`` in 32 hex digits,
    STOREHOST (bytes 64..71) then PHYSICALOFFSET (28..35)."""
    for k in range(8):
        b = byte_at(buf, p + 64 + k)
        ids[i, 2 * k] = hexd[b >> 4]
        ids[i, 2 * k + 1] = hexd[b & 15]
        b = byte_at(buf, p + 28 + k)
        ids[i, 16 + 2 * k] = hexd[b >> 4]
        ids[i, 16 + 2 * k + 1] = hexd[b & 15]


@njit(cache=True, nogil=True, inline="always")
def _body_crc_ok(
    buf: Any, table: Any, p: int, body_start: int, body_len: int
) -> bool:  # pragma: no cover
    """Whether the body of the record at ``p`` matches its BODYCRC (bytes 8..11)."""
    return crc32_masked(table, buf, body_start, body_start + body_len) == get_u32(buf, p + 8)


@njit(cache=True, nogil=True)
def _fields(
    buf: Any, table: Any, starts: Any, body_start: Any, body_len: Any, hexd: Any, out: Any, ids: Any
) -> int:  # pragma: no cover - compiled
    bad = -1
    for i in range(len(starts)):
        p = starts[i]
        out[i, 0] = get_u32(buf, p + 36)  # SYSFLAG
        out[i, 1] = (get_u32(buf, p + 40) << 32) | get_u32(buf, p + 44)  # BORNTIMESTAMP
        out[i, 2] = (get_u32(buf, p + 56) << 32) | get_u32(buf, p + 60)  # STORETIMESTAMP
        if bad < 0 and not _body_crc_ok(buf, table, p, body_start[i], body_len[i]):
            bad = i
        _hex_id(buf, p, hexd, ids, i)
    return bad


@njit(cache=True, nogil=True)
def _check_bodies(
    buf: Any, table: Any, starts: Any, body_start: Any, body_len: Any, sys_flag: Any
) -> int:  # pragma: no cover - compiled
    bad = -1
    for i in range(len(starts)):
        p = starts[i]
        sys_flag[i] = get_u32(buf, p + 36)
        if bad < 0 and not _body_crc_ok(buf, table, p, body_start[i], body_len[i]):
            bad = i
    return bad


@njit(cache=True, nogil=True)
def _offset_ids(buf: Any, starts: Any, hexd: Any, ids: Any) -> None:  # pragma: no cover
    for i in range(len(starts)):
        _hex_id(buf, starts[i], hexd, ids, i)


_HEXD = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)


def header_fields(
    data: bytes, starts: np.ndarray, body_start: np.ndarray, body_len: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Per record: SYSFLAG, BORNTIMESTAMP, STORETIMESTAMP, the 32 hex chars of its
    offset msgId, and the first record whose body CRC does not match (-1: none)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((len(starts), 3), dtype=np.int64)
    ids = np.empty((len(starts), 32), dtype=np.uint8)
    bad = _fields(buf, CRC_TABLE, starts, body_start, body_len, _HEXD, out, ids)
    return out[:, 0], out[:, 1], out[:, 2], ids, int(bad)


def check_bodies(
    data: bytes, starts: np.ndarray, body_start: np.ndarray, body_len: np.ndarray
) -> tuple[np.ndarray, int]:
    """Per record its SYSFLAG, and the first record whose body CRC does not match
    (-1: none): the checks of ``header_fields`` without its other columns."""
    sys_flag = np.empty(len(starts), dtype=np.int64)
    bad = _check_bodies(
        np.frombuffer(data, dtype=np.uint8), CRC_TABLE, starts, body_start, body_len, sys_flag
    )
    return sys_flag, int(bad)


def offset_ids(data: bytes, starts: np.ndarray) -> str:
    """The offset msgIds of the records at ``starts``, 32 hex digits each, back to back."""
    ids = np.empty((len(starts), 32), dtype=np.uint8)
    _offset_ids(np.frombuffer(data, dtype=np.uint8), starts, _HEXD, ids)
    return ids.tobytes().decode("ascii")
