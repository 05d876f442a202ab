"""What a push consumer's listener answers, and the context it is called with."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from connector.protocol.message import MessageQueue

__all__ = ["ConsumeContext", "ConsumeOrderlyStatus", "ConsumeStatus"]


class ConsumeStatus(enum.Enum):
    """A concurrent listener's answer for its batch."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"  # back to %RETRY%group, with a growing delay


class ConsumeOrderlyStatus(enum.Enum):
    """An orderly listener's answer for its batch."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"  # the same batch again


@dataclass(slots=True)
class ConsumeContext:
    """The listener's second argument: the queue the batch comes from. Concurrent
    batches consumed one after the other by one task of the consume pool share one
    context (made a task, not a call: it is read-only for a concurrent listener)."""

    queue: MessageQueue
    orderly: bool = False
    # orderly only: how long the queue pauses after SUSPEND_CURRENT_QUEUE_A_MOMENT
    suspend_current_queue_time_ms: int = 1000
