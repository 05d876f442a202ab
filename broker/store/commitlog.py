"""The CommitLog: every topic's messages in one log of fixed-size segments.

Appends are called by the store under its put lock, so records (and the
queue offsets the store hands out) are in log order. A record never spans two
segments: when one does not fit with 8 bytes to spare, a BLANK record fills
the rest of the segment and the message goes to the next one. A batch is
split at record boundaries across as many segments as it needs.
"""

from __future__ import annotations

import logging
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from broker.store.config import StoreConfig
from broker.store.consume_queue import CQ_ENTRY_SIZE
from broker.store.inner import BatchInner, MessageInner
from broker.store.kernels import RECORD_FIXED, ScannedBatch, encode_batch_records
from broker.store.mapped_file import MappedFile, MappedFileQueue
from broker.store.results import AppendResult, PutMessageStatus
from connector.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    HEADER,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC_CODE,
    encode_blank,
)

__all__ = ["BatchAppend", "CommitLog", "RecordTooLarge"]

log = logging.getLogger(__name__)


# TOPICLEN i8 + topic + PROPLEN i16, one Struct per topic length
_TOPIC_PROPLEN = [struct.Struct(f">b{n}sh") for n in range(MAX_TOPIC_BYTES + 1)]


class RecordTooLarge(Exception):
    """A record cannot fit any segment, or a field overflows its length prefix."""

    def __init__(self, message: str, status: PutMessageStatus = PutMessageStatus.MESSAGE_ILLEGAL):
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class BatchAppend:
    """Where each record of a batch went (for the ConsumeQueue and the index)."""

    result: AppendResult
    offsets: np.ndarray
    sizes: np.ndarray
    cq_entries: np.ndarray  # the batch's ConsumeQueue entries, ready to write


class CommitLog:
    def __init__(self, config: StoreConfig, store_host: bytes) -> None:
        self.config = config
        self.segment_size = config.mapped_file_size_commit_log
        self.store_host = store_host
        self.queue = MappedFileQueue(config.commit_log_dir, self.segment_size)
        self._topic_bytes: dict[str, bytes] = {}

    # -- layout -----------------------------------------------------------------

    def min_offset(self) -> int:
        return self.queue.min_offset()

    def max_offset(self) -> int:
        """The offset the next record will be written at (end of valid data)."""
        return self.queue.max_offset()

    def _segment_for(self, size: int) -> MappedFile:
        if size + END_FILE_MIN_BLANK_LENGTH > self.segment_size:
            raise RecordTooLarge(
                f"a record of {size} bytes cannot fit a {self.segment_size}-byte segment"
            )
        mf = self.queue.last_for_append()
        if size + END_FILE_MIN_BLANK_LENGTH > mf.remaining:
            self._fill_blank(mf)
            mf = self.queue.create(mf.end_offset)
        return mf

    def _fill_blank(self, mf: MappedFile) -> None:
        left = mf.remaining
        mf.append(encode_blank(left))
        mf.wrote_position = mf.file_size
        mf.touch()

    # -- appends ------------------------------------------------------------------

    def append(self, msg: MessageInner, *, queue_offset: int, store_timestamp: int) -> AppendResult:
        """Append one record (the single-message path: struct, no numpy)."""
        topic = self._topic_bytes.get(msg.topic)
        if topic is None:
            topic = msg.topic.encode("utf-8")
            if len(topic) > MAX_TOPIC_BYTES:
                raise RecordTooLarge(f"topic of {len(topic)} bytes exceeds {MAX_TOPIC_BYTES}")
            self._topic_bytes[msg.topic] = topic
        body, props = msg.body, msg.properties
        if len(props) > MAX_PROPERTIES_BYTES:
            raise RecordTooLarge(
                f"properties of {len(props)} bytes exceed {MAX_PROPERTIES_BYTES}",
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
            )
        size = RECORD_FIXED + len(topic) + len(body) + len(props)
        mf = self.queue.last()
        if mf is None or size + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position:
            mf = self._segment_for(size)
        pos = mf.wrote_position
        offset = mf.file_from_offset + pos
        head = HEADER.pack(
            size, MESSAGE_MAGIC_CODE, zlib.crc32(body) & 0x7FFFFFFF, msg.queue_id, msg.flag,
            queue_offset, offset, msg.sys_flag, msg.born_timestamp, msg.born_host,
            store_timestamp, self.store_host, msg.reconsume_times, 0, len(body),
        )  # fmt: skip
        mid = _TOPIC_PROPLEN[len(topic)].pack(len(topic), topic, len(props))
        buf = mf.buffer()
        end = pos + 88
        buf[pos:end] = head
        buf[end : end + len(body)] = body
        end += len(body)
        buf[end : end + len(mid)] = mid
        end += len(mid)
        buf[end : end + len(props)] = props
        mf.wrote_position = pos + size
        return AppendResult(offset, size, queue_offset, 1, store_timestamp)

    def append_batch(
        self, batch: BatchInner, scanned: ScannedBatch, *, queue_offset: int, store_timestamp: int
    ) -> BatchAppend:
        """Append every record of a validated batch, split across segments as needed."""
        n = scanned.count
        topic = np.frombuffer(batch.topic.encode("utf-8"), dtype=np.uint8)
        if len(topic) > MAX_TOPIC_BYTES:
            raise RecordTooLarge(f"topic of {len(topic)} bytes exceeds {MAX_TOPIC_BYTES}")
        sizes = scanned.body_lens + scanned.props_lens + (RECORD_FIXED + len(topic))
        if n and int(sizes.max()) + END_FILE_MIN_BLANK_LENGTH > self.segment_size:
            raise RecordTooLarge(f"a record cannot fit a {self.segment_size}-byte segment")
        ends = np.cumsum(sizes)
        rel = np.empty(n, dtype=np.int64)  # each record's position in its chunk
        offsets = np.empty(n, dtype=np.int64)
        out_sizes = np.empty(n, dtype=np.int64)
        cq_entries = np.empty(n * CQ_ENTRY_SIZE, dtype=np.uint8)
        template = np.frombuffer(
            HEADER.pack(
                0,
                MESSAGE_MAGIC_CODE,
                0,
                batch.queue_id,
                0,
                0,
                0,
                batch.sys_flag,
                batch.born_timestamp,
                batch.born_host,
                store_timestamp,
                self.store_host,
                0,
                0,
                0,
            ),
            dtype=np.uint8,
        )
        first_offset = -1
        i = 0
        while i < n:
            mf = self.queue.last_for_append()
            before = int(ends[i - 1]) if i else 0
            room = mf.remaining - END_FILE_MIN_BLANK_LENGTH
            k = int(np.searchsorted(ends, before + room, side="right"))
            if k <= i:
                self._fill_blank(mf)
                self.queue.create(mf.end_offset)
                continue
            pos = mf.wrote_position
            base = mf.file_from_offset + pos
            length = int(ends[k - 1]) - before
            rel[i:k] = ends[i:k] - sizes[i:k] - before
            dst = np.frombuffer(mf.buffer(), dtype=np.uint8, count=length, offset=pos)
            encode_batch_records(
                scanned.data, scanned.starts, scanned.body_lens, scanned.props_lens,
                scanned.flags, scanned.crcs, scanned.tags_codes, i, k - i, rel, dst,
                template, topic, queue_offset + i, base, offsets, out_sizes,
                cq_entries[i * CQ_ENTRY_SIZE : k * CQ_ENTRY_SIZE],
            )  # fmt: skip
            del dst
            mf.wrote_position = pos + length
            if first_offset < 0:
                first_offset = base
            i = k
        result = AppendResult(
            wrote_offset=first_offset,
            wrote_bytes=int(offsets[-1] + sizes[-1] - first_offset) if n else 0,
            queue_offset=queue_offset,
            msg_num=n,
            store_timestamp=store_timestamp,
            offsets_array=offsets,
        )
        return BatchAppend(result=result, offsets=offsets, sizes=sizes, cq_entries=cq_entries)

    # -- reads ---------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``offset`` if they lie inside one segment's written data."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if size < 0 or pos + size > mf.wrote_position:
            return None
        try:
            return mf.read(pos, size)
        except ValueError:  # the segment was unmapped by retention meanwhile
            return None

    def flush(self, least_pages: int = 0) -> int:
        return self.queue.flush(least_pages)

    def flushed_offset(self) -> int:
        return self.queue.flushed_offset()

    def close(self) -> None:
        self.queue.close()
