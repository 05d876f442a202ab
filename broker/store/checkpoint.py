"""The store checkpoint: how far the log, the queues and the index are durable.

``physic_offset``: the CommitLog is flushed up to here. ``logic_offset`` /
``index_offset``: every ConsumeQueue / index entry for records below it is
flushed. ``queue_offsets`` is each queue's entry count at ``logic_offset``, so
recovery can tell a queue that lost files from one that never had more. The
file is replaced atomically (temp + rename, previous version kept as .bak).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from broker.store.files import load_json, save_json

__all__ = ["Checkpoint"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Checkpoint:
    physic_offset: int = 0
    logic_offset: int = 0
    index_offset: int = 0
    physic_timestamp: int = 0
    logic_timestamp: int = 0
    clean_shutdown: bool = False
    queue_offsets: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def recover_from(self) -> int:
        return min(self.physic_offset, self.logic_offset, self.index_offset)

    def save(self, path: Path) -> None:
        save_json(path, {"version": 1, **asdict(self)})

    @classmethod
    def load(cls, path: Path) -> Checkpoint | None:
        raw = load_json(path)
        if raw is None:
            return None
        try:
            return cls(
                physic_offset=int(raw["physic_offset"]),
                logic_offset=int(raw["logic_offset"]),
                index_offset=int(raw["index_offset"]),
                physic_timestamp=int(raw.get("physic_timestamp", 0)),
                logic_timestamp=int(raw.get("logic_timestamp", 0)),
                clean_shutdown=bool(raw.get("clean_shutdown", False)),
                queue_offsets=_queue_offsets(raw.get("queue_offsets", {})),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            log.warning("checkpoint %s is malformed (%s); recovering without it", path, exc)
            return None


def _queue_offsets(raw: Any) -> dict[str, dict[str, int]]:
    return {str(t): {str(q): int(n) for q, n in qs.items()} for t, qs in dict(raw).items()}
