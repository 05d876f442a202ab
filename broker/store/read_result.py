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
from connector.protocol.record import decode_record

__all__ = ["GetMessageResult", "RecordRun"]


@dataclass(slots=True)
class RecordRun:
    """Adjacent records: ``data[starts[i] : starts[i] + sizes[i]]`` is record i.

    ``body_starts`` / ``body_ends`` locate each body inside ``data`` (found
    while the run was checked).
    """

    data: bytes
    starts: np.ndarray
    sizes: np.ndarray
    body_starts: np.ndarray
    body_ends: np.ndarray


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
            ends = run.body_ends.tolist()
            out += [data[s:e] for s, e in zip(run.body_starts.tolist(), ends, strict=True)]
        return out

    def messages(self, *, check_crc: bool = True) -> list[MessageExt]:
        """Fully decoded messages (bodies decompressed)."""
        out: list[MessageExt] = []
        for run in self.runs:
            data = run.data
            out += [decode_record(data, s, check_crc=check_crc) for s in run.starts.tolist()]
        return out
