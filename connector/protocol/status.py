"""Result statuses a client sees (RocketMQ's SendStatus and PullStatus)."""

from __future__ import annotations

import enum

__all__ = ["PullStatus", "SendStatus"]


class SendStatus(str, enum.Enum):
    """A stored message; anything but SEND_OK means stored, not yet as safe as asked."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


class PullStatus(str, enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"
