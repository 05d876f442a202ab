"""The binary forms of the broker's REST API (the data plane is remoting).

Batch send: ``POST /topics/{topic}/messages/batch`` with
``Content-Type: application/octet-stream`` and the batch encoding of
``connector.protocol.batch`` as body (``TOTALSIZE | MAGIC | BODYCRC | FLAG |
BODYLEN | body | PROPLEN | properties`` per message). Query parameters:
``queue_id`` (optional; the broker picks one round-robin), ``born_timestamp``.
The answer is JSON: ``{"status", "queue_id", "queue_offset" (first message),
"count", "store_host" (offset msgId prefix, 16 hex chars), "offset_runs"}``.
The records of a batch lie back to back in the CommitLog except where the
batch crosses into a new segment, so ``offset_runs`` lists ``[index,
commit_log_offset]`` where each run starts (one run, or two across a
segment boundary) and the producer, which knows each record's size
(``record.record_size``), derives every offset: ``batch_offsets``. A
message's offset msgId is ``store_host + "%016X" % commit_log_offset``.

Pull: ``GET /topics/{topic}/queues/{queue_id}/messages`` with
``Accept: application/x-pymq-records`` answers with the stored CommitLog
records, byte for byte, one after another (RocketMQ v1 record layout,
``connector.protocol.record``); the pull status and offsets travel in the
headers below. Decoding is the client's job: a pull answer is a straight copy
of stored bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BATCH_CONTENT_TYPE",
    "H_MAX_OFFSET",
    "H_MIN_OFFSET",
    "H_NEXT_BEGIN_OFFSET",
    "H_STATUS",
    "RECORDS_CONTENT_TYPE",
    "batch_offsets",
    "split_records",
]

BATCH_CONTENT_TYPE = "application/octet-stream"
RECORDS_CONTENT_TYPE = "application/x-pymq-records"
H_STATUS = "x-pymq-status"
H_NEXT_BEGIN_OFFSET = "x-pymq-next-begin-offset"
H_MIN_OFFSET = "x-pymq-min-offset"
H_MAX_OFFSET = "x-pymq-max-offset"


def split_records(data: bytes) -> list[bytes]:
    """Cut a records body into single records by their TOTALSIZE fields."""
    out = []
    pos, end = 0, len(data)
    while pos + 4 <= end:
        size = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        if size <= 0 or pos + size > end:
            raise ValueError(f"records body is damaged at byte {pos}")
        out.append(data[pos : pos + size])
        pos += size
    if pos != end:
        raise ValueError("records body ends inside a record")
    return out


def batch_offsets(offset_runs: Sequence[Sequence[int]], record_sizes: Sequence[int]) -> list[int]:
    """Every message's CommitLog offset from a batch answer's ``offset_runs``."""
    if len(record_sizes) == 1 and len(offset_runs) == 1 and int(offset_runs[0][0]) == 0:
        return [int(offset_runs[0][1])]  # a single message: no numpy for it
    starts = sorted((int(index), int(offset)) for index, offset in offset_runs)
    if not starts or starts[0][0] != 0:
        raise ValueError("offset_runs must start at message 0")
    if len(record_sizes) <= 32:  # a few: a loop costs less than numpy's fixed ~15 us
        offsets: list[int] = []
        stops = [index for index, _ in starts[1:]] + [len(record_sizes)]
        for (index, first), stop in zip(starts, stops, strict=True):
            at = first
            for size in record_sizes[index:stop]:
                offsets.append(at)
                at += size
        return offsets
    import numpy as np  # noqa: PLC0415 - numpy stays out of the servers' import path

    sizes = np.asarray(record_sizes, dtype=np.int64)
    before = np.zeros(len(sizes), dtype=np.int64)  # bytes of the batch before message i
    np.cumsum(sizes[:-1], out=before[1:])
    out = np.empty(len(sizes), dtype=np.int64)
    bounds = [*starts[1:], (len(sizes), 0)]
    for (index, offset), (stop, _) in zip(starts, bounds, strict=True):
        out[index:stop] = offset + before[index:stop] - (before[index] if index < len(sizes) else 0)
    return out.tolist()
