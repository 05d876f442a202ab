"""A slave's side of the store: CommitLog bytes appended as the master wrote them.

* ``append`` writes replicated bytes at the log's end, byte for byte (so
  physical offsets, offset msgIds and queue offsets are the master's), into
  segments of the same size as the master's.
* ``dispatch_to`` gives the appended records their ConsumeQueue and index
  entries, but only up to the offset the master confirmed (``confirmOffset``:
  what every in-sync replica has): a reader of the slave never sees a
  message that a master change could truncate away.
* ``truncate_to`` cuts the log back to where it agrees with the master's.
  It is crash-safe: the target is written to ``store_dir/ha_truncate``
  (fsync'ed) first and the file removed last; a broker that finds it on
  start (``finish_truncation``) truncates again before serving anything.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.store.epochs import EpochEntry, EpochFile, parse_entries
from broker.store.files import load_json, save_json
from broker.store.recovery import dispatch_between
from connector.errors import StoreError

if TYPE_CHECKING:
    from broker.store.store import MessageStore

__all__ = ["ReplicaLog"]

log = logging.getLogger(__name__)
# a record is at most its body (max_message_size) plus this much (header, topic, properties)
RECORD_SLACK = (64 << 10) + 200


class ReplicaLog:
    """The slave's writes to a ``MessageStore`` (under its put lock)."""

    def __init__(self, store: MessageStore, epochs: EpochFile) -> None:
        self.store = store
        self.epochs = epochs
        self.marker = store.config.store_dir / "ha_truncate"
        self._lock: threading.Lock = store._put_lock
        self._names: dict[bytes, str | None] = {}  # topics by raw bytes, for dispatch_to

    @property
    def max_offset(self) -> int:
        return self.store.commit_log.max_offset()

    @property
    def dispatched(self) -> int:
        return self.store.dispatched_offset

    def pending(self, confirmed: int) -> bool:
        """Whether records up to ``confirmed`` wait for ``dispatch_to``."""
        return min(confirmed, self.max_offset) > self.store.dispatched_offset

    def append(self, offset: int, data: bytes | memoryview) -> int:
        """Write ``data`` at ``offset``, which must be the log's end; returns the new end."""
        segments = self.store.commit_log.queue
        view = memoryview(data).cast("B")
        with self._lock:
            end = self.max_offset
            if offset != end and segments.files:
                raise StoreError(f"replicated bytes at {offset}, but the log ends at {end}")
            size = segments.file_size
            while len(view):
                mf = segments.last()
                if mf is None:  # an empty log starts where the master's does: a segment
                    if offset % size:
                        raise StoreError(f"an empty log cannot start at {offset} (mid-segment)")
                    mf = segments.create(offset)
                    self.store.dispatched_offset = offset
                elif mf.remaining == 0:
                    mf = segments.create(mf.end_offset)
                n = min(len(view), mf.remaining)
                mf.pwrite(mf.wrote_position, view[:n])
                mf.wrote_position += n
                view = view[n:]
            return self.max_offset

    def dispatch_to(
        self, confirmed: int, *, max_records: int | None = None
    ) -> dict[tuple[str, int], int]:
        """Make records up to ``min(confirmed, end of log)`` readable (``max_records``:
        at most about that many this call; ``pending`` says whether more wait); returns
        each queue that gained entries with its new max offset (for long polls to wake)."""
        store = self.store
        with self._lock:
            start = store.dispatched_offset
            end = min(confirmed, self.max_offset)
            if end <= start:
                return {}
            reached, touched = dispatch_between(
                store, start, end, max_records=max_records, names=self._names
            )
            sliced = max_records is not None and reached > start  # the next slice goes on
            if not sliced and end - reached > store.config.max_message_size + RECORD_SLACK:
                # a whole record would have fit: the bytes there are not records
                raise StoreError(
                    f"replicated bytes at {reached} are not a record (dispatching {start}-{end})"
                )
            store.dispatched_offset = reached
        return touched

    # -- truncation ----------------------------------------------------------------

    def truncate_to(self, offset: int, epochs: Sequence[EpochEntry], *, why: str) -> None:
        """Cut the log (queues, dispatch point) back to ``offset`` and take ``epochs``,
        crash-safely (see the module's text)."""
        end = self.max_offset
        if offset < end:
            log.warning(
                "HA: truncating the CommitLog from %d to %d (%d bytes dropped): %s",
                end, offset, end - offset, why,
            )  # fmt: skip
        save_json(self.marker, {"offset": offset, "epochs": [e.as_list() for e in epochs]})
        self._truncate(offset, list(epochs))

    def finish_truncation(self) -> bool:
        """On start: finish a truncation that a crash interrupted. True if there was one."""
        if not self.marker.exists():
            return False
        raw = load_json(self.marker)
        if not isinstance(raw, dict) or not isinstance(raw.get("offset"), int):
            raise StoreError(f"{self.marker} is damaged: cannot tell where to truncate to")
        offset = int(raw["offset"])
        epochs = parse_entries(raw.get("epochs", []))
        log.warning(
            "HA: finishing a truncation to CommitLog offset %d interrupted by a crash "
            "(the log ends at %d)",
            offset, self.max_offset,
        )  # fmt: skip
        self._truncate(offset, epochs)
        return True

    def _truncate(self, offset: int, epochs: list[EpochEntry]) -> None:
        store = self.store
        segments = store.commit_log.queue
        if offset < segments.min_offset() or offset > self.max_offset:
            # nothing in common with the master's log (or a gap before it): start over
            # where the master's begins
            log.warning("HA: the CommitLog shares nothing with the master's; emptying it")
            for topic in store.topics():
                store.delete_topic(topic)
            with self._lock:
                for mf in list(segments.files):
                    mf.destroy()
                segments.files = []
                store.dispatched_offset = offset
        else:
            with self._lock:
                if offset < self.max_offset:
                    segments.truncate(offset)
                dropped = 0
                for queues in list(store.queues.values()):
                    for cq in queues.values():
                        dropped += cq.truncate_dirty(offset)
                if dropped:
                    log.warning("HA: dropped %d ConsumeQueue entries past %d", dropped, offset)
                store.dispatched_offset = min(store.dispatched_offset, offset)
                segments.flush(0)
        store.flush_queues_and_checkpoint()
        self.epochs.replace(epochs)
        self.marker.unlink(missing_ok=True)
