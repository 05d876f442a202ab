"""Hash index for lookups by key and by UNIQ_KEY, in RocketMQ's IndexFile layout.

Each file: a 40-byte header (begin/end store timestamp, begin/end physical
offset, used slot count, entry count), ``max_hash_slot_num`` i32 slots holding
the newest entry of each hash bucket, then ``max_index_num`` 20-byte entries
(key hash i32, physical offset i64, seconds since the file's begin i32,
previous entry of the bucket i32). Entry 0 is unused: 0 means "none". Keys
are ``topic#key``. A lookup walks one bucket's chain: no scan of the log.

Files are named by the physical offset of their first record. Entries may
point past a truncated log tail after a crash; readers check the record.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from broker.store.files import file_name, parse_file_name
from broker.store.kernels import index_insert
from broker.store.mapped_file import MappedFile
from connector.protocol.hashing import crc32, key_hash

__all__ = ["IndexService", "key_hash"]

log = logging.getLogger(__name__)
_HEADER = struct.Struct(">qqqqii")
_ENTRY = struct.Struct(">iqii")
_I32 = struct.Struct(">i")
HEADER_SIZE = 40
_ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("offset", ">i8"), ("time_diff", ">i4"), ("prev", ">i4")])


class IndexFile:
    def __init__(self, path: Path, slot_num: int, index_num: int) -> None:
        self.slot_num = slot_num
        self.index_num = index_num
        size = HEADER_SIZE + slot_num * 4 + index_num * _ENTRY_DTYPE.itemsize
        self.file = MappedFile(path, size)
        self.begin_phys = parse_file_name(path.name) or 0
        buf = self.file.buffer()
        self._slots: Any = np.ndarray((slot_num,), dtype=">i4", buffer=buf, offset=HEADER_SIZE)
        self._raw: Any = np.frombuffer(buf, dtype=np.uint8)
        self._entries_at = HEADER_SIZE + slot_num * 4
        self._entries: Any = np.ndarray(
            (index_num,), dtype=_ENTRY_DTYPE, buffer=buf, offset=HEADER_SIZE + slot_num * 4
        )
        (self.begin_ts, self.end_ts, _, self.end_phys, self.slot_count, self.index_count) = (
            _HEADER.unpack(self.file.read(0, HEADER_SIZE))
        )
        if self.index_count <= 0:
            self.index_count = 1
            self.begin_ts = self.end_ts = 0
            self.end_phys = self.begin_phys
        self._repair_slots()

    def _repair_slots(self) -> None:
        """Point slots left at uncommitted entries back at the newest committed one.

        A put writes entries, then slots, then the header's entry count; a
        crash in between leaves slots pointing past the count. Those entries
        will be overwritten by the next puts, so such a slot must not be kept
        (it would join another bucket's chain) nor zeroed (the bucket's older
        entries would be lost): its chain, still intact, is followed back.
        """
        count = self.index_count
        bad = np.flatnonzero(self._slots >= count)
        if not bad.size:
            return
        log.warning(
            "index %s: %d slot(s) point past its last entry; repairing", self.file.path, bad.size
        )
        heads = self._slots[bad].astype(np.int64)
        while bad.size:
            inside = heads < self.index_num
            prev = self._entries["prev"][np.where(inside, heads, 0)].astype(np.int64)
            # chains only point backwards; anything else is damage: cut the chain there
            prev = np.where(inside & (prev >= 0) & (prev < heads), prev, 0)
            self._slots[bad] = prev
            more = prev >= count
            bad, heads = bad[more], prev[more]

    def room(self) -> int:
        return int(self.index_num - self.index_count)

    def _write_header(self) -> None:
        self.file.write_at(
            0,
            _HEADER.pack(
                self.begin_ts,
                self.end_ts,
                self.begin_phys,
                self.end_phys,
                self.slot_count,
                self.index_count,
            ),
        )

    def put(self, hashes: np.ndarray, offsets: np.ndarray, timestamps_ms: int | np.ndarray) -> None:
        """Add entries (at most ``room()``); ``timestamps_ms`` is each record's store time,
        or one for all."""
        if len(hashes) == 0:
            return
        if isinstance(timestamps_ms, int):  # one store time for all (a batch, a group)
            newest = timestamps_ms
            if self.begin_ts == 0:
                self.begin_ts = newest
            diffs = np.full(len(hashes), max(0, (newest - self.begin_ts) // 1000), np.int64)
        else:
            ts = timestamps_ms
            newest = int(ts.max())
            if self.begin_ts == 0:
                self.begin_ts = int(ts.min())
            diffs = np.maximum(0, (ts - self.begin_ts) // 1000)
        self.index_count, self.slot_count = index_insert(
            self._raw,
            self.slot_num,
            self.index_count,
            self.slot_count,
            np.ascontiguousarray(hashes, dtype=np.int64),
            np.ascontiguousarray(offsets, dtype=np.int64),
            np.ascontiguousarray(diffs, dtype=np.int64),
        )
        self.end_ts = max(self.end_ts, newest)
        self.end_phys = max(self.end_phys, int(offsets.max()))
        self._write_header()

    def put_one(self, h: int, offset: int, timestamp_ms: int) -> None:
        """One entry, without numpy: the single-message path (kept lean on purpose)."""
        if self.begin_ts == 0:
            self.begin_ts = timestamp_ms
        buf = self.file.buffer()
        count = self.index_count
        spos = HEADER_SIZE + (h % self.slot_num) * 4
        (prev,) = _I32.unpack_from(buf, spos)
        if prev <= 0 or prev >= count:
            if prev == 0:
                self.slot_count += 1
            prev = 0
        diff = (timestamp_ms - self.begin_ts) // 1000
        _ENTRY.pack_into(
            buf, self._entries_at + count * 20, h, offset, diff if diff > 0 else 0, prev
        )
        _I32.pack_into(buf, spos, count)
        self.index_count = count + 1
        if timestamp_ms > self.end_ts:
            self.end_ts = timestamp_ms
        if offset > self.end_phys:
            self.end_phys = offset
        self._write_header()

    def lookup(self, h: int, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        if self.end_ts and (self.end_ts < begin_ms or self.begin_ts > end_ms):
            return []
        found: list[int] = []
        idx = int(self._slots[h % self.slot_num])
        steps = 0
        while 0 < idx < self.index_count and len(found) < max_num and steps < self.index_count:
            e = self._entries[idx]
            ts = self.begin_ts + int(e["time_diff"]) * 1000
            if int(e["hash"]) == h and begin_ms - 999 <= ts <= end_ms:
                found.append(int(e["offset"]))
            prev = int(e["prev"])
            if prev >= idx:  # chains only point backwards; anything else is damage
                break
            idx = prev
            steps += 1
        return found

    def flush(self) -> None:
        self.file.sync()

    def close(self) -> None:
        del self._slots, self._entries, self._raw
        self.file.close()

    def destroy(self) -> None:
        path = self.file.path
        self.close()
        path.unlink(missing_ok=True)


class IndexService:
    """Every index file of the store, newest last."""

    def __init__(self, directory: Path, slot_num: int, index_num: int) -> None:
        self.directory = directory
        self.slot_num = slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []

    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.directory.iterdir()):
            if parse_file_name(path.name) is None:
                continue
            try:
                self.files.append(IndexFile(path, self.slot_num, self.index_num))
            except (OSError, ValueError) as exc:
                log.warning("dropping unreadable index file %s: %s", path, exc)
                path.unlink(missing_ok=True)

    def _writable(self, offset: int) -> IndexFile:
        """The newest file with room, starting a new one (named by ``offset``) when full."""
        current = self.files[-1] if self.files else None
        if current is not None and current.index_count < current.index_num:
            return current
        start = offset
        if current is not None and start <= current.begin_phys:
            # one record's keys filled a whole file: keep names unique and ordered
            start = current.begin_phys + 1
        current = IndexFile(self.directory / file_name(start), self.slot_num, self.index_num)
        self.files.append(current)
        return current

    def put_keys_at(self, topic: str, keys: Sequence[str], offset: int, timestamp_ms: int) -> None:
        """Index every key of one record (the single-message path)."""
        prefix = crc32(f"{topic}#".encode())
        for key in keys:
            h = crc32(key.encode(), prefix) & 0x7FFFFFFF  # == key_hash(f"{topic}#{key}")
            self._writable(offset).put_one(h, offset, timestamp_ms)

    def put_hashes(
        self, hashes: np.ndarray, offsets: np.ndarray, timestamps_ms: int | np.ndarray
    ) -> None:
        """Index pre-computed key hashes (``key_hash`` of ``topic#key``) at ``offsets``.

        ``timestamps_ms`` is one store time for all, or one per hash.
        """
        done = 0
        while done < len(hashes):
            current = self._writable(int(offsets[done]))
            take = min(current.room(), len(hashes) - done)
            ts = timestamps_ms
            if not isinstance(ts, int):
                ts = ts[done : done + take]
            current.put(hashes[done : done + take], offsets[done : done + take], ts)
            done += take

    def lookup(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Physical offsets of records indexed under ``key``, newest first, de-duplicated."""
        h = key_hash(f"{topic}#{key}")
        seen: set[int] = set()
        out: list[int] = []
        for f in reversed(self.files):
            for off in f.lookup(h, max_num, begin_ms, end_ms):
                if off not in seen:
                    seen.add(off)
                    out.append(off)
            if len(out) >= max_num:
                break
        return out[:max_num]

    def delete_below(self, commit_log_min: int) -> int:
        """Delete files whose every entry points below ``commit_log_min`` (never the newest)."""
        count = 0
        while len(self.files) > 1 and self.files[0].end_phys < commit_log_min:
            self.files.pop(0).destroy()
            count += 1
        return count

    def flush(self) -> None:
        for f in self.files[-2:]:
            f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []
