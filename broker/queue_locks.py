"""Queue locks of orderly consumers (RocketMQ's RebalanceLockManager), as pure state.

An orderly push consumer consumes a queue only while it holds the queue's
lock for its group on the queue's broker (LOCK_BATCH_MQ). A lock is held by
one client id per (group, topic, broker name, queue id); it lasts
``lock_max_live_time_ms`` (60 s) after its last renewal (clients renew every
20 s), and its holder may renew it or release it (UNLOCK_BATCH_MQ).

Unlike RocketMQ, a client's locks are also released at once when it leaves
the group (unregistered, its connection closed, or expired): the next owner
of an orderly queue then need not wait out the 60 s after a member's crash
(its connection closes with the process) before consuming it, in order, from
the committed offset. Time comes from an injectable clock in ms.

The holders survive a broker restart (``snapshot`` / ``restore``; the
controller writes the table to ``config/queue_locks.json`` whenever a lock
changes hands, not on renewals): a restarted broker gives each lock it had a
full ``lock_max_live_time_ms`` for its holder to come back and renew, so
another member that reaches the new broker first (and, seeing no other
member yet, takes every queue) cannot lock a queue its old holder is still
consuming from what it pulled. RocketMQ's broker forgets its locks on
restart, which lets two members consume one orderly queue at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["LOCK_MAX_LIVE_TIME_MS", "QueueKey", "QueueLocks"]

LOCK_MAX_LIVE_TIME_MS = 60_000
QueueKey = tuple[str, str, int]  # topic, broker name, queue id


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


def _wall_ms() -> int:
    return int(time.time() * 1000)


class QueueLocks:
    def __init__(
        self,
        *,
        lock_max_live_time_ms: int = LOCK_MAX_LIVE_TIME_MS,
        clock: Callable[[], int] = _wall_ms,
    ) -> None:
        self.lock_max_live_time_ms = lock_max_live_time_ms
        self.clock = clock
        self._locks: dict[str, dict[QueueKey, _Lock]] = {}  # group -> queue -> lock
        # told when a lock changes hands (granted to another client, released): what
        # must outlive a restart (a renewal changes only a time)
        self.on_change: Callable[[], None] = lambda: None
        self._frozen = False

    def _live(self, lock: _Lock, now: int) -> bool:
        return now - lock.last_update_ms <= self.lock_max_live_time_ms

    def try_lock(self, group: str, client_id: str, queues: Iterable[QueueKey]) -> list[QueueKey]:
        """Lock (or renew) every queue free or already ``client_id``'s; the queues it
        holds now, in the order asked."""
        if self._frozen:
            return []
        now = self.clock()
        table = self._locks.setdefault(group, {})
        held = []
        changed = False
        for q in queues:
            lock = table.get(q)
            if lock is None or lock.client_id == client_id or not self._live(lock, now):
                changed = changed or lock is None or lock.client_id != client_id
                table[q] = _Lock(client_id, now)
                held.append(q)
        if changed:
            self.on_change()
        return held

    def unlock(self, group: str, client_id: str, queues: Iterable[QueueKey]) -> None:
        if self._frozen:
            return
        table = self._locks.get(group, {})
        changed = False
        for q in queues:
            lock = table.get(q)
            if lock is not None and lock.client_id == client_id:
                del table[q]
                changed = True
        if not table:
            self._locks.pop(group, None)
        if changed:
            self.on_change()

    def freeze(self) -> None:
        """The broker is stopping: from now on nothing changes (its connections closing
        are not its clients leaving), and nothing is written."""
        self._frozen = True

    def release_client(self, group: str, client_id: str) -> int:
        """Every lock of ``client_id`` in ``group`` released; how many."""
        if self._frozen:
            return 0
        table = self._locks.get(group, {})
        gone = [q for q, lock in table.items() if lock.client_id == client_id]
        self.unlock(group, client_id, gone)
        return len(gone)

    def holder(self, group: str, queue: QueueKey) -> str | None:
        """Who holds the queue's live lock, or None."""
        lock = self._locks.get(group, {}).get(queue)
        if lock is None or not self._live(lock, self.clock()):
            return None
        return lock.client_id

    def snapshot(self) -> dict[str, Any]:
        """The live locks' holders, as JSON: ``{"groups": {group: [[topic, broker name,
        queue id, client id], ...]}}``."""
        now = self.clock()
        return {
            "groups": {
                group: [[*q, lock.client_id] for q, lock in sorted(table.items())
                        if self._live(lock, now)]
                for group, table in sorted(self._locks.items())
            }
        }  # fmt: skip

    def restore(self, snapshot: Any) -> int:
        """Take the holders of ``snapshot`` (what a broker had before its restart), each
        as renewed now; entries that do not parse are skipped. How many were taken."""
        now = self.clock()
        groups = snapshot.get("groups") if isinstance(snapshot, dict) else None
        taken = 0
        for group, entries in (groups or {}).items():
            for entry in entries if isinstance(entries, list) else []:
                try:
                    topic, broker, queue_id, client_id = entry
                    key = (str(topic), str(broker), int(queue_id))
                except (TypeError, ValueError):
                    continue
                self._locks.setdefault(str(group), {})[key] = _Lock(str(client_id), now)
                taken += 1
        return taken
