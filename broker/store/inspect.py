"""Read-only views of a store directory: ``pymq store inspect`` and ``pymq store verify``.

Both open files read-only and never recover or modify anything, so they are
safe on a store that another process owns (what they see may then lag).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.store.checkpoint import Checkpoint
from broker.store.files import parse_file_name
from connector.errors import CorruptRecordError
from connector.protocol.record import check_record

__all__ = ["VerifyReport", "inspect_store", "verify_store"]

_CQ_ENTRY = struct.Struct(">qiq")


def _segments(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        return []
    out = [(parse_file_name(p.name), p) for p in directory.iterdir() if p.is_file()]
    return sorted((start, p) for start, p in out if start is not None)


def _queue_dirs(store_dir: Path) -> list[tuple[str, int, Path]]:
    root = store_dir / "consumequeue"
    out = []
    if root.is_dir():
        for tdir in sorted(p for p in root.iterdir() if p.is_dir()):
            for qdir in sorted(p for p in tdir.iterdir() if p.is_dir() and p.name.isdigit()):
                out.append((tdir.name, int(qdir.name), qdir))
    return out


def _queue_entries(qdir: Path) -> list[tuple[int, int, int, int]]:
    """(logical offset, commit log offset, size, tags code) of every used entry."""
    entries = []
    for start, path in _segments(qdir):
        data = path.read_bytes()
        for i in range(0, len(data) - len(data) % 20, 20):
            off, size, tags = _CQ_ENTRY.unpack_from(data, i)
            if size > 0:
                entries.append(((start + i) // 20, off, size, tags))
    return entries


def inspect_store(store_dir: Path) -> dict[str, Any]:
    """Segments, queues (min/max offset) and the checkpoint, as plain data."""
    cp = Checkpoint.load(store_dir / "checkpoint")
    queues = []
    for topic, qid, qdir in _queue_dirs(store_dir):
        entries = _queue_entries(qdir)
        queues.append(
            {
                "topic": topic,
                "queue_id": qid,
                "min_offset": entries[0][0] if entries else 0,
                "max_offset": entries[-1][0] + 1 if entries else 0,
            }
        )
    return {
        "store_dir": str(store_dir),
        "running_or_crashed": (store_dir / "abort").exists(),
        "segments": [
            {"name": p.name, "start": start, "bytes": p.stat().st_size}
            for start, p in _segments(store_dir / "commitlog")
        ],
        "queues": queues,
        "checkpoint": None
        if cp is None
        else {
            "physic_offset": cp.physic_offset,
            "logic_offset": cp.logic_offset,
            "index_offset": cp.index_offset,
            "clean_shutdown": cp.clean_shutdown,
        },
    }


@dataclass
class VerifyReport:
    records: int = 0
    end_offset: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_store(store_dir: Path) -> VerifyReport:
    """Check every record (magic, sizes, CRC, position) and every queue entry."""
    report = VerifyReport()
    seen: dict[int, tuple[str, int, int, int]] = {}
    for start, path in _segments(store_dir / "commitlog"):
        with open(path, "rb") as f:
            size = path.stat().st_size
            if size == 0:
                report.problems.append(f"{path.name}: empty segment file")
                continue
            with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as buf:
                pos = 0
                while pos < size:
                    try:
                        chk = check_record(buf, pos, expected_offset=start + pos, limit=size)
                    except CorruptRecordError as exc:
                        if buf[pos : pos + 8] != bytes(8):
                            report.problems.append(f"{path.name} at {start + pos}: {exc.message}")
                        break
                    if chk.blank:
                        break
                    seen[start + pos] = (chk.topic, chk.queue_id, chk.queue_offset, chk.size)
                    report.records += 1
                    pos += chk.size
                report.end_offset = start + pos
    for topic, qid, qdir in _queue_dirs(store_dir):
        for logical, off, size, _tags in _queue_entries(qdir):
            rec = seen.get(off)
            if rec is None:
                report.problems.append(f"queue {topic}/{qid} offset {logical}: no record at {off}")
            elif rec != (topic, qid, logical, size):
                report.problems.append(
                    f"queue {topic}/{qid} offset {logical}: entry points at {rec[0]}/{rec[1]}"
                    f" offset {rec[2]} ({rec[3]} bytes)"
                )
    return report
