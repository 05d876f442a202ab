"""The epoch file: which master wrote which stretch of the CommitLog.

An epoch starts each time a broker becomes master, at the CommitLog offset
where it starts writing: ``(epoch, start_offset)`` entries, in order, in
``store_dir/epochs.json`` (written atomically, fsync'ed, so it survives
``kill -9``). A slave keeps its master's entries. Two replicas whose lists
share an entry (same epoch, same start) wrote the same bytes up to where
that epoch ends on the shorter of the two; past it they may differ. That is
how a slave finds where to truncate to after a master change (RocketMQ 5's
controller mode), and the epoch is the term a later election would bump.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.store.files import load_json, save_json
from connector.errors import StoreError

__all__ = ["EpochEntry", "EpochFile", "consistent_point", "parse_entries"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int

    def as_list(self) -> list[int]:
        return [self.epoch, self.start_offset]


def _parse(raw: object) -> list[EpochEntry]:
    if not isinstance(raw, list):
        raise StoreError("epoch list is not a list")
    out: list[EpochEntry] = []
    for item in raw:
        if (
            not isinstance(item, list | tuple)
            or len(item) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in item)
        ):
            raise StoreError(f"epoch entry {item!r} is not [epoch, start_offset]")
        entry = EpochEntry(int(item[0]), int(item[1]))
        if out and (entry.epoch <= out[-1].epoch or entry.start_offset < out[-1].start_offset):
            raise StoreError(f"epoch entries out of order at {item!r}")
        out.append(entry)
    return out


def parse_entries(raw: object) -> list[EpochEntry]:
    """Entries from their JSON form ``[[epoch, start], ...]``; StoreError if malformed."""
    return _parse(raw)


def _ends(entries: Sequence[EpochEntry], max_offset: int) -> dict[int, tuple[int, int]]:
    """epoch -> (start, end) of the bytes it wrote in a log ending at ``max_offset``."""
    out: dict[int, tuple[int, int]] = {}
    for i, e in enumerate(entries):
        end = entries[i + 1].start_offset if i + 1 < len(entries) else max_offset
        out[e.epoch] = (e.start_offset, min(end, max_offset))
    return out


def consistent_point(
    mine: Sequence[EpochEntry], my_max: int, theirs: Sequence[EpochEntry], their_max: int
) -> int | None:
    """The end of the longest prefix two logs are known to share, or None if they share
    no epoch (nothing is known to be common).

    The newest epoch both lists hold with the same start decides: both wrote it from
    the same history, so they agree up to where it ends on the shorter side.
    """
    their_ranges = _ends(theirs, their_max)
    my_ranges = _ends(mine, my_max)
    for e in reversed(mine):
        other = their_ranges.get(e.epoch)
        if other is None or other[0] != e.start_offset:
            continue
        return max(0, min(my_ranges[e.epoch][1], other[1]))
    return None


class EpochFile:
    """``epochs.json`` of one store. Not thread-safe: the HA service owns it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[EpochEntry] = []

    def load(self) -> list[EpochEntry]:
        raw = load_json(self.path)
        if raw is None:
            self.entries = []
        else:
            try:
                self.entries = _parse(raw.get("epochs") if isinstance(raw, dict) else None)
            except StoreError as exc:
                raise StoreError(f"epoch file {self.path} is damaged: {exc.message}") from None
        return self.entries

    def save(self) -> None:
        save_json(self.path, {"epochs": [e.as_list() for e in self.entries]})

    @property
    def last(self) -> EpochEntry | None:
        return self.entries[-1] if self.entries else None

    @property
    def current(self) -> int:
        """The newest epoch, 0 before any broker was master of this log."""
        return self.entries[-1].epoch if self.entries else 0

    def truncate_past(self, max_offset: int) -> None:
        """Forget epochs that start past the end of the log (they wrote nothing here)."""
        kept = [e for e in self.entries if e.start_offset <= max_offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self.save()

    def begin(self, max_offset: int) -> EpochEntry:
        """Become master: a new epoch starting at ``max_offset``, saved before returning.

        The new epoch is above every epoch this log has seen, those it forgets
        included: an epoch number names one history only."""
        highest = self.current
        self.truncate_past(max_offset)
        entry = EpochEntry(highest + 1, max_offset)
        self.entries = [*self.entries, entry]
        self.save()
        log.info("epoch %d begins at CommitLog offset %d", entry.epoch, entry.start_offset)
        return entry

    def replace(self, entries: Sequence[EpochEntry]) -> None:
        """Take a master's entries (a slave, once its log agrees with the master's)."""
        if list(entries) != self.entries:
            self.entries = list(entries)
            self.save()
