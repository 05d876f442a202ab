"""Orderly consumers' queue locks (RebalanceLockManager), with a fake clock."""

from __future__ import annotations

from broker.client_manager import ClientManager
from broker.queue_locks import QueueLocks

Q0, Q1 = ("T", "broker-a", 0), ("T", "broker-a", 1)


def test_a_lock_is_one_clients_until_it_expires_or_is_released() -> None:
    now = [1_000]
    locks = QueueLocks(lock_max_live_time_ms=60_000, clock=lambda: now[0])
    assert locks.try_lock("g", "a", [Q0, Q1]) == [Q0, Q1]
    assert locks.try_lock("g", "b", [Q0, Q1]) == []
    assert locks.try_lock("other", "b", [Q0]) == [Q0]  # per group
    now[0] += 59_000
    assert locks.try_lock("g", "a", [Q0]) == [Q0]  # renewed
    now[0] += 2_000
    assert locks.try_lock("g", "b", [Q0, Q1]) == [Q1]  # Q1 expired, Q0 renewed
    locks.unlock("g", "a", [Q0])
    assert locks.holder("g", Q0) is None
    locks.unlock("g", "a", [Q1])  # not a's: nothing happens
    assert locks.holder("g", Q1) == "b"


def test_a_client_leaving_its_group_frees_its_locks() -> None:
    locks = QueueLocks()
    clients = ClientManager()
    clients.on_consumer_dropped = locks.release_client
    clients.consumer_heartbeat("g", "a", "conn-a", {"T": "*"})
    clients.consumer_heartbeat("g", "b", "conn-b", {"T": "*"})
    assert locks.try_lock("g", "a", [Q0, Q1]) == [Q0, Q1]
    assert clients.connection_closed("conn-a") == ["g"]
    assert locks.try_lock("g", "b", [Q0, Q1]) == [Q0, Q1]


def test_the_holders_outlive_a_restart_renewed_as_of_the_restore() -> None:
    now = [1_000]
    changes: list[int] = []
    locks = QueueLocks(lock_max_live_time_ms=60_000, clock=lambda: now[0])
    locks.on_change = lambda: changes.append(1)
    assert locks.try_lock("g", "a", [Q0, Q1]) == [Q0, Q1]
    assert len(changes) == 1
    locks.try_lock("g", "a", [Q0, Q1])  # a renewal: nothing to write
    assert len(changes) == 1
    snap = locks.snapshot()
    assert snap == {"groups": {"g": [["T", "broker-a", 0, "a"], ["T", "broker-a", 1, "a"]]}}

    now[0] += 3_600_000  # restarted an hour later: the holder gets a full lock time
    again = QueueLocks(lock_max_live_time_ms=60_000, clock=lambda: now[0])
    assert again.restore(snap) == 2
    assert again.try_lock("g", "b", [Q0, Q1]) == []
    now[0] += 59_000
    assert again.try_lock("g", "a", [Q0]) == [Q0]
    now[0] += 2_000
    assert again.try_lock("g", "b", [Q0, Q1]) == [Q1]  # Q1 was never renewed
    assert again.restore({"groups": {"g": [["T", "x"], "junk", ["T", "b", "no", "c"]]}}) == 0
    assert again.restore(None) == 0


def test_a_stopping_broker_keeps_its_locks_as_they_are() -> None:
    changes: list[int] = []
    locks = QueueLocks()
    locks.on_change = lambda: changes.append(1)
    locks.try_lock("g", "a", [Q0])
    locks.freeze()
    assert locks.release_client("g", "a") == 0  # its connection closing with the broker
    assert locks.holder("g", Q0) == "a"
    assert locks.try_lock("g", "b", [Q1]) == []
    assert len(changes) == 1
