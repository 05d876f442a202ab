"""Compiled loops for the batch hot paths (numba, nopython, no GIL).

Python pays tens of nanoseconds per bytecode on small hardware, so the
per-message work of a batch (walking the wire entries, body CRCs, finding
TAGS / KEYS / UNIQ_KEY in the properties, hashing keys, laying out records,
threading index chains) runs here, once per batch. Every function has a
plain-Python twin elsewhere (``connector.protocol`` codecs, ``index.key_hash``,
``hashing.tags_code``) and the tests check they agree.

Arrays are native-endian int64 / uint8; big-endian file fields are written
byte by byte (numba does not support non-native byte order).
"""

# numba needs explicit np.int64 casts that mypy types apart from int; the twins are typed
# mypy: disable-error-code="assignment,return-value,arg-type"
from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np
from numba import njit

from connector.protocol.jit import (
    CRC_TABLE,
    byte_at,
    copy_bytes,
    crc32,
    get_i32,
    get_u32,
    put_i32,
    put_i64,
)
from connector.protocol.names import NAME_CHARACTER

__all__ = [
    "BATCH_ERRORS",
    "encode_batch_records",
    "encode_single_records",
    "index_insert",
    "scan_batch",
]

MESSAGE_MAGIC = 0xDAA320A7
ENTRY_HEAD = 20  # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN
ENTRY_OVERHEAD = 22  # + PROPLEN
RECORD_FIXED = 88 + 3  # header through BODYLEN, TOPICLEN, PROPLEN

BATCH_ERRORS = {
    1: "batch truncated inside entry {index}",
    2: "batch entry {index} has a bad magic code",
    3: "batch entry {index} claims more bytes than the batch has",
    4: "batch entry {index} has an empty body",
    5: "batch entry {index} has a body larger than max_message_size",
    6: "batch entry {index}: body length overruns the entry",
    7: "batch entry {index}: lengths do not add up",
    8: "batch entry {index}: body CRC mismatch",
    9: "batch holds more than the allowed number of messages",
    10: "empty batch",
    11: "batch entry {index}: properties are not name\\x01value\\x02 pairs",
}


@njit(cache=True, nogil=True, inline="always")
def _java_hash_utf8(buf: Any, p: int, end: int, h: int) -> int:  # pragma: no cover - compiled
    """Continue Java's String.hashCode over UTF-8 bytes as UTF-16 code units."""
    while p < end:
        b0 = np.int64(byte_at(buf, p))
        cp = 0xFFFD
        n = 1
        if b0 < 0x80:
            cp = b0
        elif 0xC2 <= b0 < 0xE0 and p + 1 < end and (byte_at(buf, p + 1) & 0xC0) == 0x80:
            cp = ((b0 & 0x1F) << 6) | (byte_at(buf, p + 1) & 0x3F)
            n = 2
        elif (
            0xE0 <= b0 < 0xF0
            and p + 2 < end
            and (byte_at(buf, p + 1) & 0xC0) == 0x80
            and (byte_at(buf, p + 2) & 0xC0) == 0x80
        ):
            cp = (
                ((b0 & 0x0F) << 12)
                | ((byte_at(buf, p + 1) & 0x3F) << 6)
                | (byte_at(buf, p + 2) & 0x3F)
            )
            n = 3
        elif (
            0xF0 <= b0 < 0xF5
            and p + 3 < end
            and (byte_at(buf, p + 1) & 0xC0) == 0x80
            and (byte_at(buf, p + 2) & 0xC0) == 0x80
            and (byte_at(buf, p + 3) & 0xC0) == 0x80
        ):
            cp = (
                ((b0 & 0x07) << 18)
                | ((byte_at(buf, p + 1) & 0x3F) << 12)
                | ((byte_at(buf, p + 2) & 0x3F) << 6)
                | (byte_at(buf, p + 3) & 0x3F)
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


@njit(cache=True, nogil=True)
def _scan_batch(
    buf: Any,
    max_body: int,
    max_count: int,
    prefix: int,
    t: Any,
    starts: Any,
    body_lens: Any,
    props_lens: Any,
    flags: Any,
    crcs: Any,
    tags_codes: Any,
    key_hashes: Any,
    key_msgs: Any,
) -> tuple[int, int, int, bool]:  # pragma: no cover - compiled
    """Walk and check every entry; collect CRCs, TAGS hashes and KEYS / UNIQ_KEY hashes,
    and note whether any entry has a DELAY property.

    Helpers are ``inline="always"``: called, a numba helper that takes arrays
    pays reference counting every time, which dominated this loop once.
    Returns (status, entries, keys, delayed); status 0 is success, else a BATCH_ERRORS key.
    """
    end = buf.shape[0]
    if end == 0:
        return 10, 0, 0, False
    pos = 0
    n = 0
    nkeys = 0
    delayed = False
    while pos < end:
        if n >= max_count or n >= starts.shape[0]:
            return 9, n, nkeys, False
        if end - pos < ENTRY_OVERHEAD:
            return 1, n, nkeys, False
        total = get_i32(buf, pos)
        magic = get_u32(buf, pos + 4)
        if magic not in (MESSAGE_MAGIC, 0):  # 0: a RocketMQ client's (no CRC either)
            return 2, n, nkeys, False
        if total < ENTRY_OVERHEAD or total > end - pos:
            return 3, n, nkeys, False
        body_len = get_i32(buf, pos + 16)
        if body_len <= 0:
            return 4, n, nkeys, False
        if body_len > max_body:
            return 5, n, nkeys, False
        body_end = pos + ENTRY_HEAD + body_len
        if body_end + 2 > pos + total:
            return 6, n, nkeys, False
        props_len = (np.int64(byte_at(buf, body_end)) << 8) | np.int64(byte_at(buf, body_end + 1))
        if props_len & 0x8000 or body_end + 2 + props_len != pos + total:
            return 7, n, nkeys, False
        crc = crc32(t, buf, pos + ENTRY_HEAD, body_end, 0) & 0x7FFFFFFF
        if magic != 0 and crc != get_i32(buf, pos + 8):
            return 8, n, nkeys, False
        starts[n] = pos
        body_lens[n] = body_len
        props_lens[n] = props_len
        flags[n] = get_i32(buf, pos + 12)
        crcs[n] = crc
        tags_codes[n], nkeys, delay, props_ok = _scan_props(
            buf, body_end + 2, pos + total, t, prefix, n, key_hashes, key_msgs, nkeys
        )
        if not props_ok:
            return 11, n, nkeys, False
        delayed |= delay
        n += 1
        pos += total
    return 0, n, nkeys, delayed


class ScannedBatch:
    """Columns of a validated wire batch (see ``connector.protocol.batch``)."""

    __slots__ = (
        "body_lens",
        "count",
        "crcs",
        "data",
        "delayed",
        "flags",
        "key_hashes",
        "key_msgs",
        "props_lens",
        "starts",
        "tags_codes",
    )

    def __init__(
        self,
        data: np.ndarray,
        count: int,
        starts: np.ndarray,
        body_lens: np.ndarray,
        props_lens: np.ndarray,
        flags: np.ndarray,
        crcs: np.ndarray,
        tags_codes: np.ndarray,
        key_hashes: np.ndarray,
        key_msgs: np.ndarray,
        delayed: bool = False,
    ) -> None:
        self.data = data
        self.delayed = delayed  # some entry has a DELAY property
        self.count = count
        self.starts = starts[:count]
        self.body_lens = body_lens[:count]
        self.props_lens = props_lens[:count]
        self.flags = flags[:count]
        self.crcs = crcs[:count]
        self.tags_codes = tags_codes[:count]
        self.key_hashes = key_hashes
        self.key_msgs = key_msgs


def scan_batch(
    data: bytes | memoryview, *, topic: str, max_message_size: int, max_count: int = 1 << 20
) -> tuple[ScannedBatch | None, str]:
    """Validate a wire batch and pull out every column the store needs.

    Returns ``(batch, "")`` or ``(None, reason)``; a defect anywhere rejects it all.
    """
    buf = np.frombuffer(data, dtype=np.uint8)
    cap = buf.shape[0] // (ENTRY_OVERHEAD + 1) + 1
    key_cap = buf.shape[0] // 2 + 1
    block = np.empty(6 * cap + 2 * key_cap, dtype=np.int64)
    starts, body_lens, props_lens, flags, crcs, tags_codes = (
        block[i * cap : (i + 1) * cap] for i in range(6)
    )
    key_hashes = block[6 * cap : 6 * cap + key_cap]
    key_msgs = block[6 * cap + key_cap :]
    status, n, nkeys, delayed = _scan_batch(
        buf, max_message_size, max_count, zlib.crc32(f"{topic}#".encode()), CRC_TABLE,
        starts, body_lens, props_lens, flags, crcs, tags_codes, key_hashes, key_msgs,
    )  # fmt: skip
    if status:
        return None, BATCH_ERRORS[status].format(index=n)
    return ScannedBatch(buf, n, starts, body_lens, props_lens, flags, crcs, tags_codes,
                        key_hashes[:nkeys], key_msgs[:nkeys], delayed), ""  # fmt: skip


@njit(cache=True, nogil=True)
def encode_batch_records(
    src: Any,
    starts: Any,
    body_lens: Any,
    props_lens: Any,
    flags: Any,
    crcs: Any,
    tags_codes: Any,
    first: int,
    count: int,
    rel: Any,
    dst: Any,
    template: Any,
    topic: Any,
    first_queue_offset: int,
    phys_base: int,
    out_offsets: Any,
    out_sizes: Any,
    cq_out: Any,
) -> None:  # pragma: no cover - compiled
    """Write records ``first .. first+count`` of a scanned batch into ``dst``.

    ``rel[j]`` is record j's position in ``dst``. ``template`` is an 88-byte
    record header with the fields shared by the batch filled in (magic, queue
    id, sys flag, born/store time and hosts); each record patches its own
    size, CRC, flag, offsets and body length. ``cq_out`` receives the
    records' ConsumeQueue entries (20 bytes each).
    """
    tlen = topic.shape[0]
    for i in range(count):
        j = first + i
        p = rel[j]
        blen = body_lens[j]
        plen = props_lens[j]
        size = RECORD_FIXED + tlen + blen + plen
        phys = phys_base + p
        copy_bytes(dst, p, template, 0, 88)
        put_i32(dst, p, size)
        put_i32(dst, p + 8, crcs[j])
        put_i32(dst, p + 16, flags[j])
        put_i64(dst, p + 20, first_queue_offset + i)
        put_i64(dst, p + 28, phys)
        put_i32(dst, p + 84, blen)
        s = starts[j] + ENTRY_HEAD
        copy_bytes(dst, p + 88, src, s, blen)
        q = p + 88 + blen
        dst[q] = tlen
        copy_bytes(dst, q + 1, topic, 0, tlen)
        q += 1 + tlen
        s += blen  # PROPLEN and properties are the same bytes in both layouts
        copy_bytes(dst, q, src, s, 2 + plen)
        c = i * 20
        put_i64(cq_out, c, phys)
        put_i32(cq_out, c + 8, size)
        put_i64(cq_out, c + 12, tags_codes[j])
        out_offsets[j] = phys
        out_sizes[j] = size


# columns of the per-message table ``encode_single_records`` reads (filled by
# ``commitlog.append_singles``, one column at a time)
(S_QUEUE_ID, S_FLAG, S_SYS_FLAG, S_BORN_TS, S_RECONSUME, S_TAGS_CODE, S_BORN_HOST, S_BODY_LEN,
 S_PROPS_LEN, S_TOPIC, S_SLOT) = range(11)  # fmt: skip
SINGLE_COLUMNS = 11
# columns of ``topics`` (one row per topic of the group): where its name lies in ``src``, its
# length and the CRC-32 of ``topic#`` its keys hash under
T_START, T_LEN, T_KEY_PREFIX = range(3)
# columns of ``out``: each record's CommitLog offset, size and queue offset
O_OFFSET, O_SIZE, O_QUEUE_OFFSET = range(3)
# columns of ``slots`` (one row per queue of the group): its next queue offset (in), how many
# of the group's messages go to it and the first of its rows in ``cq_out`` (out)
Q_BASE, Q_COUNT, Q_FIRST_ROW = range(3)


@njit(cache=True)
def encode_single_records(
    src: Any,
    table: Any,
    topics: Any,
    slots: Any,
    first: int,
    dst: Any,
    pos: int,
    limit: int,
    phys_base: int,
    store_timestamp: int,
    store_host: int,
    out: Any,
    cq_out: Any,
    key_hashes: Any,
    nkeys: int,
    crc_table: Any,
) -> tuple[int, int, int]:  # pragma: no cover - compiled
    """Write the records of messages ``first, first+1, ...`` at ``dst[pos:]`` while they end
    by ``limit``; returns (next message, next position, key count).

    The messages come from different writers: each row of ``table`` (columns
    ``S_*``) holds one message's own header fields, its body and properties
    lengths (bodies lie back to back at the start of ``src``, then all
    properties), its topic (a row of ``topics``) and its queue (a row of
    ``slots``). A message's queue
    offset is its queue's base plus the number of the group's messages for
    that queue before it. ``phys_base`` is the CommitLog offset of ``dst[0]``.
    ``out[j]`` gets record j's offset, size and queue offset; ``cq_out`` its
    ConsumeQueue entry, 20 bytes at row ``slots[q, Q_FIRST_ROW]`` + rank, so
    each queue's entries are consecutive; the KEYS and UNIQ_KEY hashes found
    in the properties go to ``key_hashes`` (hash, message) from ``nkeys`` on.
    Holds the GIL: the caller is the event loop, and releasing it per call
    would hand it to the flush thread for a while.
    """
    n = table.shape[0]
    nslots = slots.shape[0]
    rank = np.zeros(nslots, dtype=np.int64)
    body_at = 0
    props_at = 0
    for j in range(n):
        props_at += table[j, S_BODY_LEN]
        rank[table[j, S_SLOT]] += 1
    row = 0
    for q in range(nslots):
        slots[q, Q_COUNT] = rank[q]
        slots[q, Q_FIRST_ROW] = row
        row += rank[q]
        rank[q] = 0
    for j in range(first):  # where message ``first`` starts in src, and its queue ranks
        body_at += table[j, S_BODY_LEN]
        props_at += table[j, S_PROPS_LEN]
        rank[table[j, S_SLOT]] += 1
    j = first
    while j < n:
        blen = table[j, S_BODY_LEN]
        plen = table[j, S_PROPS_LEN]
        t = table[j, S_TOPIC]
        tlen = topics[t, T_LEN]
        size = RECORD_FIXED + tlen + blen + plen
        if pos + size > limit:
            break
        q = table[j, S_SLOT]
        queue_offset = slots[q, Q_BASE] + rank[q]
        c = (slots[q, Q_FIRST_ROW] + rank[q]) * 20
        rank[q] += 1
        p = pos
        phys = phys_base + p
        put_i32(dst, p, size)
        put_i32(dst, p + 4, MESSAGE_MAGIC)
        put_i32(dst, p + 8, crc32(crc_table, src, body_at, body_at + blen, 0) & 0x7FFFFFFF)
        put_i32(dst, p + 12, table[j, S_QUEUE_ID])
        put_i32(dst, p + 16, table[j, S_FLAG])
        put_i64(dst, p + 20, queue_offset)
        put_i64(dst, p + 28, phys)
        put_i32(dst, p + 36, table[j, S_SYS_FLAG])
        put_i64(dst, p + 40, table[j, S_BORN_TS])
        put_i64(dst, p + 48, table[j, S_BORN_HOST])
        put_i64(dst, p + 56, store_timestamp)
        put_i64(dst, p + 64, store_host)
        put_i32(dst, p + 72, table[j, S_RECONSUME])
        put_i64(dst, p + 76, 0)
        put_i32(dst, p + 84, blen)
        copy_bytes(dst, p + 88, src, body_at, blen)
        e = p + 88 + blen
        dst[np.uint64(e)] = tlen
        copy_bytes(dst, e + 1, src, topics[t, T_START], tlen)
        e += 1 + tlen
        dst[np.uint64(e)] = (plen >> 8) & 0xFF
        dst[np.uint64(e + 1)] = plen & 0xFF
        copy_bytes(dst, e + 2, src, props_at, plen)
        put_i64(cq_out, c, phys)
        put_i32(cq_out, c + 8, size)
        put_i64(cq_out, c + 12, table[j, S_TAGS_CODE])
        out[j, O_OFFSET] = phys
        out[j, O_SIZE] = size
        out[j, O_QUEUE_OFFSET] = queue_offset
        _, nkeys, _, _ = _scan_props(
            src, props_at, props_at + plen, crc_table, topics[t, T_KEY_PREFIX], j,
            key_hashes[:, 0], key_hashes[:, 1], nkeys,
        )  # fmt: skip
        body_at += blen
        props_at += plen
        pos += size
        j += 1
    return j, pos, nkeys


@njit(cache=True, nogil=True)
def index_insert(
    buf: Any,
    slot_num: int,
    count: int,
    slot_count: int,
    hashes: Any,
    offsets: Any,
    time_diffs: Any,
) -> tuple[int, int]:  # pragma: no cover - compiled
    """Append index entries and thread them onto their buckets; returns (count, slots used)."""
    entries_at = 40 + slot_num * 4
    for j in range(hashes.shape[0]):
        h = hashes[j]
        spos = 40 + np.int64(np.uint64(h) % np.uint64(slot_num)) * 4  # h >= 0: key_hash
        prev = get_i32(buf, spos)
        if prev <= 0 or prev >= count:
            if prev == 0:
                slot_count += 1
            prev = 0  # empty, or left pointing at an unwritten entry by a crash
        e = entries_at + count * 20
        put_i32(buf, e, h)
        put_i64(buf, e + 4, offsets[j])
        put_i32(buf, e + 12, time_diffs[j])
        put_i32(buf, e + 16, prev)
        put_i32(buf, spos, count)
        count += 1
    return count, slot_count


@njit(cache=True, nogil=True)
def check_records(
    data: Any, starts: Any, sizes: Any, body_starts: Any, body_ends: Any
) -> int:  # pragma: no cover - compiled
    """Check each record's TOTALSIZE and magic and find its body; -1 or the first bad index."""
    for j in range(starts.shape[0]):
        p = starts[j]
        size = sizes[j]
        if p + size > data.shape[0] or get_i32(data, p) != size:
            return j
        if get_u32(data, p + 4) != MESSAGE_MAGIC:
            return j
        blen = get_i32(data, p + 84)
        if blen < 0 or 88 + blen + 3 > size:
            return j
        body_starts[j] = p + 88
        body_ends[j] = p + 88 + blen
    return -1


LOG_CHUNK_FULL = 0  # stopped after max_records: call again from the returned position
LOG_SEGMENT_END = 1  # a BLANK record, or exactly the end of the segment
LOG_END_OF_DATA = 2  # zeros where the next record would start
LOG_ERRORS = {
    3: "no room for a record header",
    4: "bad magic code",
    5: "record size out of range",
    6: "PHYSICALOFFSET is not the record's position",
    7: "body length out of range",
    8: "topic length out of range",
    9: "lengths do not add up to TOTALSIZE",
    10: "body CRC mismatch",
    11: "BLANK record does not fill the rest of the segment",
    12: "topic is not a valid name",
    13: "properties are not name\\x01value\\x02 pairs",
}


@njit(cache=True, nogil=True, inline="always")
def _is_separator(b: int) -> bool:  # pragma: no cover - compiled
    """\\x01 (between name and value) or \\x02 (after each pair)."""
    return 0 < b < 3


@njit(cache=True, nogil=True, inline="always")
def _scan_props(
    buf: Any,
    p: int,
    pend: int,
    t: Any,
    prefix: int,
    rec: int,
    key_hashes: Any,
    key_recs: Any,
    nkeys: int,
) -> tuple[int, int, bool, bool]:  # pragma: no cover - compiled
    """TAGS hash and KEYS / UNIQ_KEY hashes of one record's properties, whether it
    has a DELAY (delay level) property, and whether the properties are well
    formed: nothing but ``name\\x01value\\x02`` pairs with a non-empty name
    (``connector.protocol.properties.properties_well_formed``). Scanning stops
    at the first defect.

    Inlined into every scan (a call per record would pay reference counting
    on its array arguments).
    """
    tags_code = 0
    delay = False
    while p < pend:
        name_end = p
        while name_end < pend and not _is_separator(byte_at(buf, name_end)):
            name_end += 1
        if name_end >= pend or name_end == p or byte_at(buf, name_end) != 1:
            return tags_code, nkeys, delay, False
        value = name_end + 1
        value_end = value
        while value_end < pend and not _is_separator(byte_at(buf, value_end)):
            value_end += 1
        if value_end >= pend or byte_at(buf, value_end) != 2:
            return tags_code, nkeys, delay, False
        nlen = name_end - p
        if (
            nlen == 4
            and byte_at(buf, p) == 84
            and byte_at(buf, p + 1) == 65
            and byte_at(buf, p + 2) == 71
            and byte_at(buf, p + 3) == 83
        ):  # TAGS
            code = _java_hash_utf8(buf, value, value_end, 0)
            tags_code = code - (1 << 32) if code & 0x80000000 else code
        elif (
            nlen == 8
            and byte_at(buf, p) == 85
            and byte_at(buf, p + 1) == 78
            and byte_at(buf, p + 2) == 73
            and byte_at(buf, p + 3) == 81
            and byte_at(buf, p + 4) == 95
            and byte_at(buf, p + 5) == 75
            and byte_at(buf, p + 6) == 69
            and byte_at(buf, p + 7) == 89
        ):  # UNIQ_KEY
            if value_end > value:
                key_hashes[nkeys] = crc32(t, buf, value, value_end, prefix) & 0x7FFFFFFF
                key_recs[nkeys] = rec
                nkeys += 1
        elif (
            nlen == 4
            and byte_at(buf, p) == 75
            and byte_at(buf, p + 1) == 69
            and byte_at(buf, p + 2) == 89
            and byte_at(buf, p + 3) == 83
        ):  # KEYS, space separated
            k = value
            while k < value_end:
                while k < value_end and byte_at(buf, k) == 32:
                    k += 1
                kend = k
                while kend < value_end and byte_at(buf, kend) != 32:
                    kend += 1
                if kend > k:
                    key_hashes[nkeys] = crc32(t, buf, k, kend, prefix) & 0x7FFFFFFF
                    key_recs[nkeys] = rec
                    nkeys += 1
                k = kend
        elif (
            nlen == 5
            and byte_at(buf, p) == 68
            and byte_at(buf, p + 1) == 69
            and byte_at(buf, p + 2) == 76
            and byte_at(buf, p + 3) == 65
            and byte_at(buf, p + 4) == 89
        ):  # DELAY
            delay = True
        p = value_end + 1
    return tags_code, nkeys, delay, True


_TOPIC_BYTES = np.zeros(256, dtype=np.bool_)  # the bytes a topic name may hold
_TOPIC_BYTES[[b for b in range(128) if re.fullmatch(NAME_CHARACTER, chr(b))]] = True


@njit(cache=True, nogil=True, inline="always")
def _topic_ok(buf: Any, p: int, n: int) -> bool:  # pragma: no cover - compiled
    """Whether ``buf[p:p+n]`` is a legal topic name: 1+ bytes of ``[%|a-zA-Z0-9_-]``."""
    if n == 0:
        return False
    for i in range(p, p + n):
        if not _TOPIC_BYTES[byte_at(buf, i)]:
            return False
    return True


@njit(cache=True, nogil=True)
def scan_log(
    buf: Any,
    pos: int,
    base: int,
    check_crc: bool,
    t: Any,
    offsets: Any,
    sizes: Any,
    queue_ids: Any,
    queue_offsets: Any,
    store_ts: Any,
    topic_pos: Any,
    topic_lens: Any,
    topic_crcs: Any,
    tags_codes: Any,
    key_hashes: Any,
    key_recs: Any,
) -> tuple[int, int, int, int]:  # pragma: no cover - compiled
    """Check records of one segment (``buf``, starting at global ``base``) from ``pos``.

    Fills the per-record arrays (at most their length) and returns
    ``(status, records, next_pos, keys)``: a LOG_* status or a LOG_ERRORS key
    for the record at ``next_pos``. The key arrays must have room for one
    record's keys (properties length / 2 + 1, at most 16,384).
    """
    limit = buf.shape[0]
    n = 0
    nkeys = 0
    while True:
        if pos >= limit:
            return LOG_SEGMENT_END, n, pos, nkeys
        if n >= offsets.shape[0]:
            return LOG_CHUNK_FULL, n, pos, nkeys
        if limit - pos < 8:
            return 3, n, pos, nkeys
        total = get_i32(buf, pos)
        magic = get_u32(buf, pos + 4)
        if total == 0 and magic == 0:
            return LOG_END_OF_DATA, n, pos, nkeys
        if magic == 0xCBD43194:
            if total != limit - pos:
                return 11, n, pos, nkeys
            return LOG_SEGMENT_END, n, limit, nkeys
        if magic != MESSAGE_MAGIC:
            return 4, n, pos, nkeys
        if total < 91 or total > limit - pos:
            return 5, n, pos, nkeys
        phys = (np.int64(get_i32(buf, pos + 28)) << 32) | get_u32(buf, pos + 32)
        if phys != base + pos:
            return 6, n, pos, nkeys
        body_len = get_i32(buf, pos + 84)
        if body_len < 0 or 88 + body_len + 3 > total:
            return 7, n, pos, nkeys
        tp = pos + 88 + body_len
        tl = np.int64(byte_at(buf, tp))
        if tl > 127 or tp + 1 + tl + 2 > pos + total:
            return 8, n, pos, nkeys
        pp = tp + 1 + tl
        plen = (np.int64(byte_at(buf, pp)) << 8) | np.int64(byte_at(buf, pp + 1))
        if plen & 0x8000 or pp + 2 + plen != pos + total:
            return 9, n, pos, nkeys
        if nkeys + plen // 2 + 1 > key_hashes.shape[0]:
            return LOG_CHUNK_FULL, n, pos, nkeys  # no room for every key this record may have
        if check_crc:
            crc = crc32(t, buf, pos + 88, tp, 0) & 0x7FFFFFFF
            if crc != get_i32(buf, pos + 8):
                return 10, n, pos, nkeys
        if not _topic_ok(buf, tp + 1, tl):
            return 12, n, pos, nkeys
        c = crc32(t, buf, tp + 1, pp, 0)
        topic_crcs[n] = c
        c ^= 0xFFFFFFFF
        c = t[0, (c ^ 0x23) & 0xFF] ^ (c >> 8)  # then "#": the index key prefix
        prefix = c ^ 0xFFFFFFFF
        offsets[n] = base + pos
        sizes[n] = total
        queue_ids[n] = get_i32(buf, pos + 12)
        queue_offsets[n] = (np.int64(get_i32(buf, pos + 20)) << 32) | get_u32(buf, pos + 24)
        store_ts[n] = (np.int64(get_i32(buf, pos + 56)) << 32) | get_u32(buf, pos + 60)
        topic_pos[n] = tp + 1
        topic_lens[n] = tl
        # the body CRC does not cover topic and properties: their checks catch a record
        # whose end was never written (zeros where a name or the last \x02 must be)
        tags_codes[n], record_keys, _, props_ok = _scan_props(
            buf, pp + 2, pos + total, t, prefix, n, key_hashes, key_recs, nkeys
        )
        if not props_ok:
            return 13, n, pos, nkeys
        nkeys = record_keys
        n += 1
        pos += total
