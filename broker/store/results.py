"""What the store answers: status enums and small result objects, no exceptions.

The store raises only for corruption or a broken invariant; every expected
outcome (a full disk, a flush that timed out, an offset past the end) is a
status here, mapped to the wire once, at the broker's edge.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from connector.protocol.msgid import encode_offset_msg_id

__all__ = [
    "AppendResult",
    "GetMessageStatus",
    "PutMessageResult",
    "PutMessageStatus",
    "RecoveryReport",
]


class PutMessageStatus(str, enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def ok(self) -> bool:
        return self in _STORED


_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


@dataclass(slots=True)
class AppendResult:
    """Where a message (or a batch: its first message) landed."""

    wrote_offset: int
    wrote_bytes: int
    queue_offset: int
    msg_num: int
    store_timestamp: int
    offsets_array: np.ndarray | None = None  # per message, for a batch

    @property
    def end_offset(self) -> int:
        return self.wrote_offset + self.wrote_bytes

    @property
    def physical_offsets(self) -> tuple[int, ...]:
        """Each message's CommitLog offset (a batch's, in order)."""
        if self.offsets_array is None:
            return (self.wrote_offset,)
        return tuple(self.offsets_array.tolist())

    def offset_msg_ids(self, store_host: bytes) -> list[str]:
        """One offset msgId per message, in order."""
        return [encode_offset_msg_id(store_host, off) for off in self.physical_offsets]


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append: AppendResult | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status.ok

    def replicated(self, status: PutMessageStatus) -> PutMessageResult:
        """This append as SYNC_MASTER answers it: ``status`` from the HA service
        (PUT_OK, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE), unless the flush already
        failed (FLUSH_DISK_TIMEOUT stands)."""
        if status is PutMessageStatus.PUT_OK or self.status is not PutMessageStatus.PUT_OK:
            return self
        messages = {
            PutMessageStatus.FLUSH_SLAVE_TIMEOUT: "not replicated within sync_flush_timeout_ms",
            PutMessageStatus.SLAVE_NOT_AVAILABLE: "no slave is in sync",
        }
        return PutMessageResult(status, append=self.append, message=messages.get(status, ""))

    def flush_timed_out(self) -> PutMessageResult:
        """This append, stored but not flushed within ``sync_flush_timeout_ms``."""
        return PutMessageResult(
            PutMessageStatus.FLUSH_DISK_TIMEOUT,
            append=self.append,
            message="not flushed within sync_flush_timeout_ms",
        )


class GetMessageStatus(str, enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class RecoveryReport:
    """What recovery did, for the log and for tests."""

    abnormal: bool = False
    checkpoint_found: bool = True
    scanned_from: int = 0
    scanned_bytes: int = 0
    records_scanned: int = 0
    truncated_at: int | None = None
    dropped_bytes: int = 0
    reason: str = ""
    consume_queue_entries_rebuilt: int = 0
    consume_queue_entries_dropped: int = 0
    queues_rebuilt: list[str] = field(default_factory=list)
    index_entries_rebuilt: int = 0
    seconds: float = 0.0
