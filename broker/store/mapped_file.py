"""Fixed-size, memory-mapped segment files and the ordered queue of them.

A MappedFile is preallocated to its full size (sparse) and mapped once;
appends copy into the mapping (the CommitLog's batches go through ``pwrite``
instead, which spares whole pages the kernel's zero-fill and fault), reads
slice it, and ``flush`` calls fdatasync, which also writes back pages dirtied
through the mapping and, unlike ``mmap.flush``, releases the GIL while the
disk works.

The CommitLog's *tail* segment (the one appended to) is mapped without
readahead (``MADV_RANDOM``): a read just behind the write position (a slave's
stream, a consumer at the tail) would otherwise make the kernel read ahead
into the sparse, unwritten rest of the file, allocating and zero-filling
page cache that the next pwrite overwrites; measured with perf on a master
streaming to a slave, that zero-filling was 16 % of its CPU. A read of the
tail's older data (cold after a restart, say) asks for its range explicitly
(``MADV_WILLNEED``), and a segment that stops being the tail gets the
kernel's normal readahead back.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from pathlib import Path

from broker.store.files import file_name, fsync_dir, parse_file_name
from connector.errors import StoreError

__all__ = ["PAGE_SIZE", "MappedFile", "MappedFileQueue"]

log = logging.getLogger(__name__)
PAGE_SIZE = mmap.PAGESIZE
# macOS has no fdatasync; fsync is its closest (without F_FULLFSYNC, so the drive's
# own cache may still hold the data there)
_datasync = getattr(os, "fdatasync", os.fsync)
_TMP_SUFFIX = ".tmp"
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", None)
_MADV_NORMAL = getattr(mmap, "MADV_NORMAL", None)
_MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", None)
# a tail read ending this far behind the write position may be cold: its range is
# asked for (MADV_WILLNEED), since the tail has no readahead
_COLD_DISTANCE = 4 << 20


class MappedFile:
    """One segment: ``file_from_offset`` is the global offset of its byte 0."""

    def __init__(self, path: Path, file_size: int) -> None:
        start = parse_file_name(path.name)
        if start is None:
            raise StoreError(f"not a segment file name: {path}")
        self.path = path
        self.file_size = file_size
        self.file_from_offset = start
        self.wrote_position = 0
        self.flushed_position = 0
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            size = os.fstat(self._fd).st_size
            if size != file_size:
                os.ftruncate(self._fd, file_size)
            self._mm = mmap.mmap(self._fd, file_size)
        except BaseException:
            os.close(self._fd)
            raise
        self.closed = False
        self.tail = False  # mapped without readahead (see the module's text)

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_position

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position; returns the global offset written."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            raise StoreError(f"append of {len(data)} bytes overruns {self.path.name}")
        self._mm[pos:end] = data
        self.wrote_position = end
        return self.file_from_offset + pos

    def pwrite(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at a file-relative position with pwrite, not through the mapping.

        The mapping sees it at once (one page cache). Unlike a store into the
        mapping, a whole page written this way is not zero-filled first nor
        faulted in, a page cleaned by fdatasync is not write-protected against
        the next append, and a full disk is an ``OSError``, not a SIGBUS.
        """
        view = memoryview(data).cast("B")
        if pos + len(view) > self.file_size:
            raise StoreError(f"write of {len(view)} bytes at {pos} overruns {self.path.name}")
        done = 0
        while done < len(view):
            done += os.pwrite(self._fd, view[done:], pos + done)

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Overwrite bytes at a file-relative position (index and queue files)."""
        self._mm[pos : pos + len(data)] = data

    def read(self, pos: int, size: int) -> bytes:
        """A copy of ``size`` bytes from the file-relative ``pos``."""
        if self.tail and pos + size < self.wrote_position - _COLD_DISTANCE and size > PAGE_SIZE:
            self.will_need(pos, size)
        return self._mm[pos : pos + size]

    def set_tail(self, tail: bool) -> None:
        """Map without readahead while this is the segment appended to (``tail``), with
        the kernel's normal readahead otherwise."""
        advice = _MADV_RANDOM if tail else _MADV_NORMAL
        if advice is None or self.closed:
            return
        self._mm.madvise(advice)
        self.tail = tail

    def will_need(self, pos: int, size: int) -> None:
        """Ask the kernel to read ``size`` bytes from ``pos`` in now (one request, in
        place of the readahead the tail does not get)."""
        if _MADV_WILLNEED is None:
            return
        start = pos - pos % PAGE_SIZE
        self._mm.madvise(_MADV_WILLNEED, start, min(size + pos - start, self.file_size - start))

    def buffer(self) -> mmap.mmap:
        """The mapping itself, for callers that view it with numpy (index files)."""
        return self._mm

    def dirty_pages(self) -> int:
        return (self.wrote_position // PAGE_SIZE) - (self.flushed_position // PAGE_SIZE)

    def flush(self, least_pages: int = 0) -> int:
        """fdatasync if at least ``least_pages`` pages are dirty (0: if any byte is)."""
        target = self.wrote_position
        if target <= self.flushed_position:
            return self.flushed_position
        if least_pages > 0 and self.dirty_pages() < least_pages:
            return self.flushed_position
        _datasync(self._fd)
        self.flushed_position = max(self.flushed_position, target)
        return self.flushed_position

    def sync(self) -> None:
        """fdatasync unconditionally (files written at random positions: index files)."""
        _datasync(self._fd)
        self.flushed_position = self.wrote_position

    def zero_from(self, pos: int) -> None:
        """Drop everything from ``pos`` to the end of the file (punched back to zeros)."""
        self._mm.flush()
        self._mm.close()
        os.ftruncate(self._fd, pos)
        os.ftruncate(self._fd, self.file_size)
        os.fsync(self._fd)
        self._mm = mmap.mmap(self._fd, self.file_size)
        if self.tail:
            self.set_tail(True)
        self.wrote_position = min(self.wrote_position, pos)
        self.flushed_position = min(self.flushed_position, pos)

    def mtime(self) -> float:
        return os.stat(self.path).st_mtime

    def touch(self) -> None:
        os.utime(self.path)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._mm.close()
        except BufferError:
            log.warning("segment %s still has readers; leaving its mapping open", self.path)
        os.close(self._fd)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


def _preallocate(path: Path, size: int) -> None:
    """Create ``path`` at its full (sparse) ``size`` atomically."""
    tmp = path.with_name(path.name + _TMP_SUFFIX)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)
    os.replace(tmp, path)


class MappedFileQueue:
    """Segments of one logical log, ordered by start offset, all ``file_size`` bytes."""

    def __init__(self, directory: Path, file_size: int, *, tail_advice: bool = False) -> None:
        """``tail_advice``: the last segment is mapped without readahead once
        ``advise_tail`` is called, and every segment created after (the CommitLog's)."""
        self.directory = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self._lock = threading.RLock()
        self.tail_advice = tail_advice
        self._advising = False

    def load(self) -> None:
        """Map every segment on disk; a file of the wrong size or a gap is an error."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for stale in self.directory.glob("*" + _TMP_SUFFIX):
            if parse_file_name(stale.name[: -len(_TMP_SUFFIX)]) is not None:
                log.warning("removing %s: a segment whose creation was interrupted", stale)
                stale.unlink()
        names = sorted(
            p
            for p in self.directory.iterdir()
            if p.is_file() and parse_file_name(p.name) is not None
        )
        files: list[MappedFile] = []
        for path in names:
            size = path.stat().st_size
            if size != self.file_size:
                raise StoreError(
                    f"segment {path} is {size} bytes, the store's segment size is {self.file_size}"
                )
            mf = MappedFile(path, self.file_size)
            if files and mf.file_from_offset != files[-1].end_offset:
                raise StoreError(f"segment {path.name} does not follow {files[-1].path.name}")
            if mf.file_from_offset % self.file_size:
                raise StoreError(f"segment {path.name} is not aligned to {self.file_size}")
            files.append(mf)
        with self._lock:
            self.files = files

    def first(self) -> MappedFile | None:
        return self.files[0] if self.files else None

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def min_offset(self) -> int:
        first = self.first()
        return first.file_from_offset if first else 0

    def max_offset(self) -> int:
        last = self.last()
        return last.file_from_offset + last.wrote_position if last else 0

    def create(self, start: int) -> MappedFile:
        """Map a new segment at ``start`` (must follow the last one, if any)."""
        with self._lock:
            last = self.last()
            if last is not None and start != last.end_offset:
                raise StoreError(f"new segment at {start} does not follow {last.path.name}")
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / file_name(start)
            if not path.exists():
                # sized under a temporary name, then renamed: a crash never leaves a
                # short segment behind, which load() (rightly) refuses to map
                _preallocate(path, self.file_size)
            mf = MappedFile(path, self.file_size)
            fsync_dir(self.directory)
            self.files = [*self.files, mf]
            if self._advising:
                if last is not None:
                    last.set_tail(False)
                mf.set_tail(True)
            return mf

    def advise_tail(self) -> None:
        """From now on the last segment has no readahead (after recovery, which reads
        the tail sequentially); a no-op unless ``tail_advice``."""
        if not self.tail_advice:
            return
        with self._lock:
            self._advising = True
            last = self.last()
            if last is not None:
                last.set_tail(True)

    def last_for_append(self) -> MappedFile:
        last = self.last()
        if last is None:
            return self.create(0)
        if last.remaining == 0:
            return self.create(last.end_offset)
        return last

    def find(self, offset: int) -> MappedFile | None:
        """The segment holding global ``offset``; O(1) since segments are fixed-size."""
        files = self.files
        if not files:
            return None
        index = (offset - files[0].file_from_offset) // self.file_size
        if 0 <= index < len(files):
            mf = files[index]
            if mf.file_from_offset <= offset < mf.end_offset:
                return mf
        return None

    def flush(self, least_pages: int = 0) -> int:
        """Flush every segment with unflushed bytes; returns the flushed global offset."""
        flushed = self.min_offset()
        for mf in self.files:
            if mf.flushed_position < mf.wrote_position:
                mf.flush(least_pages)
            flushed = mf.file_from_offset + mf.flushed_position
            if mf.flushed_position < mf.file_size:
                break
        return flushed

    def flushed_offset(self) -> int:
        for mf in self.files:
            if mf.flushed_position < mf.file_size:
                return mf.file_from_offset + mf.flushed_position
        return self.max_offset()

    def truncate(self, offset: int) -> None:
        """Drop everything from ``offset`` on: zero the rest of its segment, delete later ones."""
        with self._lock:
            keep: list[MappedFile] = []
            for mf in self.files:
                if mf.end_offset <= offset:
                    keep.append(mf)
                elif mf.file_from_offset <= offset:
                    mf.zero_from(offset - mf.file_from_offset)
                    keep.append(mf)
                else:
                    log.warning("deleting segment %s past the truncation point %d", mf.path, offset)
                    mf.destroy()
            self.files = keep
            if keep:
                fsync_dir(self.directory)

    def delete_first(self, count: int) -> list[MappedFile]:
        """Remove the ``count`` oldest segments (never the last one)."""
        with self._lock:
            count = min(count, len(self.files) - 1)
            if count <= 0:
                return []
            gone, self.files = self.files[:count], self.files[count:]
        for mf in gone:
            mf.destroy()
        fsync_dir(self.directory)
        return gone

    def close(self) -> None:
        with self._lock:
            for mf in self.files:
                mf.close()

    def expired_before(self, now: float, max_age_s: float) -> int:
        """How many leading segments (never the last) were written before ``now - max_age_s``."""
        n = 0
        for mf in self.files[:-1]:
            if now - mf.mtime() < max_age_s:
                break
            n += 1
        return n
