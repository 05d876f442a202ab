"""The batch hot paths' per-message loops: checked, laid out and scanned in C.

Python pays tens of nanoseconds per bytecode on small hardware, so the
per-message work of a batch (walking the wire entries, body CRCs, finding
TAGS / KEYS / UNIQ_KEY in the properties, hashing keys, laying out records,
threading index chains, scanning the log at recovery) runs in
``broker.store._kernels``, a C module built with pymq (``_kernels.c``; nothing
is compiled at run time), once per batch. Without it (no C compiler at install
time, or ``PYMQ_KERNELS=python``) the same functions come from
``_kernels_py``, plain Python (``connector.protocol.native`` chooses). The
plain rules live elsewhere too (``connector.protocol`` codecs,
``index.key_hash``, ``hashing.tags_code``) and the tests check all agree.

This module is the API: the constants that name columns and statuses, and the
functions below (``scan_batch`` wraps its kernel; the others are the kernels).
Arrays are native-endian int64 / uint8; file fields are big-endian.
"""

from __future__ import annotations

import re

import numpy as np

from connector.protocol.hashing import crc32
from connector.protocol.names import NAME_CHARACTER
from connector.protocol.native import load

__all__ = [
    "BATCH_ERRORS",
    "COMPILED",
    "check_records",
    "encode_batch_records",
    "encode_single_records",
    "group_queues",
    "index_insert",
    "scan_batch",
    "scan_log",
]

_kernels = load("broker.store._kernels", "broker.store._kernels_py")
COMPILED = _kernels.__name__ == "broker.store._kernels"  # False: the plain-Python twins

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


_TOPIC_BYTES = np.zeros(256, dtype=np.uint8)  # the bytes a topic name may hold
_TOPIC_BYTES[[b for b in range(128) if re.fullmatch(NAME_CHARACTER, chr(b))]] = 1
_kernels.set_topic_bytes(_TOPIC_BYTES)


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
    starts, body_lens, props_lens, flags, crcs, tags_codes = np.empty((6, cap), dtype=np.int64)
    key_hashes, key_msgs = np.empty((2, key_cap), dtype=np.int64)
    status, n, nkeys, delayed = _kernels.scan_batch(
        buf, max_message_size, max_count, crc32(f"{topic}#".encode()),
        starts, body_lens, props_lens, flags, crcs, tags_codes, key_hashes, key_msgs,
    )  # fmt: skip
    if status:
        return None, BATCH_ERRORS[status].format(index=n)
    return ScannedBatch(buf, n, starts, body_lens, props_lens, flags, crcs, tags_codes,
                        key_hashes[:nkeys], key_msgs[:nkeys], delayed), ""  # fmt: skip


# encode_batch_records(src, starts, body_lens, props_lens, flags, crcs, tags_codes, first,
#     count, rel, dst, template, topic, first_queue_offset, phys_base, out_offsets, out_sizes,
#     cq_out) -> None
# Write records ``first .. first+count`` of a scanned batch into ``dst``. ``rel[j]`` is
# record j's position in ``dst``. ``template`` is an 88-byte record header with the fields
# shared by the batch filled in (magic, queue id, sys flag, born/store time and hosts); each
# record patches its own size, CRC, flag, offsets and body length. ``cq_out`` receives the
# records' ConsumeQueue entries (20 bytes each). Releases the GIL for 512 records or more
# (K_LONG_ITEMS in connector/protocol/_kernels_common.h), as the other loops do for long input.
encode_batch_records = _kernels.encode_batch_records

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


# encode_single_records(src, table, topics, slots, first, dst, pos, limit, phys_base,
#     store_timestamp, store_host, out, cq_out, key_hashes, nkeys)
#     -> (next message, next position, key count)
# Write the records of messages ``first, first+1, ...`` at ``dst[pos:]`` while they end by
# ``limit``. The messages come from different writers: each row of ``table`` (columns
# ``S_*``) holds one message's own header fields, its body and properties lengths (bodies
# lie back to back at the start of ``src``, then all properties), its topic (a row of
# ``topics``) and its queue (a row of ``slots``). A message's queue offset is its queue's
# base plus the number of the group's messages for that queue before it. ``phys_base`` is
# the CommitLog offset of ``dst[0]``. ``out[j]`` gets record j's offset, size and queue
# offset; ``cq_out`` its ConsumeQueue entry, 20 bytes at row ``slots[q, Q_FIRST_ROW]`` +
# rank, so each queue's entries are consecutive; the KEYS and UNIQ_KEY hashes found in the
# properties go to ``key_hashes`` (rows of (hash, message)) from ``nkeys`` on. Holds the
# GIL: the caller is the event loop, and releasing it per call would hand it to the flush
# thread for a while.
encode_single_records = _kernels.encode_single_records

# index_insert(buf, slot_num, count, slot_count, hashes, offsets, time_diffs)
#     -> (count, slots used)
# Append index entries to the index file ``buf`` and thread them onto their buckets.
index_insert = _kernels.index_insert

# check_records(data, starts, sizes, body_starts, body_ends) -> -1 or the first bad index
# Check each record's TOTALSIZE and magic and find its body.
check_records = _kernels.check_records

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


# scan_log(buf, pos, base, check_crc, offsets, sizes, queue_ids, queue_offsets, store_ts,
#     topic_pos, topic_lens, topic_crcs, tags_codes, key_hashes, key_recs)
#     -> (status, records, next_pos, keys)
# Check records of one segment (``buf``, starting at global ``base``) from ``pos``: fills
# the per-record arrays (at most their length) and returns a LOG_* status or a LOG_ERRORS
# key for the record at ``next_pos``. The key arrays must have room for one record's keys
# (properties length / 2 + 1, at most 16,384). Properties must be ``name\x01value\x02``
# pairs with non-empty names (``connector.protocol.properties.properties_well_formed``);
# the body CRC does not cover topic and properties: their checks catch a record whose end
# was never written. Every read is bounded by the segment: a corrupted or truncated
# segment ends the scan with a status, never a crash.
scan_log = _kernels.scan_log

# group_queues(buf, n, topic_pos, topic_lens, topic_crcs, queue_ids, queue_offsets,
#     offsets, sizes, tags_codes, groups, entries) -> groups found, or -1 (more than fit)
# The first ``n`` records of ``scan_log``'s columns by queue (same topic bytes, whose
# ``topic_pos`` are inside ``buf``, and same queue id), groups in order of first
# appearance: ``groups`` (int64, shape (rows, 4)) gets (first record, records, first
# queue offset, 1 if the group's queue offsets rise by one record to the next else 0),
# ``entries`` (n * 20 bytes) each group's ConsumeQueue entries (CQ_DTYPE's layout), one
# group after another, log order inside each: a replica's dispatch in one call, not a
# dozen numpy ones.
group_queues = _kernels.group_queues
