"""The client's kernels in plain Python: the twin of ``_kernels.c``, function for function.

Used where the C module was not built, under ``PYMQ_KERNELS=python``, and by the tests
as the reference the compiled results must equal (connector/protocol/native.py). Same
arguments, same outputs written into the caller's arrays, same return values; a caller's
array that is too small raises ValueError here too. Slow (a Python loop per record) but
not absurd: CRCs and copies go through zlib and bytes slicing. The property rules and
hashes used by the store's twin live here as well (``scan_props``, ``java_hash_utf8``).
"""

from __future__ import annotations

import itertools
import re
import struct
from typing import Any

import numpy as np

from connector.protocol.hashing import crc32 as _crc32
from connector.protocol.hashing import tags_code

__all__ = [
    "check_bodies",
    "configure",
    "crc32",
    "encode_messages",
    "encode_plain",
    "fields",
    "fill",
    "gather",
    "java_hash_utf8",
    "offset_ids",
    "rows",
    "scan_props",
    "split_props",
    "walk",
]

HEADER_SIZE = 88
MESSAGE_MAGIC = 0xDAA320A7
OFF_BODYCRC = 8
OFF_QUEUEOFFSET = 20
OFF_PHYSICALOFFSET = 28
OFF_SYSFLAG = 36
OFF_BORNTIMESTAMP = 40
OFF_STORETIMESTAMP = 56
OFF_STOREHOST = 64
OFF_BODYLEN = 84

_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_SEPARATOR = re.compile(rb"[\x01\x02]")


def configure(address: int, min_bytes: int) -> None:
    """The C module's long-CRC setting; nothing to set here (zlib's crc32 does it all)."""


def crc32(data: Any, crc: int = 0) -> int:
    """``zlib.crc32(data, crc)`` (zlib-ng's where installed: the same CRC, faster)."""
    value: int = _crc32(data, crc)
    return value


def _view(buf: Any) -> memoryview:
    view = memoryview(buf)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(f"{what}: out of bounds")


def java_hash_utf8(raw: bytes, h: int = 0) -> int:
    """Continue Java's String.hashCode over UTF-8 bytes as UTF-16 code units; an invalid
    byte counts as one U+FFFD (the C loop's rule, byte for byte)."""
    if h == 0:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return tags_code(text) & 0xFFFFFFFF
    p, end = 0, len(raw)
    while p < end:
        b0 = raw[p]
        cp, n = 0xFFFD, 1

        def cont(k: int, p: int = p) -> bool:
            return p + k < end and (raw[p + k] & 0xC0) == 0x80

        if b0 < 0x80:
            cp = b0
        elif 0xC2 <= b0 < 0xE0 and cont(1):
            cp, n = ((b0 & 0x1F) << 6) | (raw[p + 1] & 0x3F), 2
        elif 0xE0 <= b0 < 0xF0 and cont(1) and cont(2):
            cp = ((b0 & 0x0F) << 12) | ((raw[p + 1] & 0x3F) << 6) | (raw[p + 2] & 0x3F)
            n = 3
        elif 0xF0 <= b0 < 0xF5 and cont(1) and cont(2) and cont(3):
            cp = (
                ((b0 & 0x07) << 18)
                | ((raw[p + 1] & 0x3F) << 12)
                | ((raw[p + 2] & 0x3F) << 6)
                | (raw[p + 3] & 0x3F)
            )
            n = 4
        if cp >= 0x10000:
            cp -= 0x10000
            h = (31 * h + (0xD800 | (cp >> 10))) & 0xFFFFFFFF
            h = (31 * h + (0xDC00 | (cp & 0x3FF))) & 0xFFFFFFFF
        else:
            h = (31 * h + cp) & 0xFFFFFFFF
        p += n
    return h


def scan_props(
    props: bytes,
    prefix: int,
    rec: int,
    key_hashes: Any,
    key_recs: Any,
    nkeys: int,
    cap: int,
) -> tuple[int, int, bool, bool]:
    """One record's properties: (TAGS hash, key count, has DELAY, well formed).

    KEYS (space separated) and UNIQ_KEY hashes (CRC-32 continued from ``prefix``,
    masked to 31 bits) go to ``key_hashes[nkeys:]`` with ``rec`` in ``key_recs``; at most
    ``cap`` in all (ValueError beyond). Stops at the first defect, keys found so far kept.
    """
    tags = 0
    delay = False
    p, end = 0, len(props)
    while p < end:
        m = _SEPARATOR.search(props, p)
        if m is None or m.start() == p or props[m.start()] != 1:
            return tags, nkeys, delay, False
        name_end = m.start()
        m = _SEPARATOR.search(props, name_end + 1)
        if m is None or props[m.start()] != 2:
            return tags, nkeys, delay, False
        value_end = m.start()
        name = props[p:name_end]
        value = props[name_end + 1 : value_end]
        if name == b"TAGS":
            code = java_hash_utf8(value)
            tags = code - (1 << 32) if code & 0x80000000 else code
        elif name in {b"UNIQ_KEY", b"KEYS"}:
            for key in [value] if name == b"UNIQ_KEY" else value.split(b" "):
                if key:
                    _check(nkeys < cap, "key arrays")
                    key_hashes[nkeys] = _crc32(key, prefix) & 0x7FFFFFFF
                    key_recs[nkeys] = rec
                    nkeys += 1
        elif name == b"DELAY":
            delay = True
        p = value_end + 1
    return tags, nkeys, delay, True


def walk(buf: Any, out: np.ndarray) -> tuple[int, int]:
    view = _view(buf)
    end = len(view)
    n = pos = 0
    while pos < end:
        if pos + HEADER_SIZE > end or n >= out.shape[1]:
            return n, pos
        size = _U32.unpack_from(view, pos)[0]
        if (
            size < HEADER_SIZE
            or pos + size > end
            or _U32.unpack_from(view, pos + 4)[0] != MESSAGE_MAGIC
        ):
            return n, pos
        body_len = _U32.unpack_from(view, pos + OFF_BODYLEN)[0]
        body_start = pos + HEADER_SIZE
        topic_pos = body_start + body_len
        if topic_pos + 1 > pos + size:
            return n, pos
        props_len_pos = topic_pos + 1 + view[topic_pos]
        if props_len_pos + 2 > pos + size:
            return n, pos
        props_len = (view[props_len_pos] << 8) | view[props_len_pos + 1]
        if props_len_pos + 2 + props_len != pos + size:
            return n, pos
        queue_offset = _I64.unpack_from(view, pos + OFF_QUEUEOFFSET)[0]
        out[:, n] = (pos, size, body_start, body_len, props_len_pos + 2, props_len, queue_offset)
        n += 1
        pos += size
    return n, -1


def gather(buf: Any, starts: Any, lens: Any, out: np.ndarray, offsets: np.ndarray) -> None:
    view = _view(buf)
    pos = 0
    for i, (s, n) in enumerate(zip(starts.tolist(), lens.tolist(), strict=False)):
        _check(s >= 0 and n >= 0 and s + n <= len(view) and pos + n <= len(out), "gather: piece")
        offsets[i] = pos
        out[pos : pos + n] = np.frombuffer(view[s : s + n], dtype=np.uint8)
        pos += n
    offsets[len(starts)] = pos


def rows(buf: Any, starts: Any, out: np.ndarray) -> None:
    view = _view(buf)
    width = out.shape[1]
    for i, s in enumerate(starts.tolist()):
        _check(s >= 0 and s + width <= len(view), "rows: start")
        out[i] = np.frombuffer(view[s : s + width], dtype=np.uint8)


def split_props(
    buf: Any,
    starts: Any,
    lens: Any,
    names: Any,
    name_starts: Any,
    pairs: np.ndarray,
    counts: np.ndarray,
    found: np.ndarray,
    repeated: np.ndarray,
) -> int:
    view = _view(buf)
    raw_names = bytes(_view(names))
    bounds = name_starts.tolist()
    wanted = [raw_names[a:b] for a, b in itertools.pairwise(bounds)]
    k = 0
    for r, (start, n) in enumerate(zip(starts.tolist(), lens.tolist(), strict=False)):
        _check(start >= 0 and n >= 0 and start + n <= len(view), "split_props: properties")
        props = bytes(view[start : start + n])
        first = k
        seen: set[bytes] = set()
        pos = 0
        while pos < n:
            stop = props.find(b"\x02", pos)
            stop = n if stop < 0 else stop
            sep = props.find(b"\x01", pos, stop)
            if sep > pos:  # a pair without a separator or name is skipped
                _check(k < len(pairs), "split_props: pairs")
                name = props[pos:sep]
                pairs[k] = (start + pos, sep - pos, start + sep + 1, stop - sep - 1)
                for w, want in enumerate(wanted):
                    if name == want:
                        found[r, w] = k  # a repeated name: the last one wins, as in a dict
                if name in seen:
                    repeated[0] = 1
                seen.add(name)
                k += 1
            pos = stop + 1
        counts[r] = k - first
    return k


def _records(buf: Any, starts: Any, body_start: Any = None, body_len: Any = None) -> memoryview:
    view = _view(buf)
    ok = bool(len(starts) == 0 or (starts.min() >= 0 and starts.max() + HEADER_SIZE <= len(view)))
    if ok and body_start is not None and len(starts):
        ends = body_start[: len(starts)] + body_len[: len(starts)]
        ok = bool(body_start.min() >= 0 and body_len.min() >= 0 and ends.max() <= len(view))
    _check(ok, "record")
    return view


def _wrap64(v: int) -> int:
    """``v`` wrapped to a signed 64-bit int, as the C multiplication leaves it."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def _hex_id(view: memoryview, p: int) -> bytes:
    host = bytes(view[p + OFF_STOREHOST : p + OFF_STOREHOST + 8])
    phys = bytes(view[p + OFF_PHYSICALOFFSET : p + OFF_PHYSICALOFFSET + 8])
    return (host.hex() + phys.hex()).upper().encode()


def _body_crc_ok(view: memoryview, p: int, start: int, n: int) -> bool:
    crc: int = _crc32(view[start : start + n]) & 0x7FFFFFFF
    return bool(crc == _U32.unpack_from(view, p + OFF_BODYCRC)[0])


def fields(
    buf: Any, starts: Any, body_start: Any, body_len: Any, out: np.ndarray, ids: np.ndarray
) -> int:
    view = _records(buf, starts, body_start, body_len)
    bad = -1
    for i, (p, s, n) in enumerate(
        zip(starts.tolist(), body_start.tolist(), body_len.tolist(), strict=False)
    ):
        out[i] = (
            _U32.unpack_from(view, p + OFF_SYSFLAG)[0],
            _I64.unpack_from(view, p + OFF_BORNTIMESTAMP)[0],
            _I64.unpack_from(view, p + OFF_STORETIMESTAMP)[0],
        )
        if bad < 0 and not _body_crc_ok(view, p, s, n):
            bad = i
        ids[i] = np.frombuffer(_hex_id(view, p), dtype=np.uint8)
    return bad


def check_bodies(
    buf: Any, starts: Any, body_start: Any, body_len: Any, sys_flag: np.ndarray
) -> int:
    view = _records(buf, starts, body_start, body_len)
    bad = -1
    for i, (p, s, n) in enumerate(
        zip(starts.tolist(), body_start.tolist(), body_len.tolist(), strict=False)
    ):
        sys_flag[i] = _U32.unpack_from(view, p + OFF_SYSFLAG)[0]
        if bad < 0 and not _body_crc_ok(view, p, s, n):
            bad = i
    return bad


def offset_ids(buf: Any, starts: Any, ids: np.ndarray) -> None:
    view = _records(buf, starts)
    for i, p in enumerate(starts.tolist()):
        ids[i] = np.frombuffer(_hex_id(view, p), dtype=np.uint8)


def encode_plain(
    body: Any,
    body_off: Any,
    ids: Any,
    id_first: int,
    tags: Any,
    tags_off: Any,
    has_tag: Any,
    uniq: Any,
    tag_prefix: Any,
    magic: int,
    out: np.ndarray,
) -> None:
    body_b, ids_b, tags_b = bytes(_view(body)), bytes(_view(ids)), bytes(_view(tags))
    uniq_b, prefix_b = bytes(_view(uniq)), bytes(_view(tag_prefix))
    n = len(body_off) - 1
    _check(n >= 0 and len(ids_b) >= (n * 32 if id_first < 0 else 28), "encode_plain: arrays")
    offs, toffs, has = body_off.tolist(), tags_off.tolist(), has_tag.tolist()
    parts = []
    for i in range(n):
        b0, b1 = offs[i], offs[i + 1]
        _check(0 <= b0 <= b1 <= len(body_b), "encode_plain: message")
        piece = body_b[b0:b1]
        if id_first < 0:
            msg_id = ids_b[i * 32 : i * 32 + 32]
        else:
            msg_id = ids_b[:28] + b"%04X" % ((id_first + i) & 0xFFFF)
        props = uniq_b + msg_id + b"\x02"
        if has[i]:
            t0, t1 = toffs[i], toffs[i + 1]
            _check(0 <= t0 <= t1 <= len(tags_b), "encode_plain: message")
            props += prefix_b + tags_b[t0:t1] + b"\x02"
        total = 22 + len(piece) + len(props)
        head = struct.pack(">iIiii", total, magic, _crc32(piece) & 0x7FFFFFFF, 0, len(piece))
        parts += [head, piece, struct.pack(">H", len(props)), props]
    data = b"".join(parts)
    _check(len(data) <= len(out), "encode_plain: message")
    out[: len(data)] = np.frombuffer(data, dtype=np.uint8)


def _plain_parts(m: Any, topic: str, max_body: int) -> tuple[bytes, bytes] | None:
    """A message's body and UTF-8 tags (b"" without) if it is only those, else None."""
    if type(m.topic) is not str or m.topic != topic:
        return None
    if m._keys or m.properties or m.delay_level or m.flag:
        return None
    body, tags = m.body, m.tags
    if type(body) is not bytes or not 0 < len(body) <= max_body:
        return None
    if tags is None or (isinstance(tags, str) and not tags):
        return body, b""
    if not isinstance(tags, str):
        return None
    try:
        raw = tags.encode()
    except UnicodeEncodeError:
        return None
    return (body, raw) if b"\x01" not in raw and b"\x02" not in raw else None


def encode_messages(
    msgs: Any, topic: str, head: bytes, first: int, max_body: int, topic_len: int
) -> tuple[bytes, list[int]] | None:
    if not isinstance(topic, str) or not isinstance(head, bytes) or len(head) != 28:
        raise TypeError("encode_messages: a str topic and a 28-byte head")
    parts, sizes = [], []
    for i, m in enumerate(msgs):
        got = _plain_parts(m, topic, max_body)
        if got is None:
            return None
        body, tags = got
        props = (b"TAGS\x01" + tags + b"\x02" if tags else b"") + b"UNIQ_KEY\x01" + head
        props += b"%04X\x02" % ((first + i) & 0xFFFF)
        if len(props) > 32767:
            return None
        crc = _crc32(body) & 0x7FFFFFFF
        parts += [struct.pack(">iIiii", 22 + len(body) + len(props), MESSAGE_MAGIC, crc, 0,
                              len(body)), body, struct.pack(">H", len(props)), props]  # fmt: skip
        sizes.append(HEADER_SIZE + len(body) + 1 + topic_len + 2 + len(props))
    return b"".join(parts), sizes


def fill(
    buf: Any,
    specials: Any,
    special_starts: Any,
    compressed_flag: int,
    starts: Any,
    body_start: Any,
    body_len: Any,
    props_start: Any,
    props_len: Any,
    queue_offset: Any,
    n: int,
    ints: np.ndarray,
    body: np.ndarray,
    body_off: np.ndarray,
    pair_data: np.ndarray,
    pair_off: np.ndarray,
    map_off: np.ndarray,
    special: np.ndarray,
    special_off: np.ndarray,
    valid: np.ndarray,
) -> tuple[int, int]:
    """See connector.spark.columnar: status 1 + a record whose body CRC is bad, 0 to go
    row by row (a compressed body, a property named twice), -1 with the columns done."""
    view = _records(buf, starts[:n], body_start[:n], body_len[:n])
    raw = bytes(_view(specials))
    b = special_starts.tolist()
    uniq_name, tags_name, keys_name = raw[b[0] : b[1]], raw[b[1] : b[2]], raw[b[2] : b[3]]
    cols: dict[str, list[bytes]] = {
        "body": [],
        "names": [],
        "values": [],
        "msg": [],
        "tags": [],
        "keys": [],
    }
    offs: dict[str, list[int]] = {k: [] for k in ("body", "pairs", "map", "msg", "tags", "keys")}
    lens = {k: 0 for k in cols}
    npairs = 0
    row_by_row = False

    def put(col: str, off: str | None, data: bytes) -> None:
        if off is not None:
            offs[off].append(lens[col])
        cols[col].append(data)
        lens[col] += len(data)

    for i in range(n):
        p, s, blen = int(starts[i]), int(body_start[i]), int(body_len[i])
        if not _body_crc_ok(view, p, s, blen):
            return i + 1, npairs
        if row_by_row:
            continue
        if _U32.unpack_from(view, p + OFF_SYSFLAG)[0] & compressed_flag:
            row_by_row = True
            continue
        ints[0, i] = queue_offset[i]
        ints[1, i] = _wrap64(_I64.unpack_from(view, p + OFF_BORNTIMESTAMP)[0] * 1000)
        ints[2, i] = _wrap64(_I64.unpack_from(view, p + OFF_STORETIMESTAMP)[0] * 1000)
        put("body", "body", bytes(view[s : s + blen]))
        offs["map"].append(npairs)
        ps = int(props_start[i])
        props = bytes(view[ps : ps + int(props_len[i])])
        names: set[bytes] = set()
        special_values: dict[bytes, bytes] = {}
        pos = 0
        while pos < len(props):
            stop = props.find(b"\x02", pos)
            stop = len(props) if stop < 0 else stop
            sep = props.find(b"\x01", pos, stop)
            if sep > pos:
                name, value = props[pos:sep], props[sep + 1 : stop]
                if name in names:
                    row_by_row = True  # named twice: the last one wins, as in a dict
                    break
                names.add(name)
                put("names", "pairs", name)
                put("values", None, value)
                npairs += 1
                if name in (uniq_name, tags_name, keys_name):
                    special_values.setdefault(name, value)
            pos = stop + 1
        if row_by_row:
            continue
        uniq = special_values.get(uniq_name, b"")
        put("msg", "msg", uniq or _hex_id(view, p))
        valid[0, i] = True
        for col, name, row in (("tags", tags_name, 1), ("keys", keys_name, 2)):
            value = special_values.get(name, b"")
            put(col, col, value)
            valid[row, i] = len(value) > 0
    if row_by_row:
        return 0, npairs
    value_offs: list[int] = []
    at = 0
    for v in cols["values"]:
        value_offs.append(at)
        at += len(v)
    for target, data, off_array, off_list in (
        (body, cols["body"], body_off, offs["body"]),
        (pair_data[0], cols["names"], pair_off[0], offs["pairs"]),
        (pair_data[1], cols["values"], pair_off[1], value_offs),
        (special[0], cols["msg"], special_off[0], offs["msg"]),
        (special[1], cols["tags"], special_off[1], offs["tags"]),
        (special[2], cols["keys"], special_off[2], offs["keys"]),
    ):
        joined = b"".join(data)
        _check(len(joined) <= len(target) and len(off_list) < len(off_array), "fill: columns")
        target[: len(joined)] = np.frombuffer(joined, dtype=np.uint8)
        off_array[: len(off_list)] = off_list
        off_array[len(off_list)] = len(joined)
    map_off[:n] = offs["map"]
    map_off[n] = npairs
    return -1, npairs
