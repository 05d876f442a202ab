"""How far a micro-batch reads: the stream's rate options, as Spark's Kafka source.

Spark hands the Python source one ``ReadLimit`` (PySpark has no composite limit):
the one ``default_read_limit`` chose from the options, or ``ReadAllAvailable``
when the trigger wants everything (``Trigger.Once``). Any limit but
``ReadAllAvailable`` means "apply the options", so ``minMessagesPerTrigger``,
``maxMessagesPerTrigger`` and ``maxBytesPerTrigger`` all hold together:

- ``minMessagesPerTrigger`` with ``maxTriggerDelay``: a trigger with fewer new
  messages than the minimum reads nothing (the end offsets are the start ones),
  until ``maxTriggerDelay`` has passed since the last batch; then it reads what
  there is (Kafka's ``delayBatch``, same clock rule: the first trigger of a
  reader is never delayed). Not applied under ``Trigger.AvailableNow``, which
  must reach its target and end.
- ``maxMessagesPerTrigger``: at most that many offsets, shared by backlog.
- ``maxBytesPerTrigger``: at most about that many body bytes. Offsets say how
  many messages, not how big, so the source samples: one pull of a few messages
  at each queue's start offset gives that queue's average stored body size
  (compressed bodies count compressed), and a queue's share of the bytes
  becomes a number of offsets. Messages of uneven size make the cap
  approximate; a batch always takes at least one message, so one message
  larger than the cap does not stall the stream.

Everything here is pure (the clock is injectable); the sampling pull lives in
``stream.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    ReadMaxRows,
    ReadMinRows,
)

from connector.spark.options import ReadOptions

__all__ = [
    "Admission",
    "TriggerLimits",
    "default_read_limit",
    "split_bytes",
    "split_limit",
]

K = TypeVar("K", bound=Hashable)


def default_read_limit(opts: ReadOptions) -> ReadLimit:
    """The limit Spark hands back to ``latestOffset``; which one matters only to Spark
    (it never looks inside), ``TriggerLimits.of`` applies every rate option whichever."""
    if opts.max_per_trigger:
        return ReadMaxRows(opts.max_per_trigger)
    if opts.max_bytes_per_trigger:
        return ReadMaxBytes(opts.max_bytes_per_trigger)
    if opts.min_per_trigger:
        return ReadMinRows(opts.min_per_trigger)
    return ReadAllAvailable()


@dataclass(frozen=True)
class TriggerLimits:
    max_rows: int | None = None
    min_rows: int | None = None
    max_trigger_delay_ms: int = 0
    max_bytes: int | None = None

    @classmethod
    def of(cls, opts: ReadOptions, limit: ReadLimit) -> TriggerLimits | None:
        """The limits of one trigger; None: read everything available."""
        if isinstance(limit, ReadAllAvailable):
            return None
        out = cls(
            opts.max_per_trigger,
            opts.min_per_trigger,
            opts.max_trigger_delay_ms,
            opts.max_bytes_per_trigger,
        )
        # a limit Spark passes that the options did not set (not done by Spark 4.3 for
        # Python sources, but allowed by the API) tightens them
        if isinstance(limit, ReadMaxRows):
            out = replace(out, max_rows=min(limit.max_rows, out.max_rows or limit.max_rows))
        elif isinstance(limit, ReadMaxBytes):
            out = replace(out, max_bytes=min(limit.max_bytes, out.max_bytes or limit.max_bytes))
        elif isinstance(limit, ReadMinRows) and out.min_rows is None:
            out = replace(out, min_rows=limit.min_rows)
        return out


def split_limit(start: Mapping[K, int], latest: Mapping[K, int], max_rows: int) -> dict[K, int]:
    """End offsets reading at most ``max_rows`` in all, shared by backlog (largest first)."""
    backlog = {k: max(0, latest[k] - start.get(k, 0)) for k in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    share = {k: (v * max_rows) // total for k, v in backlog.items()}
    left = max_rows - sum(share.values())
    for k in sorted(backlog, key=lambda k: backlog[k] - share[k], reverse=True):
        if left <= 0:
            break
        if share[k] < backlog[k]:
            share[k] += 1
            left -= 1
    return {k: start.get(k, 0) + share[k] for k in latest}


def split_bytes(
    start: Mapping[K, int],
    latest: Mapping[K, int],
    avg_bytes: Mapping[K, float],
    max_bytes: int,
) -> dict[K, int]:
    """End offsets reading about ``max_bytes`` of bodies in all, shared by backlog bytes.

    ``avg_bytes`` is each queue's average body size; a queue missing from it counts
    with the mean of the others. At least one message is read when any is there.
    """
    backlog = {k: max(0, latest[k] - start.get(k, 0)) for k in latest}
    known = [v for k, v in avg_bytes.items() if backlog.get(k)]
    if not known:
        return dict(latest)
    mean = sum(known) / len(known)
    size = {k: max(float(avg_bytes.get(k, mean)), 1.0) for k in backlog}
    total = sum(backlog[k] * size[k] for k in backlog)
    if total <= max_bytes:
        return dict(latest)
    # each queue gets max_bytes * (its backlog bytes / all backlog bytes): the same
    # fraction of its backlog for every queue
    share = {k: int(backlog[k] * max_bytes / total) for k in backlog}
    if not any(share.values()):
        first = max(backlog, key=lambda k: backlog[k])
        share[first] = 1
    return {k: start.get(k, 0) + share[k] for k in latest}


class Admission:
    """The end offsets of each trigger, and the time of the last batch (``delayBatch``)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.last_batch_s: float | None = None  # None: no trigger yet, the first is not delayed

    def end(
        self,
        start: Mapping[K, int],
        latest: Mapping[K, int],
        limits: TriggerLimits | None,
        *,
        available_now: bool = False,
        avg_bytes: Callable[[dict[K, int]], Mapping[K, float]] | None = None,
    ) -> dict[K, int]:
        """Where this trigger's batch ends; ``start`` itself means "no batch now".

        ``avg_bytes(ends)`` samples the average body size of the queues that would be
        read up to ``ends``; it is called only with ``maxBytesPerTrigger``.
        """
        if limits is None:
            return dict(latest)
        if limits.min_rows and not available_now and self._delay(start, latest, limits):
            return dict(start)  # the same offsets: Spark runs no batch
        end = dict(latest)
        if limits.max_rows:
            end = split_limit(start, end, limits.max_rows)
        if limits.max_bytes and avg_bytes is not None:
            end = split_bytes(start, end, avg_bytes(end), limits.max_bytes)
        return end

    def _delay(
        self, start: Mapping[K, int], latest: Mapping[K, int], limits: TriggerLimits
    ) -> bool:
        now = self.clock()
        waited_ms = None if self.last_batch_s is None else (now - self.last_batch_s) * 1000
        if waited_ms is None or waited_ms >= limits.max_trigger_delay_ms:
            self.last_batch_s = now
            return False
        new = sum(max(0, v - start.get(k, 0)) for k, v in latest.items())
        if new < (limits.min_rows or 0):
            return True
        self.last_batch_s = now
        return False
