"""Clean restarts: after a shutdown, recovery re-reads nothing, whatever the
messages looked like, and everything is where it was.
"""

from __future__ import annotations

import pytest

from broker.store.results import GetMessageStatus, PutMessageStatus
from tests.support.clocks import FakeClock
from tests.support.store import TOPIC, StoreFactory, inner, put


def _restart_twice(make_store: StoreFactory, **config: object) -> None:
    for _ in range(2):
        again = make_store(**config)
        report = again.recovery
        assert report is not None
        assert not report.abnormal
        assert report.checkpoint_found
        assert report.scanned_bytes == 0, report
        assert report.records_scanned == 0
        assert report.queues_rebuilt == []
        assert report.consume_queue_entries_rebuilt == 0
        assert report.index_entries_rebuilt == 0
        assert again.get_max_offset_in_queue(TOPIC, 0) == 30
        assert again.get_message(TOPIC, 0, 29).bodies() == [b"m29"]
        again.shutdown()


@pytest.mark.parametrize(
    ("keys", "index_enabled"),
    [(True, True), (False, True), (True, False), (False, False)],
    ids=["keys", "no-keys", "keys-index-off", "no-keys-index-off"],
)
def test_clean_restart_scans_nothing(
    make_store: StoreFactory, keys: bool, index_enabled: bool
) -> None:
    config = {"mapped_file_size_commit_log": 4096, "message_index_enable": index_enabled}
    store = make_store(**config)
    for i in range(30):
        put(store, f"m{i}".encode(), keys=[f"k{i}"] if keys else None)
    store.shutdown()
    _restart_twice(make_store, **config)
    if keys and index_enabled:
        last = make_store(**config)
        assert [m.body for m in last.query_message(TOPIC, "k7")] == [b"m7"]


def test_failed_put_leaves_no_queue_to_rebuild(make_store: StoreFactory) -> None:
    config = {"mapped_file_size_commit_log": 4096}
    store = make_store(**config)
    for i in range(30):
        put(store, f"m{i}".encode())
    # refused after the queue was looked up: too large for the record's PROPLEN
    failed = store.put_message(inner(b"x", topic="Fails", properties={"p": "v" * 40_000}))
    assert failed.status is not PutMessageStatus.PUT_OK
    assert not failed.ok
    store.shutdown()
    _restart_twice(make_store, **config)
    again = make_store(**config)
    assert again.get_max_offset_in_queue("Fails", 0) == 0
    assert again.get_message("Fails", 0, 0).status in (
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
        GetMessageStatus.NO_MESSAGE_IN_QUEUE,
    )


def test_restart_after_delete_topic(make_store: StoreFactory) -> None:
    store = make_store()
    for i in range(30):
        put(store, f"m{i}".encode())
        put(store, f"g{i}".encode(), topic="Gone")
    store.delete_topic("Gone")
    store.shutdown()
    again = make_store()
    assert "Gone" not in again.topics()
    assert again.get_message("Gone", 0, 0).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert again.get_max_offset_in_queue(TOPIC, 0) == 30
    # a topic of that name starts over at offset 0
    res = put(again, b"reborn", topic="Gone")
    assert res.append is not None
    assert res.append.queue_offset == 0
    assert again.get_message("Gone", 0, 0).bodies() == [b"reborn"]


def test_store_time_stays_monotonic_across_a_restart(make_store: StoreFactory) -> None:
    clock = FakeClock()
    clock.set_ms(1_700_000_100_000)
    store = make_store(clock=clock)
    put(store, b"before")
    store.shutdown()
    clock.set_ms(1_700_000_000_000)  # the wall clock went back 100 s while the broker was down
    again = make_store(clock=clock)
    put(again, b"after")
    got = again.get_message(TOPIC, 0, 0, 10).messages()
    assert [m.body for m in got] == [b"before", b"after"]
    assert got[1].store_timestamp >= got[0].store_timestamp == 1_700_000_100_000
    # the timestamp search relies on that order
    assert again.get_offset_in_queue_by_time(TOPIC, 0, 1_700_000_100_000) == 0
