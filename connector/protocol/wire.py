"""The binary fast paths of the broker's HTTP API.

Batch send: ``POST /topics/{topic}/messages/batch`` with
``Content-Type: application/octet-stream`` and the batch encoding of
``connector.protocol.batch`` as body (``TOTALSIZE | MAGIC | BODYCRC | FLAG |
BODYLEN | body | PROPLEN | properties`` per message). Query parameters:
``queue_id`` (optional; the broker picks one round-robin), ``born_timestamp``.
The answer is JSON: ``{"status", "queue_id", "queue_offset" (first message),
"count", "store_host" (offset msgId prefix, 16 hex chars),
"commit_log_offsets": [...]}``; a message's offset msgId is
``store_host + "%016X" % commit_log_offset``.

Pull: ``GET /topics/{topic}/queues/{queue_id}/messages`` with
``Accept: application/x-pymq-records`` answers with the stored CommitLog
records, byte for byte, one after another (RocketMQ v1 record layout,
``connector.protocol.record``); the pull status and offsets travel in the
headers below. Decoding is the client's job: a pull answer is a straight copy
of stored bytes.
"""

from __future__ import annotations

__all__ = [
    "BATCH_CONTENT_TYPE",
    "H_MAX_OFFSET",
    "H_MIN_OFFSET",
    "H_NEXT_BEGIN_OFFSET",
    "H_STATUS",
    "RECORDS_CONTENT_TYPE",
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
