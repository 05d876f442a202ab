"""Index a pull answer (stored records back to back) without a Python loop per record.

``index_records`` walks the records once in compiled code and returns, per
record, where it starts, its size, and where its body and properties are;
callers slice bodies and decode only what they need. This is what lets one
client process take in a million pulled messages a second.

The loops are C (``connector.protocol._kernels``, built with pymq), else their
plain-Python twins (``connector.protocol.native`` chooses). A pull answer comes
from the network: they check every length in it against the bytes there are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from connector.errors import CorruptRecordError
from connector.protocol.native import load
from connector.protocol.record import HEADER_SIZE

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

kernels = load("connector.protocol._kernels", "connector.protocol._kernels_py")
COMPILED = kernels.__name__ == "connector.protocol._kernels"  # False: the plain-Python twins


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
    out = np.empty((7, len(data) // HEADER_SIZE + 1), dtype=np.int64)  # a row per column
    n, bad = kernels.walk(buf, out)
    if bad >= 0:
        raise CorruptRecordError(f"pull answer is not a record at byte {bad}", position=bad)
    cols = out[:, :n]
    return RecordIndex(data, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6])


def headers(data: bytes, starts: np.ndarray) -> np.ndarray:
    """The fixed 88-byte header of each record, one row per record (view the rows
    with a structured big-endian dtype to read the fields as columns)."""
    out = np.empty((len(starts), HEADER_SIZE), dtype=np.uint8)
    kernels.rows(np.frombuffer(data, dtype=np.uint8), starts, out)
    return out


def gather(data: bytes, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Copy ``data[starts[i]:starts[i]+lens[i]]`` back to back: (bytes, int32 offsets).

    The two buffers of an Arrow binary/string array, built in one pass.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(int(lens.sum()), dtype=np.uint8)
    offsets = np.empty(len(starts) + 1, dtype=np.int32)
    kernels.gather(buf, starts, lens, out, offsets)
    return out, offsets


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
    n = kernels.split_props(buf, starts, lens, names, name_starts, pairs, counts, found, repeated)
    return pairs[:n], counts, found, bool(repeated[0])


def header_fields(
    data: bytes, starts: np.ndarray, body_start: np.ndarray, body_len: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Per record: SYSFLAG, BORNTIMESTAMP, STORETIMESTAMP, the 32 hex chars of its
    offset msgId, and the first record whose body CRC does not match (-1: none)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    out = np.empty((len(starts), 3), dtype=np.int64)
    ids = np.empty((len(starts), 32), dtype=np.uint8)
    bad = kernels.fields(buf, starts, body_start, body_len, out, ids)
    return out[:, 0], out[:, 1], out[:, 2], ids, int(bad)


def check_bodies(
    data: bytes, starts: np.ndarray, body_start: np.ndarray, body_len: np.ndarray
) -> tuple[np.ndarray, int]:
    """Per record its SYSFLAG, and the first record whose body CRC does not match
    (-1: none): the checks of ``header_fields`` without its other columns."""
    sys_flag = np.empty(len(starts), dtype=np.int64)
    bad = kernels.check_bodies(
        np.frombuffer(data, dtype=np.uint8), starts, body_start, body_len, sys_flag
    )
    return sys_flag, int(bad)


def offset_ids(data: bytes, starts: np.ndarray) -> str:
    """The offset msgIds of the records at ``starts``, 32 hex digits each, back to back."""
    ids = np.empty((len(starts), 32), dtype=np.uint8)
    kernels.offset_ids(np.frombuffer(data, dtype=np.uint8), starts, ids)
    return ids.tobytes().decode("ascii")
