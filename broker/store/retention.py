"""Retention: delete CommitLog segments older than ``file_reserved_time_hours``.

Runs at the ``delete_when`` hour(s) (``"04"`` or ``"04;16"``), at once when the
disk holding the store passes ``disk_max_used_space_ratio`` percent, or when
asked (``manual``). Past ``disk_space_clean_forcibly_ratio`` the oldest
segment goes even if it has not expired. The active (last) segment is never
deleted. Queues and index then move their min offsets up past what is gone.

Each run also tells the store how full its disk is: past
``disk_space_warning_level_ratio`` the store refuses writes (SERVICE_NOT_AVAILABLE,
"disk full") until use falls back to ``disk_space_clean_forcibly_ratio``, as
RocketMQ does, so a filling disk stops writes before a write into the mapped,
sparse segments could hit a full filesystem.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.store.store import MessageStore

__all__ = ["clean_expired_files", "disk_used_percent", "is_delete_hour"]

log = logging.getLogger(__name__)


def is_delete_hour(delete_when: str, now: float) -> bool:
    hour = time.localtime(now).tm_hour
    return any(part.strip().isdigit() and int(part) == hour for part in delete_when.split(";"))


def disk_used_percent(store: MessageStore) -> float:
    total, used, _free = store.disk_usage(store.config.store_dir)
    return 100.0 * used / total if total else 0.0


def clean_expired_files(store: MessageStore, *, now: float, manual: bool = False) -> int:
    cfg = store.config
    used = disk_used_percent(store)
    store.note_disk_used(used)
    space_full = used > cfg.disk_max_used_space_ratio
    forcibly = used > cfg.disk_space_clean_forcibly_ratio
    if not (manual or space_full or is_delete_hour(cfg.delete_when, now)):
        return 0
    segments = store.commit_log.queue
    count = segments.expired_before(now, cfg.file_reserved_time_hours * 3600)
    if forcibly and count == 0 and len(segments.files) > 1:
        count = 1
        log.warning("disk %.1f%% full: deleting the oldest segment before it expires", used)
    count = min(count, cfg.delete_files_batch_max)
    if count <= 0:
        return 0
    gone = segments.delete_first(count)
    min_offset = store.commit_log.min_offset()
    for f in gone:
        log.info("retention deleted segment %s", f.path.name)
    for queues in list(store.queues.values()):
        for cq in list(queues.values()):
            cq.delete_expired(min_offset)
    store.index.delete_below(min_offset)
    return len(gone)
