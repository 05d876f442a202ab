"""ConsumeQueue: one per (topic, queueId), fixed 20-byte entries.

Entry n of a queue is its logical offset n: ``commitLogOffset i64, size i32,
tagsCode i64``, big-endian, ``entries_per_file`` (300,000) to a file, files
named by the byte offset of their first entry. Reading by logical offset is
O(1) whatever the size of the log.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import numpy as np

from broker.store.mapped_file import MappedFile, MappedFileQueue
from connector.errors import StoreError

__all__ = ["CQ_DTYPE", "CQ_ENTRY", "CQ_ENTRY_SIZE", "ConsumeQueue"]

log = logging.getLogger(__name__)
CQ_ENTRY_SIZE = 20
# commitLogOffset i64, size i32, tagsCode i64, big-endian
CQ_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
_ENTRY = struct.Struct(">qiq")
CQ_ENTRY = _ENTRY  # (CommitLog offset, size, tags code), as CQ_DTYPE


class ConsumeQueue:
    def __init__(self, root: Path, topic: str, queue_id: int, entries_per_file: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.entries_per_file = entries_per_file
        self.directory = root / topic / str(queue_id)
        self.files = MappedFileQueue(self.directory, entries_per_file * CQ_ENTRY_SIZE)
        self._min_logic_bytes = 0

    # -- offsets -----------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """The next logical offset (number of entries ever written)."""
        return self.files.max_offset() // CQ_ENTRY_SIZE

    @property
    def min_offset(self) -> int:
        return max(self._min_logic_bytes, self.files.min_offset()) // CQ_ENTRY_SIZE

    # -- load / recovery ---------------------------------------------------------

    def load(self) -> None:
        """Map the files and find the end of valid entries (the first zero-size entry)."""
        self.files.load()
        files = self.files.files
        if not files:
            return
        for mf in files[:-1]:
            mf.wrote_position = mf.flushed_position = mf.file_size
        # A queue rebuilt after retention starts inside its first file: skip leading zeros.
        first = files[0]
        sizes = np.frombuffer(first.read(0, first.file_size), dtype=CQ_DTYPE)["size"]
        used = np.flatnonzero(sizes > 0)
        lead = int(used[0]) if used.size else 0
        self._min_logic_bytes = first.file_from_offset + lead * CQ_ENTRY_SIZE
        last = files[-1]
        if last is not first:
            sizes = np.frombuffer(last.read(0, last.file_size), dtype=CQ_DTYPE)["size"]
            lead = 0
        empty = np.flatnonzero(sizes[lead:] <= 0)
        count = lead + (int(empty[0]) if empty.size else len(sizes) - lead)
        last.wrote_position = last.flushed_position = count * CQ_ENTRY_SIZE

    def destroy(self) -> None:
        """Delete every file of this queue (before a rebuild or a topic delete)."""
        for mf in self.files.files:
            mf.destroy()
        self.files.files = []
        self._min_logic_bytes = 0

    def last_entry(self) -> tuple[int, int, int] | None:
        n = self.max_offset
        if n <= self.min_offset:
            return None
        entries = self.get_entries(n - 1, 1)
        return (int(entries["offset"][0]), int(entries["size"][0]), int(entries["tags_code"][0]))

    # -- writes --------------------------------------------------------------------

    def _file_for(self, byte_offset: int) -> MappedFile:
        mf = self.files.find(byte_offset)
        if mf is not None:
            return mf
        last = self.files.last()
        start = byte_offset - byte_offset % self.files.file_size
        if last is None:
            mf = self.files.create(start)
            mf.wrote_position = byte_offset - start
            self._min_logic_bytes = byte_offset
            return mf
        return self.files.create(last.end_offset)

    def put(self, offset: int, commit_log_offset: int, size: int, tags_code: int) -> None:
        """Write one entry at logical ``offset`` (the next one, or an overwrite in recovery)."""
        last = self.files.last()
        if last is not None:
            rel = last.wrote_position
            if last.file_from_offset + rel == offset * CQ_ENTRY_SIZE and rel < last.file_size:
                _ENTRY.pack_into(last.buffer(), rel, commit_log_offset, size, tags_code)
                last.wrote_position = rel + CQ_ENTRY_SIZE
                return
        self.put_entries(offset, _ENTRY.pack(commit_log_offset, size, tags_code))

    def put_entries(self, offset: int, data: bytes | memoryview | np.ndarray) -> None:
        """Write consecutive entries starting at logical ``offset``.

        ``offset`` may be the end of the queue (append) or inside it (recovery
        overwrites); a gap past the end is refused, except in an empty queue,
        where the first file is created wherever ``offset`` falls.
        """
        view = memoryview(data.data if isinstance(data, np.ndarray) else data).cast("B")
        pos = offset * CQ_ENTRY_SIZE
        last = self.files.last()
        if last is not None:  # the usual write: appended to the last file, where it fits
            rel = last.wrote_position
            if last.file_from_offset + rel == pos and rel + len(view) <= last.file_size:
                last.write_at(rel, view)
                last.wrote_position = rel + len(view)
                return
        end_of_queue = self.files.max_offset()
        if self.files.files and pos > end_of_queue:
            raise StoreError(f"ConsumeQueue {self.topic}/{self.queue_id}: gap at offset {offset}")
        done = 0
        while done < len(view):
            mf = self._file_for(pos + done)
            rel = pos + done - mf.file_from_offset
            chunk = min(len(view) - done, mf.file_size - rel)
            mf.write_at(rel, view[done : done + chunk])
            mf.wrote_position = max(mf.wrote_position, rel + chunk)
            done += chunk

    def truncate_dirty(self, commit_log_end: int) -> int:
        """Drop entries pointing at or past ``commit_log_end``; returns how many."""
        max_off = self.max_offset
        lo, hi = self.min_offset, max_off
        # entries are in CommitLog order within a queue: binary search the first bad one
        while lo < hi:
            mid = (lo + hi) // 2
            if int(self.get_entries(mid, 1)["offset"][0]) >= commit_log_end:
                hi = mid
            else:
                lo = mid + 1
        dropped = max_off - lo
        if dropped:
            self.files.truncate(lo * CQ_ENTRY_SIZE)
            if not self.files.files:
                self._min_logic_bytes = 0
        return dropped

    # -- reads -----------------------------------------------------------------------

    def get_entries(self, offset: int, max_count: int) -> np.ndarray:
        """Up to ``max_count`` entries from ``offset``, within one file (a copy)."""
        return np.frombuffer(self.get_raw(offset, max_count), dtype=CQ_DTYPE)

    def get_raw(self, offset: int, max_count: int) -> bytes:
        """``get_entries`` as the file's bytes (``CQ_ENTRY_SIZE`` each, ``_ENTRY``)."""
        end = min(self.max_offset, offset + max_count)
        if offset < self.min_offset or offset >= end:
            return b""
        pos = offset * CQ_ENTRY_SIZE
        mf = self.files.find(pos)
        if mf is None:
            return b""
        rel = pos - mf.file_from_offset
        count = min(end - offset, (mf.wrote_position - rel) // CQ_ENTRY_SIZE)
        try:
            return mf.read(rel, count * CQ_ENTRY_SIZE)
        except ValueError:  # unmapped by retention meanwhile
            return b""

    # -- retention -------------------------------------------------------------------

    def correct_min_offset(self, commit_log_min: int) -> None:
        """Move the min offset past entries whose records the CommitLog no longer has."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if int(self.get_entries(mid, 1)["offset"][0]) < commit_log_min:
                lo = mid + 1
            else:
                hi = mid
        self._min_logic_bytes = max(self._min_logic_bytes, lo * CQ_ENTRY_SIZE)

    def delete_expired(self, commit_log_min: int) -> int:
        """Delete leading files whose last entry points below ``commit_log_min``."""
        count = 0
        for mf in self.files.files[:-1]:
            raw = mf.read(mf.file_size - CQ_ENTRY_SIZE, CQ_ENTRY_SIZE)
            last_offset = _ENTRY.unpack(raw)[0]
            if last_offset >= commit_log_min:
                break
            count += 1
        if count:
            self.files.delete_first(count)
        self.correct_min_offset(commit_log_min)
        return count

    def flush(self, least_pages: int = 0) -> None:
        self.files.flush(least_pages)

    def close(self) -> None:
        self.files.close()
