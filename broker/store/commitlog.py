"""The CommitLog: every topic's messages in one log of fixed-size segments.

Appends are called by the store under its put lock, so records (and the
queue offsets the store hands out) are in log order. A record never spans two
segments: when one does not fit with 8 bytes to spare, a BLANK record fills
the rest of the segment and the message goes to the next one. A batch is
split at record boundaries across as many segments as it needs.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass

import numpy as np

from broker.store.config import StoreConfig
from broker.store.encoder import encode_records, record_sizes
from broker.store.inner import BatchInner, MessageInner
from broker.store.mapped_file import MappedFile, MappedFileQueue
from broker.store.results import AppendResult
from connector.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    encode_blank,
    encode_record,
    record_size,
)

__all__ = ["BatchAppend", "CommitLog", "RecordTooLarge"]

log = logging.getLogger(__name__)


class RecordTooLarge(Exception):
    """A record cannot fit any segment, or a field overflows its length prefix."""


@dataclass(slots=True)
class BatchAppend:
    """Where each record of a batch went (for the ConsumeQueue and the index)."""

    result: AppendResult
    offsets: np.ndarray
    sizes: np.ndarray


class CommitLog:
    def __init__(self, config: StoreConfig, store_host: bytes) -> None:
        self.config = config
        self.segment_size = config.mapped_file_size_commit_log
        self.store_host = store_host
        self.queue = MappedFileQueue(config.commit_log_dir, self.segment_size)

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
        topic = msg.topic.encode("utf-8")
        if len(topic) > MAX_TOPIC_BYTES:
            raise RecordTooLarge(f"topic of {len(topic)} bytes exceeds {MAX_TOPIC_BYTES}")
        if len(msg.properties) > MAX_PROPERTIES_BYTES:
            raise RecordTooLarge(
                f"properties of {len(msg.properties)} bytes exceed {MAX_PROPERTIES_BYTES}"
            )
        size = record_size(len(msg.body), len(topic), len(msg.properties))
        mf = self._segment_for(size)
        offset = mf.file_from_offset + mf.wrote_position
        mf.append(
            encode_record(
                topic=topic,
                body=msg.body,
                properties=msg.properties,
                queue_id=msg.queue_id,
                queue_offset=queue_offset,
                physical_offset=offset,
                flag=msg.flag,
                sys_flag=msg.sys_flag,
                born_timestamp=msg.born_timestamp,
                born_host=msg.born_host,
                store_timestamp=store_timestamp,
                store_host=self.store_host,
                reconsume_times=msg.reconsume_times,
            )
        )
        return AppendResult(
            wrote_offset=offset,
            wrote_bytes=size,
            queue_offset=queue_offset,
            msg_num=1,
            store_timestamp=store_timestamp,
        )

    def append_batch(
        self, batch: BatchInner, *, queue_offset: int, store_timestamp: int
    ) -> BatchAppend:
        """Append every record of ``batch``; checks sizes before writing any byte."""
        n = len(batch.bodies)
        topic = batch.topic.encode("utf-8")
        if len(topic) > MAX_TOPIC_BYTES:
            raise RecordTooLarge(f"topic of {len(topic)} bytes exceeds {MAX_TOPIC_BYTES}")
        body_lens = np.fromiter(map(len, batch.bodies), dtype=np.int64, count=n)
        props_lens = np.fromiter(map(len, batch.properties), dtype=np.int64, count=n)
        if n and int(props_lens.max()) > MAX_PROPERTIES_BYTES:
            raise RecordTooLarge(f"properties exceed {MAX_PROPERTIES_BYTES} bytes")
        sizes = record_sizes(body_lens, props_lens, len(topic))
        if n and int(sizes.max()) + END_FILE_MIN_BLANK_LENGTH > self.segment_size:
            raise RecordTooLarge(f"a record cannot fit a {self.segment_size}-byte segment")
        crcs = np.fromiter(map(zlib.crc32, batch.bodies), dtype=np.int64, count=n) & 0x7FFFFFFF
        flags = _column(batch.flags, n)
        ends = np.cumsum(sizes)
        offsets = np.empty(n, dtype=np.int64)
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
            base = mf.file_from_offset + mf.wrote_position
            offsets[i:k] = ends[i:k] - sizes[i:k] - before + base
            data = encode_records(
                topic=topic,
                queue_id=batch.queue_id,
                first_queue_offset=queue_offset + i,
                physical_offsets=offsets[i:k],
                sizes=sizes[i:k],
                body_lens=body_lens[i:k],
                props_lens=props_lens[i:k],
                bodies=batch.bodies[i:k] if (i or k < n) else batch.bodies,
                properties=batch.properties[i:k] if (i or k < n) else batch.properties,
                crcs=crcs[i:k],
                flags=flags if isinstance(flags, int) else flags[i:k],
                sys_flag=batch.sys_flag,
                born_timestamp=batch.born_timestamp,
                born_host=batch.born_host,
                store_timestamp=store_timestamp,
                store_host=self.store_host,
            )
            mf.append(data)
            if first_offset < 0:
                first_offset = base
            i = k
        result = AppendResult(
            wrote_offset=first_offset,
            wrote_bytes=int(offsets[-1] + sizes[-1] - first_offset) if n else 0,
            queue_offset=queue_offset,
            msg_num=n,
            store_timestamp=store_timestamp,
            physical_offsets=tuple(offsets.tolist()),
        )
        return BatchAppend(result=result, offsets=offsets, sizes=sizes)

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


def _column(value: object, n: int) -> np.ndarray | int:
    if isinstance(value, int):
        return value
    return np.asarray(value, dtype=np.int64)
