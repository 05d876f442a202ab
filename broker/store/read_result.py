"""The answer to a pull: raw records as stored, decoded on demand.

Records are kept as the bytes read from the CommitLog (one buffer per run of
adjacent records), so a transport can forward them as they are and bodies
can be cut out without decoding anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from broker.store.results import GetMessageStatus
from connector.protocol.message import MessageExt
from connector.protocol.record import HEADER_SIZE, decode_record

__all__ = ["GetMessageResult", "RecordRun"]

_BE_I32 = np.dtype(">i4")


@dataclass(slots=True)
class RecordRun:
    """Adjacent records: ``data[starts[i] : starts[i] + sizes[i]]`` is record i."""

    data: bytes
    starts: np.ndarray
    sizes: np.ndarray

    def field_i32(self, at: int) -> np.ndarray:
        raw = np.frombuffer(self.data, dtype=np.uint8)
        idx = self.starts[:, None] + np.arange(at, at + 4)
        return raw[idx].copy().view(_BE_I32).reshape(-1).astype(np.int64)


@dataclass(slots=True)
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    runs: list[RecordRun] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)

    @property
    def message_count(self) -> int:
        return sum(len(r.starts) for r in self.runs)

    @property
    def found(self) -> bool:
        return self.status is GetMessageStatus.FOUND

    def records(self) -> list[bytes]:
        """Each record's bytes, exactly as stored."""
        out: list[bytes] = []
        for run in self.runs:
            data = run.data
            out += [
                data[s : s + n]
                for s, n in zip(run.starts.tolist(), run.sizes.tolist(), strict=True)
            ]
        return out

    def bodies(self) -> list[bytes]:
        """Just the bodies (still compressed if the producer compressed them)."""
        out: list[bytes] = []
        for run in self.runs:
            data = run.data
            lens = run.field_i32(HEADER_SIZE - 4).tolist()
            out += [
                data[s : s + n]
                for s, n in zip((run.starts + HEADER_SIZE).tolist(), lens, strict=True)
            ]
        return out

    def messages(self, *, check_crc: bool = True) -> list[MessageExt]:
        """Fully decoded messages (bodies decompressed)."""
        out: list[MessageExt] = []
        for run in self.runs:
            data = run.data
            out += [decode_record(data, s, check_crc=check_crc) for s in run.starts.tolist()]
        return out
