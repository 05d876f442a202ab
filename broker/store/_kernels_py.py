"""The store's kernels in plain Python: the twin of ``_kernels.c``, function for function.

Used where the C module was not built, under ``PYMQ_KERNELS=python``, and by the tests
as the reference (connector/protocol/native.py). Same arguments and results; statuses
and columns as broker/store/kernels.py describes them. Slow but safe: every read goes
through bounds-checked slices of the buffer.
"""

from __future__ import annotations

import itertools
import re
import struct
from typing import Any

import numpy as np

from connector.protocol._kernels_py import _check, _view, scan_props
from connector.protocol._kernels_py import crc32 as _crc32
from connector.protocol.names import NAME_CHARACTER

__all__ = [
    "check_records",
    "configure",
    "crc32",
    "encode_batch_records",
    "encode_single_records",
    "group_queues",
    "index_insert",
    "scan_batch",
    "scan_log",
    "set_topic_bytes",
]

MESSAGE_MAGIC = 0xDAA320A7
BLANK_MAGIC = 0xCBD43194
ENTRY_HEAD = 20
ENTRY_OVERHEAD = 22
RECORD_FIXED = 91
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# the bytes a topic name may hold (broker.store.kernels sets the same table on either module)
_topic_bytes = bytes(int(re.fullmatch(NAME_CHARACTER, chr(b)) is not None) for b in range(256))


def configure(address: int, min_bytes: int) -> None:
    """The C module's long-CRC setting; nothing to set here."""


def crc32(data: Any, crc: int = 0) -> int:
    return _crc32(data, crc)


def set_topic_bytes(table: Any) -> None:
    global _topic_bytes  # noqa: PLW0603 - set once, by broker.store.kernels
    raw = bytes(_view(table))
    _check(len(raw) == 256, "table must have 256 entries")
    _topic_bytes = raw


def scan_batch(
    buf: Any,
    max_body: int,
    max_count: int,
    prefix: int,
    starts: np.ndarray,
    body_lens: np.ndarray,
    props_lens: np.ndarray,
    flags: np.ndarray,
    crcs: np.ndarray,
    tags_codes: np.ndarray,
    key_hashes: np.ndarray,
    key_msgs: np.ndarray,
) -> tuple[int, int, int, bool]:
    view = _view(buf)
    end = len(view)
    if end == 0:
        return 10, 0, 0, False
    cap = min(len(starts), len(body_lens), len(props_lens), len(flags), len(crcs), len(tags_codes))
    kcap = min(len(key_hashes), len(key_msgs))
    pos = n = nkeys = 0
    delayed = False
    while pos < end:
        if n >= max_count or n >= cap:
            return 9, n, nkeys, False
        if end - pos < ENTRY_OVERHEAD:
            return 1, n, nkeys, False
        total = _I32.unpack_from(view, pos)[0]
        magic = _U32.unpack_from(view, pos + 4)[0]
        if magic not in (MESSAGE_MAGIC, 0):  # 0: a RocketMQ client's (no CRC either)
            return 2, n, nkeys, False
        if total < ENTRY_OVERHEAD or total > end - pos:
            return 3, n, nkeys, False
        body_len = _I32.unpack_from(view, pos + 16)[0]
        if body_len <= 0:
            return 4, n, nkeys, False
        if body_len > max_body:
            return 5, n, nkeys, False
        body_end = pos + ENTRY_HEAD + body_len
        if body_end + 2 > pos + total:
            return 6, n, nkeys, False
        props_len = (view[body_end] << 8) | view[body_end + 1]
        if props_len & 0x8000 or body_end + 2 + props_len != pos + total:
            return 7, n, nkeys, False
        crc = _crc32(view[pos + ENTRY_HEAD : body_end]) & 0x7FFFFFFF
        if magic != 0 and crc != _I32.unpack_from(view, pos + 8)[0]:
            return 8, n, nkeys, False
        starts[n] = pos
        body_lens[n] = body_len
        props_lens[n] = props_len
        flags[n] = _I32.unpack_from(view, pos + 12)[0]
        crcs[n] = crc
        props = bytes(view[body_end + 2 : pos + total])
        tags, nkeys, delay, ok = scan_props(props, prefix, n, key_hashes, key_msgs, nkeys, kcap)
        tags_codes[n] = tags
        if not ok:
            return 11, n, nkeys, False
        delayed |= delay
        n += 1
        pos += total
    return 0, n, nkeys, delayed


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
    out_offsets: np.ndarray,
    out_sizes: np.ndarray,
    cq_out: Any,
) -> None:
    sv, dv, cq = _view(src), _view(dst), _view(cq_out)
    tpl, tb = bytes(_view(template)), bytes(_view(topic))
    tlen = len(tb)
    _check(
        len(tpl) >= 88 and tlen <= 255 and first >= 0 and count >= 0 and count * 20 <= len(cq)
        and first + count <= min(len(starts), len(rel), len(out_offsets), len(out_sizes)),
        "encode_batch_records: arrays",
    )  # fmt: skip
    for i in range(count):
        j = first + i
        p, blen, plen = int(rel[j]), int(body_lens[j]), int(props_lens[j])
        s = int(starts[j]) + ENTRY_HEAD
        size = RECORD_FIXED + tlen + blen + plen
        _check(
            p >= 0 and blen >= 0 and plen >= 0 and p + size <= len(dv) and s >= ENTRY_HEAD
            and s + blen + 2 + plen <= len(sv),
            "encode_batch_records: record",
        )  # fmt: skip
        phys = phys_base + p
        head = bytearray(tpl[:88])
        _I32.pack_into(head, 0, size)
        _I32.pack_into(head, 8, int(crcs[j]))
        _I32.pack_into(head, 16, int(flags[j]))
        _I64.pack_into(head, 20, first_queue_offset + i)
        _I64.pack_into(head, 28, phys)
        _I32.pack_into(head, 84, blen)
        record = (
            bytes(head)
            + bytes(sv[s : s + blen])
            + bytes([tlen])
            + tb
            + bytes(sv[s + blen : s + blen + 2 + plen])  # PROPLEN and properties
        )
        dv[p : p + size] = record
        cq[i * 20 : i * 20 + 20] = struct.pack(">qiq", phys, size, int(tags_codes[j]))
        out_offsets[j] = phys
        out_sizes[j] = size


def encode_single_records(
    src: Any,
    table: np.ndarray,
    topics: np.ndarray,
    slots: np.ndarray,
    first: int,
    dst: Any,
    pos: int,
    limit: int,
    phys_base: int,
    store_timestamp: int,
    store_host: int,
    out: np.ndarray,
    cq_out: Any,
    key_hashes: np.ndarray,
    nkeys: int,
) -> tuple[int, int, int]:
    from broker.store.kernels import (  # noqa: PLC0415 - the column names, one source
        O_OFFSET,
        O_QUEUE_OFFSET,
        O_SIZE,
        Q_BASE,
        Q_COUNT,
        Q_FIRST_ROW,
        S_BODY_LEN,
        S_BORN_HOST,
        S_BORN_TS,
        S_FLAG,
        S_PROPS_LEN,
        S_QUEUE_ID,
        S_RECONSUME,
        S_SLOT,
        S_SYS_FLAG,
        S_TAGS_CODE,
        S_TOPIC,
        T_KEY_PREFIX,
        T_LEN,
        T_START,
    )  # fmt: skip

    sv, dv, cq = _view(src), _view(dst), _view(cq_out)
    n, nslots, ntopics = len(table), len(slots), len(topics)
    limit = min(limit, len(dv))
    _check(
        len(out) >= n and len(cq) >= n * 20 and 0 <= first <= n and pos >= 0
        and 0 <= nkeys <= len(key_hashes),
        "encode_single_records: arrays",
    )  # fmt: skip
    tab = table.tolist()
    for m in tab:
        _check(
            0 <= m[S_SLOT] < nslots and 0 <= m[S_TOPIC] < ntopics and m[S_BODY_LEN] >= 0
            and 0 <= m[S_PROPS_LEN] <= 0x7FFF,
            "encode_single_records: table",
        )  # fmt: skip
    counts = np.bincount(table[:, S_SLOT], minlength=nslots) if n else np.zeros(nslots, np.int64)
    slots[:, Q_COUNT] = counts
    slots[:, Q_FIRST_ROW] = np.cumsum(counts) - counts
    rank = [0] * nslots
    body_at = sum(m[S_BODY_LEN] for m in tab[:first])
    props_at = sum(m[S_BODY_LEN] for m in tab) + sum(m[S_PROPS_LEN] for m in tab[:first])
    for m in tab[:first]:
        rank[m[S_SLOT]] += 1
    keys = key_hashes[:, 0]
    recs = key_hashes[:, 1]
    j = first
    while j < n:
        m = tab[j]
        blen, plen, t = m[S_BODY_LEN], m[S_PROPS_LEN], m[S_TOPIC]
        tstart, tlen = int(topics[t, T_START]), int(topics[t, T_LEN])
        _check(
            0 <= tlen <= 255 and tstart >= 0 and tstart + tlen <= len(sv)
            and body_at + blen <= len(sv) and props_at + plen <= len(sv),
            "encode_single_records: src",
        )  # fmt: skip
        size = RECORD_FIXED + tlen + blen + plen
        if pos + size > limit:
            break
        q = m[S_SLOT]
        queue_offset = int(slots[q, Q_BASE]) + rank[q]
        c = (int(slots[q, Q_FIRST_ROW]) + rank[q]) * 20
        rank[q] += 1
        phys = phys_base + pos
        body = bytes(sv[body_at : body_at + blen])
        props = bytes(sv[props_at : props_at + plen])
        head = struct.pack(
            ">iIiiiqqiqqqqiqi", size, MESSAGE_MAGIC, _crc32(body) & 0x7FFFFFFF, m[S_QUEUE_ID],
            m[S_FLAG], queue_offset, phys, m[S_SYS_FLAG], m[S_BORN_TS], m[S_BORN_HOST],
            store_timestamp, store_host, m[S_RECONSUME], 0, blen,
        )  # fmt: skip
        topic = bytes(sv[tstart : tstart + tlen])
        dv[pos : pos + size] = head + body + bytes([tlen]) + topic + struct.pack(">H", plen) + props
        cq[c : c + 20] = struct.pack(">qiq", phys, size, m[S_TAGS_CODE])
        out[j, O_OFFSET] = phys
        out[j, O_SIZE] = size
        out[j, O_QUEUE_OFFSET] = queue_offset
        prefix = int(topics[t, T_KEY_PREFIX])
        _, nkeys, _, _ = scan_props(props, prefix, j, keys, recs, nkeys, len(key_hashes))
        body_at += blen
        props_at += plen
        pos += size
        j += 1
    return j, pos, nkeys


def index_insert(
    buf: Any,
    slot_num: int,
    count: int,
    slot_count: int,
    hashes: Any,
    offsets: Any,
    time_diffs: Any,
) -> tuple[int, int]:
    view = _view(buf)
    _check(
        slot_num > 0 and count >= 0 and 40 + slot_num * 4 <= len(view)
        and len(offsets) >= len(hashes) and len(time_diffs) >= len(hashes),
        "index_insert: arguments",
    )  # fmt: skip
    entries_at = 40 + slot_num * 4
    for h, offset, diff in zip(
        hashes.tolist(), offsets.tolist(), time_diffs.tolist(), strict=False
    ):
        spos = 40 + (h % (1 << 64)) % slot_num * 4
        e = entries_at + count * 20
        _check(e + 20 <= len(view), "index_insert: index file full")
        prev = _I32.unpack_from(view, spos)[0]
        if prev <= 0 or prev >= count:
            if prev == 0:
                slot_count += 1
            prev = 0  # empty, or left pointing at an unwritten entry by a crash
        view[e : e + 20] = struct.pack(">iqii", _wrap32(h), offset, _wrap32(diff), prev)
        _I32.pack_into(view, spos, count)
        count += 1
    return count, slot_count


def _wrap32(v: int) -> int:
    """The low 32 bits of ``v`` as a signed int (what the C loop stores)."""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def check_records(
    data: Any, starts: Any, sizes: Any, body_starts: np.ndarray, body_ends: np.ndarray
) -> int:
    view = _view(data)
    _check(
        min(len(sizes), len(body_starts), len(body_ends)) >= len(starts), "check_records: arrays"
    )
    for j, (p, size) in enumerate(zip(starts.tolist(), sizes.tolist(), strict=False)):
        if (
            p < 0
            or size < RECORD_FIXED
            or p + size > len(view)
            or _I32.unpack_from(view, p)[0] != size
            or _U32.unpack_from(view, p + 4)[0] != MESSAGE_MAGIC
        ):
            return j
        blen = _I32.unpack_from(view, p + 84)[0]
        if blen < 0 or 88 + blen + 3 > size:
            return j
        body_starts[j] = p + 88
        body_ends[j] = p + 88 + blen
    return -1


LOG_CHUNK_FULL, LOG_SEGMENT_END, LOG_END_OF_DATA = 0, 1, 2


def scan_log(
    buf: Any,
    pos: int,
    base: int,
    check_crc: bool,
    offsets: np.ndarray,
    sizes: np.ndarray,
    queue_ids: np.ndarray,
    queue_offsets: np.ndarray,
    store_ts: np.ndarray,
    topic_pos: np.ndarray,
    topic_lens: np.ndarray,
    topic_crcs: np.ndarray,
    tags_codes: np.ndarray,
    key_hashes: np.ndarray,
    key_recs: np.ndarray,
) -> tuple[int, int, int, int]:
    view = _view(buf)
    limit = len(view)
    _check(pos >= 0, "scan_log: pos")
    cols = (offsets, sizes, queue_ids, queue_offsets, store_ts, topic_pos, topic_lens,
            topic_crcs, tags_codes)  # fmt: skip
    cap = min(len(c) for c in cols)
    kcap = min(len(key_hashes), len(key_recs))
    n = nkeys = 0
    while True:
        if pos >= limit:
            return LOG_SEGMENT_END, n, pos, nkeys
        if n >= cap:
            return LOG_CHUNK_FULL, n, pos, nkeys
        if limit - pos < 8:
            return 3, n, pos, nkeys
        total = _I32.unpack_from(view, pos)[0]
        magic = _U32.unpack_from(view, pos + 4)[0]
        if total == 0 and magic == 0:
            return LOG_END_OF_DATA, n, pos, nkeys
        if magic == BLANK_MAGIC:
            if total != limit - pos:
                return 11, n, pos, nkeys
            return LOG_SEGMENT_END, n, limit, nkeys
        if magic != MESSAGE_MAGIC:
            return 4, n, pos, nkeys
        if total < RECORD_FIXED or total > limit - pos:
            return 5, n, pos, nkeys
        if _I64.unpack_from(view, pos + 28)[0] != base + pos:
            return 6, n, pos, nkeys
        body_len = _I32.unpack_from(view, pos + 84)[0]
        if body_len < 0 or 88 + body_len + 3 > total:
            return 7, n, pos, nkeys
        tp = pos + 88 + body_len
        tl = view[tp]
        if tl > 127 or tp + 1 + tl + 2 > pos + total:
            return 8, n, pos, nkeys
        pp = tp + 1 + tl
        plen = (view[pp] << 8) | view[pp + 1]
        if plen & 0x8000 or pp + 2 + plen != pos + total:
            return 9, n, pos, nkeys
        if nkeys + plen // 2 + 1 > kcap:
            return LOG_CHUNK_FULL, n, pos, nkeys  # no room for every key this record may have
        if (
            check_crc
            and _crc32(view[pos + 88 : tp]) & 0x7FFFFFFF != _I32.unpack_from(view, pos + 8)[0]
        ):
            return 10, n, pos, nkeys
        topic = bytes(view[tp + 1 : pp])
        if not topic or not all(_topic_bytes[b] for b in topic):
            return 12, n, pos, nkeys
        tcrc = _crc32(topic)
        offsets[n] = base + pos
        sizes[n] = total
        queue_ids[n] = _I32.unpack_from(view, pos + 12)[0]
        queue_offsets[n] = _I64.unpack_from(view, pos + 20)[0]
        store_ts[n] = _I64.unpack_from(view, pos + 56)[0]
        topic_pos[n] = tp + 1
        topic_lens[n] = tl
        topic_crcs[n] = tcrc
        props = bytes(view[pp + 2 : pos + total])
        tags, record_keys, _, ok = scan_props(
            props, _crc32(b"#", tcrc), n, key_hashes, key_recs, nkeys, kcap
        )
        tags_codes[n] = tags
        if not ok:
            return 13, n, pos, nkeys
        nkeys = record_keys
        n += 1
        pos += total


def group_queues(
    buf: Any,
    n: int,
    topic_pos: np.ndarray,
    topic_lens: np.ndarray,
    topic_crcs: np.ndarray,
    queue_ids: np.ndarray,
    queue_offsets: np.ndarray,
    offsets: np.ndarray,
    sizes: np.ndarray,
    tags_codes: np.ndarray,
    groups: np.ndarray,
    entries: Any,
) -> int:
    view = _view(buf)
    out = _view(entries)
    cols = (topic_pos, topic_lens, topic_crcs, queue_ids, queue_offsets, offsets, sizes,
            tags_codes)  # fmt: skip
    _check(0 <= n <= min(len(c) for c in cols) and len(out) >= n * 20, "group_queues: n")
    _check(groups.ndim == 2 and groups.shape[1] == 4, "group_queues: groups")
    members: dict[tuple[bytes, int], list[int]] = {}
    for i in range(n):
        at, size = int(topic_pos[i]), int(topic_lens[i])
        _check(at >= 0 and size >= 0 and at + size <= len(view), "group_queues: topic_pos")
        members.setdefault((bytes(view[at : at + size]), int(queue_ids[i])), []).append(i)
    if len(members) > len(groups):
        return -1
    e = 0
    for g, rows in enumerate(members.values()):
        qoffs = [int(queue_offsets[i]) for i in rows]
        rising = all(b == a + 1 for a, b in itertools.pairwise(qoffs))
        groups[g] = (rows[0], len(rows), qoffs[0], int(rising))
        for i in rows:
            _I64.pack_into(out, e, int(offsets[i]))
            _I32.pack_into(out, e + 8, int(sizes[i]))
            _I64.pack_into(out, e + 12, int(tags_codes[i]))
            e += 20
    return len(members)
