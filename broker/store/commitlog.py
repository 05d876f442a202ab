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
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from broker.store.config import StoreConfig
from broker.store.consume_queue import CQ_ENTRY_SIZE
from broker.store.inner import BatchInner, MessageInner
from broker.store.kernels import (
    O_OFFSET,
    O_SIZE,
    RECORD_FIXED,
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
    SINGLE_COLUMNS,
    ScannedBatch,
    encode_batch_records,
    encode_single_records,
)
from broker.store.mapped_file import MappedFile, MappedFileQueue
from broker.store.results import AppendResult, PutMessageStatus
from connector.protocol.hashing import crc32
from connector.protocol.properties import properties_well_formed
from connector.protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    HEADER,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC_CODE,
    encode_blank,
)

__all__ = ["BatchAppend", "CommitLog", "RecordRefused", "SingleGroup", "SinglesAppend"]

log = logging.getLogger(__name__)


# TOPICLEN i8 + topic + PROPLEN i16, one Struct per topic length
_TOPIC_PROPLEN = [struct.Struct(f">b{n}sh") for n in range(MAX_TOPIC_BYTES + 1)]
_PWRITE_MIN_BYTES = 8 << 10  # records from this size on are pwritten (see append)


class RecordRefused(Exception):
    """A message cannot become a record: it cannot fit any segment, a field overflows
    its length prefix, or its properties are not ``name\\x01value\\x02`` pairs."""

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


@dataclass(slots=True)
class SingleGroup:
    """Single messages from many writers, their columns gathered once to check and append."""

    msgs: Sequence[MessageInner]
    bodies: list[bytes]
    props: list[bytes]
    topics: list[str]
    queue_ids: list[int]
    body_lens: list[int]
    props_lens: list[int]

    @classmethod
    def of(cls, msgs: Sequence[MessageInner]) -> SingleGroup:
        bodies = list(map(_BODY, msgs))
        props = list(map(_PROPS, msgs))
        return cls(
            msgs, bodies, props, list(map(_TOPIC, msgs)), list(map(_QUEUE_ID, msgs)),
            list(map(len, bodies)), list(map(len, props)),
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.msgs)


@dataclass(slots=True)
class SinglesAppend:
    """Where each record of a group of single messages went."""

    out: np.ndarray  # per message: offset, size, queue offset (columns O_*)
    cq_entries: np.ndarray  # 20 bytes per message, each queue's consecutive (``slots``)
    end_offset: int
    key_hashes: np.ndarray  # KEYS and UNIQ_KEY hashes found in the properties
    key_offsets: np.ndarray  # the record each hash belongs to


_BODY = attrgetter("body")
_PROPS = attrgetter("properties")
_TOPIC = attrgetter("topic")
_QUEUE_ID = attrgetter("queue_id")
_HOST = attrgetter("born_host")
_BIG_I64 = np.dtype(">i8")


class CommitLog:
    def __init__(self, config: StoreConfig, store_host: bytes) -> None:
        self.config = config
        self.segment_size = config.mapped_file_size_commit_log
        self.store_host = store_host
        self._store_host_i64 = int.from_bytes(store_host, "big", signed=True)
        self.queue = MappedFileQueue(config.commit_log_dir, self.segment_size, tail_advice=True)
        self._topic_bytes: dict[str, bytes] = {}
        # records are laid out here, then written with one pwrite (see MappedFile.pwrite);
        # used under the store's put lock, grown to the largest chunk seen
        self._scratch_buf = np.empty(1 << 20, dtype=np.uint8)

    def _scratch(self, size: int) -> np.ndarray:
        if self._scratch_buf.shape[0] < size:
            self._scratch_buf = np.empty(max(size, 2 * self._scratch_buf.shape[0]), np.uint8)
        return self._scratch_buf

    # -- layout -----------------------------------------------------------------

    def min_offset(self) -> int:
        return self.queue.min_offset()

    def max_offset(self) -> int:
        """The offset the next record will be written at (end of valid data)."""
        return self.queue.max_offset()

    def _segment_for(self, size: int) -> MappedFile:
        """The segment a ``size``-byte record goes to (``_record_size`` checked it fits one)."""
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

    def _topic(self, name: str) -> bytes:
        topic = self._topic_bytes.get(name)
        if topic is None:
            topic = name.encode("utf-8")
            if len(topic) > MAX_TOPIC_BYTES:
                raise RecordRefused(f"topic of {len(topic)} bytes exceeds {MAX_TOPIC_BYTES}")
            self._topic_bytes[name] = topic
        return topic

    def topic_fits(self, name: str) -> bool:
        try:
            self._topic(name)
        except RecordRefused:
            return False
        return True

    def _record_size(self, msg: MessageInner) -> int:
        """The size of ``msg``'s record; RecordRefused if it cannot be one."""
        topic = self._topic(msg.topic)
        if len(msg.properties) > MAX_PROPERTIES_BYTES:
            raise RecordRefused(
                f"properties of {len(msg.properties)} bytes exceed {MAX_PROPERTIES_BYTES}",
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
            )
        size = RECORD_FIXED + len(topic) + len(msg.body) + len(msg.properties)
        if size + END_FILE_MIN_BLANK_LENGTH > self.segment_size:
            raise RecordRefused(
                f"a record of {size} bytes cannot fit a {self.segment_size}-byte segment"
            )
        if not properties_well_formed(msg.properties):  # recovery would take it for torn
            raise RecordRefused("properties are not name\\x01value\\x02 pairs")
        return size

    def check_single(self, msg: MessageInner) -> RecordRefused | None:
        """Why ``msg`` cannot become a record, or None (``append_singles`` expects checked ones)."""
        try:
            self._record_size(msg)
        except RecordRefused as exc:
            return exc
        return None

    def append(self, msg: MessageInner, *, queue_offset: int, store_timestamp: int) -> AppendResult:
        """Append one record (the single-message path: struct, no numpy)."""
        size = self._record_size(msg)
        topic, body, props = self._topic_bytes[msg.topic], msg.body, msg.properties
        mf = self.queue.last()
        if mf is None or size + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position:
            mf = self._segment_for(size)
        pos = mf.wrote_position
        offset = mf.file_from_offset + pos
        head = HEADER.pack(
            size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, msg.queue_id, msg.flag,
            queue_offset, offset, msg.sys_flag, msg.born_timestamp, msg.born_host,
            store_timestamp, self.store_host, msg.reconsume_times, 0, len(body),
        )  # fmt: skip
        mid = _TOPIC_PROPLEN[len(topic)].pack(len(topic), topic, len(props))
        if size >= _PWRITE_MIN_BYTES:
            # a large record (a batch half) is written, not stored through the mapping:
            # stores into fresh pages fault once a page, pwrite fills the page cache
            # without faulting (us an append, mmap -> pwrite: 8 KiB 15.9 -> 13.5,
            # 150 KB 156 -> 98; 4 KiB 10.8 -> 11.5: small records stay mapped)
            mf.pwrite(pos, b"".join((head, body, mid, props)))
            mf.wrote_position = pos + size
            return AppendResult(offset, size, queue_offset, 1, store_timestamp)
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
        topic = batch.topic.encode("utf-8")
        if len(topic) > MAX_TOPIC_BYTES:
            raise RecordRefused(f"topic of {len(topic)} bytes exceeds {MAX_TOPIC_BYTES}")
        sizes = scanned.body_lens + scanned.props_lens + (RECORD_FIXED + len(topic))
        ends = np.cumsum(sizes)
        total = int(ends[-1]) if n else 0
        # a batch that would fit an empty segment has no record too large for one
        if total + END_FILE_MIN_BLANK_LENGTH > self.segment_size and (
            int(sizes.max()) + END_FILE_MIN_BLANK_LENGTH > self.segment_size
        ):
            raise RecordRefused(f"a record cannot fit a {self.segment_size}-byte segment")
        rel = ends - sizes  # each record's position in the batch, then in its chunk
        offsets = np.empty(n, dtype=np.int64)
        out_sizes = np.empty(n, dtype=np.int64)
        cq_entries = np.empty(n * CQ_ENTRY_SIZE, dtype=np.uint8)
        template = HEADER.pack(
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
        )
        first_offset = -1
        i = 0
        while i < n:
            mf = self.queue.last_for_append()
            before = int(ends[i - 1]) if i else 0
            room = mf.remaining - END_FILE_MIN_BLANK_LENGTH
            if total - before <= room:  # the rest fits (the usual case)
                k = n
            else:
                k = int(np.searchsorted(ends, before + room, side="right"))
            if k <= i:
                self._fill_blank(mf)
                self.queue.create(mf.end_offset)
                continue
            pos = mf.wrote_position
            base = mf.file_from_offset + pos
            length = int(ends[k - 1]) - before
            if before:
                rel[i:k] -= before
            dst = self._scratch(length)
            encode_batch_records(
                scanned.data, scanned.starts, scanned.body_lens, scanned.props_lens,
                scanned.flags, scanned.crcs, scanned.tags_codes, i, k - i, rel, dst,
                template, topic, queue_offset + i, base, offsets, out_sizes,
                cq_entries[i * CQ_ENTRY_SIZE : k * CQ_ENTRY_SIZE],
            )  # fmt: skip
            mf.pwrite(pos, dst.data[:length])
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

    def append_singles(
        self, group: SingleGroup, slot_of: Sequence[int], slots: np.ndarray, *, store_timestamp: int
    ) -> SinglesAppend:
        """Append single messages from many writers as one run of records.

        Every message must have passed ``check_single``. Each record is the
        one ``append`` would write for it (its own queue, flags, born time
        and host; one store time for all); a compiled loop lays them out,
        numbers them within their queues and finds their index keys, so a
        group costs about what a batch does. Message j goes to queue
        ``slot_of[j]``, a row of ``slots`` (columns ``Q_*``: the caller sets
        each queue's next offset, this fills in the rest).
        """
        msgs = group.msgs
        n = len(msgs)
        table = np.empty((n, SINGLE_COLUMNS), dtype=np.int64)
        table[:, S_QUEUE_ID] = group.queue_ids
        table[:, S_FLAG] = [m.flag for m in msgs]
        table[:, S_SYS_FLAG] = [m.sys_flag for m in msgs]
        table[:, S_BORN_TS] = [m.born_timestamp for m in msgs]
        table[:, S_RECONSUME] = [m.reconsume_times for m in msgs]
        table[:, S_TAGS_CODE] = [m.tags_code for m in msgs]
        table[:, S_BORN_HOST] = np.frombuffer(b"".join(map(_HOST, msgs)), dtype=_BIG_I64)
        table[:, S_BODY_LEN] = group.body_lens
        table[:, S_PROPS_LEN] = group.props_lens
        table[:, S_SLOT] = slot_of
        parts = group.bodies + group.props
        props_bytes = sum(group.props_lens)
        topic_at = sum(group.body_lens) + props_bytes
        names = list(dict.fromkeys(group.topics))
        topics = np.empty((len(names), 3), dtype=np.int64)
        for t, name in enumerate(names):
            tb = self._topic(name)
            topics[t] = (topic_at, len(tb), crc32(tb + b"#"))
            parts.append(tb)
            topic_at += len(tb)
        if len(names) == 1:
            table[:, S_TOPIC] = 0
        else:
            index = {name: t for t, name in enumerate(names)}
            table[:, S_TOPIC] = [index[name] for name in group.topics]
        src = np.frombuffer(b"".join(parts), dtype=np.uint8)
        out = np.empty((n, 3), dtype=np.int64)
        cq_entries = np.empty(n * CQ_ENTRY_SIZE, dtype=np.uint8)
        key_hashes = np.empty((props_bytes // 2 + 1, 2), dtype=np.int64)  # (hash, message)
        nkeys = 0
        i = 0
        while i < n:
            mf = self.queue.last_for_append()
            at = mf.wrote_position
            i_next, end, nkeys = encode_single_records(
                src, table, topics, slots, i, np.frombuffer(mf.buffer(), dtype=np.uint8), at,
                mf.file_size - END_FILE_MIN_BLANK_LENGTH, mf.file_from_offset,
                store_timestamp, self._store_host_i64, out, cq_entries, key_hashes, nkeys,
            )  # fmt: skip
            if i_next == i:  # the next record does not fit: close this segment
                if at == 0:  # not even in an empty one (``check_single`` prevents this)
                    raise RecordRefused(f"a record cannot fit a {self.segment_size}-byte segment")
                self._fill_blank(mf)
                self.queue.create(mf.end_offset)
                continue
            mf.wrote_position = end
            i = i_next
        keys = key_hashes[:nkeys]
        return SinglesAppend(
            out=out,
            cq_entries=cq_entries,
            end_offset=int(out[-1, O_OFFSET] + out[-1, O_SIZE]),
            key_hashes=keys[:, 0],
            key_offsets=out[keys[:, 1], O_OFFSET],
        )

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
