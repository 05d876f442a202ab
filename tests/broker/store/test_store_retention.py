"""Retention: expired segments are deleted (never the active one) at the delete
hour, when the disk is too full, or on demand; queues and the index follow.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from broker.store.config import StoreConfig
from broker.store.inner import BatchInner
from broker.store.results import GetMessageStatus, PutMessageStatus
from broker.store.retention import is_delete_hour
from broker.store.store import MessageStore
from connector.errors import ConfigError
from connector.protocol.message import Message
from tests.support.clocks import FakeClock
from tests.support.store import TOPIC, StoreFactory, inner, put, segment_files

SEG = 4096
HOUR = 3600.0


def _local(hour: int, minute: int = 30) -> float:
    """A timestamp at ``hour:minute`` local time (what ``delete_when`` is about)."""
    return time.mktime((2024, 3, 5, hour, minute, 0, 0, 0, -1))


def _fill(store: MessageStore, n: int = 60) -> None:
    for i in range(n):
        put(store, f"m{i:03d}".encode() * 100, queue_id=i % 2, keys=[f"k{i}"])


def _age_all_but_last(store: MessageStore, now: float, age_hours: float = 100) -> int:
    files = segment_files(store.config.commit_log_dir)
    old = now - age_hours * HOUR
    for f in files[:-1]:
        os.utime(f, (old, old))
    return len(files)


def test_manual_clean_deletes_expired_segments(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=SEG, consume_queue_entries_per_file=10)
    _fill(store)
    now = time.time()
    count = _age_all_but_last(store, now)
    assert count >= 8
    last = segment_files(store.config.commit_log_dir)[-1]
    max_before = {q: store.get_max_offset_in_queue(TOPIC, q) for q in (0, 1)}
    cq_files_before = len(list((store.config.consume_queue_dir / TOPIC / "0").iterdir()))

    deleted = store.clean_expired_files(now=now, manual=True)
    assert deleted == count - 1
    assert segment_files(store.config.commit_log_dir) == [last]  # never the last one
    assert store.commit_log.min_offset() == int(last.name)
    cq_files_after = len(list((store.config.consume_queue_dir / TOPIC / "0").iterdir()))
    assert cq_files_after < cq_files_before
    for q in (0, 1):
        lo = store.get_min_offset_in_queue(TOPIC, q)
        assert 0 < lo < max_before[q]
        assert store.get_max_offset_in_queue(TOPIC, q) == max_before[q]
        too_small = store.get_message(TOPIC, q, 0)
        assert too_small.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert too_small.next_begin_offset == lo
        assert too_small.min_offset == lo
        # the new min offset is the first message still in the log
        got = store.get_message(TOPIC, q, lo, max_nums=1000)
        assert got.status is GetMessageStatus.FOUND
        msgs = got.messages()
        assert msgs[0].commit_log_offset >= int(last.name)
        assert [m.queue_offset for m in msgs] == list(range(lo, max_before[q]))
    # index entries of deleted records find nothing; surviving ones still work
    assert store.query_message(TOPIC, "k0") == []
    [survivor] = store.query_message(TOPIC, "k59")
    assert survivor.body == b"m059" * 100
    # a second run has nothing left to delete
    assert store.clean_expired_files(now=now, manual=True) == 0


def test_only_expired_segments_go(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=SEG, file_reserved_time_hours=72)
    _fill(store, 40)
    files = segment_files(store.config.commit_log_dir)
    now = time.time()
    for i, f in enumerate(files[:-1]):
        age = 100 * HOUR if i < 2 else 10 * HOUR  # only the two oldest expired
        os.utime(f, (now - age, now - age))
    assert store.clean_expired_files(now=now, manual=True) == 2
    assert segment_files(store.config.commit_log_dir) == files[2:]


def test_delete_files_batch_max(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=SEG, delete_files_batch_max=3)
    _fill(store)
    now = time.time()
    count = _age_all_but_last(store, now)
    assert store.clean_expired_files(now=now, manual=True) == 3
    assert len(segment_files(store.config.commit_log_dir)) == count - 3


def test_min_offset_after_retention_survives_restart(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=SEG, consume_queue_entries_per_file=10)
    _fill(store)
    now = time.time()
    _age_all_but_last(store, now)
    store.clean_expired_files(now=now, manual=True)
    lo = store.get_min_offset_in_queue(TOPIC, 0)
    below = store.get_message(TOPIC, 0, lo - 1)
    assert below.status is GetMessageStatus.OFFSET_TOO_SMALL
    assert below.next_begin_offset == lo
    # the queue survives a restart with its new min offset
    store.shutdown()
    again = make_store(mapped_file_size_commit_log=SEG, consume_queue_entries_per_file=10)
    assert again.get_min_offset_in_queue(TOPIC, 0) == lo
    assert again.get_message(TOPIC, 0, lo).status is GetMessageStatus.FOUND
    assert again.get_message(TOPIC, 0, 0).status is GetMessageStatus.OFFSET_TOO_SMALL


def test_index_files_below_the_log_go_too(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=SEG, max_hash_slot_num=16, max_index_num=10)
    _fill(store)  # 60 keys, 9 usable entries an index file: 7 files
    index_before = sorted(store.config.index_dir.iterdir())
    assert len(index_before) >= 6
    now = time.time()
    _age_all_but_last(store, now)
    store.clean_expired_files(now=now, manual=True)
    index_after = sorted(store.config.index_dir.iterdir())
    assert 0 < len(index_after) < len(index_before)
    assert index_after == index_before[-len(index_after) :]
    min_phys = store.commit_log.min_offset()
    for i in range(60):
        got = store.query_message(TOPIC, f"k{i}")
        assert all(m.commit_log_offset >= min_phys for m in got)
        assert [m.body for m in got] in ([], [f"m{i:03d}".encode() * 100])
    assert [m.body for m in store.query_message(TOPIC, "k59")] == [b"m059" * 100]


@pytest.mark.parametrize(
    ("delete_when", "hour", "expected"),
    [
        ("04", 4, True),
        ("04", 5, False),
        ("04", 16, False),
        ("04;16", 16, True),
        ("04;16", 4, True),
        ("04;16", 15, False),
        (" 4 ; 23", 23, True),
        ("", 4, False),
        ("x;04", 4, True),
    ],
)
def test_is_delete_hour(delete_when: str, hour: int, expected: bool) -> None:
    assert is_delete_hour(delete_when, _local(hour)) is expected


def test_scheduled_clean_runs_only_at_delete_hour(make_store: StoreFactory) -> None:
    store = make_store(
        mapped_file_size_commit_log=SEG,
        delete_when="04",
        disk_usage=lambda _p: (100, 10, 90),
    )
    _fill(store, 40)
    at_five = _local(5)
    count = _age_all_but_last(store, at_five)
    assert store.clean_expired_files(now=at_five) == 0
    assert len(segment_files(store.config.commit_log_dir)) == count
    at_four = _local(4)
    _age_all_but_last(store, at_four)
    assert store.clean_expired_files(now=at_four) == count - 1


def test_disk_ratio_triggers_clean_outside_delete_hour(make_store: StoreFactory) -> None:
    usage = {"used": 50}
    store = make_store(
        mapped_file_size_commit_log=SEG,
        delete_when="04",
        disk_max_used_space_ratio=75,
        disk_usage=lambda _p: (100, usage["used"], 100 - usage["used"]),
    )
    _fill(store, 40)
    at_noon = _local(12)
    count = _age_all_but_last(store, at_noon)
    assert store.clean_expired_files(now=at_noon) == 0  # 50 % used, not the hour
    usage["used"] = 80
    assert store.clean_expired_files(now=at_noon) == count - 1


def test_disk_ratio_does_not_delete_unexpired_below_forcible_ratio(
    make_store: StoreFactory,
) -> None:
    store = make_store(
        mapped_file_size_commit_log=SEG,
        disk_max_used_space_ratio=75,
        disk_space_clean_forcibly_ratio=85,
        disk_usage=lambda _p: (100, 80, 20),
    )
    _fill(store, 40)
    before = segment_files(store.config.commit_log_dir)
    assert store.clean_expired_files(now=time.time()) == 0  # full-ish, but nothing expired
    assert segment_files(store.config.commit_log_dir) == before


def test_forcible_ratio_deletes_oldest_even_unexpired(make_store: StoreFactory) -> None:
    store = make_store(
        mapped_file_size_commit_log=SEG,
        disk_max_used_space_ratio=75,
        disk_space_clean_forcibly_ratio=85,
        disk_usage=lambda _p: (100, 90, 10),
    )
    _fill(store, 40)
    before = segment_files(store.config.commit_log_dir)
    assert store.clean_expired_files(now=time.time()) == 1
    assert segment_files(store.config.commit_log_dir) == before[1:]
    assert store.get_min_offset_in_queue(TOPIC, 0) > 0


def test_single_segment_is_never_deleted(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=SEG, disk_usage=lambda _p: (100, 88, 12))
    put(store, b"only")
    now = time.time()
    [only] = segment_files(store.config.commit_log_dir)
    os.utime(only, (now - 1000 * HOUR, now - 1000 * HOUR))
    assert store.clean_expired_files(now=now, manual=True) == 0
    assert segment_files(store.config.commit_log_dir) == [only]
    assert store.get_message(TOPIC, 0, 0).bodies() == [b"only"]


def test_offset_by_time_after_retention_starts_at_new_min(make_store: StoreFactory) -> None:
    clock = FakeClock()
    store = make_store(mapped_file_size_commit_log=SEG, clock=clock)
    base = 1_700_000_000_000
    for i in range(60):
        clock.set_ms(base + i * 1000)
        put(store, b"t" * 400)
    now = time.time()
    _age_all_but_last(store, now)
    assert store.clean_expired_files(now=now, manual=True) > 0
    lo = store.get_min_offset_in_queue(TOPIC, 0)
    assert lo > 0
    assert store.get_offset_in_queue_by_time(TOPIC, 0, base) == lo
    assert store.get_offset_in_queue_by_time(TOPIC, 0, base + (lo + 2) * 1000) == lo + 2
    assert store.get_offset_in_queue_by_time(TOPIC, 0, base + 10**9) == 60


def test_a_disk_past_the_warning_ratio_refuses_writes_until_it_drains(
    make_store: StoreFactory,
) -> None:
    usage = {"used": 50}
    store = make_store(
        mapped_file_size_commit_log=SEG,
        disk_space_clean_forcibly_ratio=85,
        disk_space_warning_level_ratio=90,
        disk_usage=lambda _p: (100, usage["used"], 100 - usage["used"]),
    )
    put(store, b"before")
    usage["used"] = 95
    store.clean_expired_files(now=time.time())
    refusals = [
        store.put_message(inner(b"single")),
        store.put_messages(
            BatchInner.from_messages(
                [Message(topic=TOPIC, body=b"a"), Message(topic=TOPIC, body=b"b")],
                queue_id=0,
                born_timestamp=0,
            )
        ),
        *store.put_group_nowait([inner(b"g1"), inner(b"g2", queue_id=1)])[0],
    ]
    for res in refusals:
        assert res.status is PutMessageStatus.SERVICE_NOT_AVAILABLE, res
        assert "disk full: 95.0% used" in (res.message or "")
    assert store.get_message(TOPIC, 0, 0).bodies() == [b"before"]  # reads go on
    usage["used"] = 88  # below the warning ratio, not yet at the forcible one
    store.clean_expired_files(now=time.time())
    assert store.put_message(inner(b"still")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    usage["used"] = 85
    store.clean_expired_files(now=time.time())
    put(store, b"after")
    assert store.get_message(TOPIC, 0, 0, 10).bodies() == [b"before", b"after"]


def test_a_store_started_on_a_full_disk_refuses_writes_at_once(make_store: StoreFactory) -> None:
    store = make_store(disk_usage=lambda _p: (100, 97, 3))
    assert store.put_message(inner(b"x")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


@pytest.mark.parametrize(
    ("field", "value"),
    [("disk_space_warning_level_ratio", 101), ("disk_space_clean_forcibly_ratio", -1)],
)
def test_disk_ratios_are_percentages(tmp_path: Path, field: str, value: int) -> None:
    with pytest.raises(ConfigError, match=field):
        StoreConfig(store_dir=tmp_path, **{field: value})


def test_the_warning_ratio_is_not_below_the_forcible_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="disk_space_warning_level_ratio"):
        StoreConfig(
            store_dir=tmp_path,
            disk_space_warning_level_ratio=80,
            disk_space_clean_forcibly_ratio=85,
        )
