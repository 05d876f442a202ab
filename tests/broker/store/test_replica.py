"""A slave's store: replicated bytes appended as they are, dispatched up to the confirm
offset, truncated crash-safely."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.store.config import StoreConfig
from broker.store.epochs import EpochEntry, EpochFile
from broker.store.files import save_json
from broker.store.replica import ReplicaLog
from broker.store.results import GetMessageStatus
from broker.store.store import MessageStore
from connector.errors import StoreError
from tests.support.store import SMALL, TOPIC, put, put_batch


def log_bytes(store: MessageStore, start: int = 0) -> bytes:
    """The whole CommitLog from ``start``, segment by segment (as the HA master sends it)."""
    out = bytearray()
    log_ = store.commit_log
    at, end, seg = start, log_.max_offset(), log_.segment_size
    while at < end:
        n = min(end - at, seg - at % seg)
        data = log_.read(at, n)
        assert data is not None
        out += data
        at += n
    return bytes(out)


def fill_master(store: MessageStore, n: int) -> None:
    for i in range(n):
        put(store, f"single-{i}".encode() * 20, queue_id=i % 3, keys=[f"k{i}"])
    put_batch(store, [f"batch-{i}".encode() * 30 for i in range(50)], queue_id=1)


def replicate(master: MessageStore, replica: ReplicaLog, n: int) -> bytes:
    """``n`` messages (and a batch) on the master, copied whole to the replica, readable."""
    fill_master(master, n)
    data = log_bytes(master)
    replica.append(0, data)
    replica.dispatch_to(len(data))
    return data


@pytest.fixture
def pair(tmp_path: Path) -> tuple[MessageStore, MessageStore, ReplicaLog]:
    master = MessageStore(StoreConfig(store_dir=tmp_path / "m", **SMALL))
    slave = MessageStore(StoreConfig(store_dir=tmp_path / "s", **SMALL))
    master.start()
    slave.start()
    yield master, slave, ReplicaLog(slave, EpochFile(tmp_path / "s" / "epochs.json"))
    for s in (master, slave):
        if s.running:
            s.shutdown()


def assert_same_reads(master: MessageStore, slave: MessageStore, key: str) -> None:
    """The slave reads as the master: each queue's offsets and records, and ``key``'s
    index lookup."""
    for qid in range(3):
        mine = master.get_message(TOPIC, qid, 0, 10_000)
        theirs = slave.get_message(TOPIC, qid, 0, 10_000)
        assert theirs.queue_offsets == mine.queue_offsets
        assert b"".join(r.data for r in theirs.runs) == b"".join(r.data for r in mine.runs)
    assert [m.body for m in slave.query_message(TOPIC, key)] == [
        m.body for m in master.query_message(TOPIC, key)
    ]


def physical_offset(store: MessageStore, queue_id: int, offset: int) -> int:
    """PHYSICALOFFSET of a queue's message (bytes 28-36 of its record)."""
    got = store.get_message(TOPIC, queue_id, offset, 1)
    assert got.status is GetMessageStatus.FOUND, got
    return int.from_bytes(got.runs[0].data[28:36], "big")


def test_replicated_bytes_are_the_masters_and_reads_stop_at_the_confirm_offset(
    pair: tuple[MessageStore, MessageStore, ReplicaLog],
) -> None:
    master, slave, replica = pair
    fill_master(master, 400)  # crosses several 64 KiB segments (BLANKs included)
    data = log_bytes(master)
    half = len(data) // 2
    # in frames of odd sizes, as a slow socket would cut them
    at = 0
    assert half > 40_000
    for size in (1, 4095, 30_000, half - 34_096):
        replica.append(at, data[at : at + size])
        at += size
    confirm = master.commit_log.max_offset() // 3
    replica.dispatch_to(confirm)
    assert 0 < slave.dispatched_offset <= confirm
    for qid in range(3):
        n = slave.get_max_offset_in_queue(TOPIC, qid)
        assert n > 0
        # the last readable record ends at or below the confirm offset; the next does not
        last = physical_offset(slave, qid, n - 1)
        assert last < confirm
        assert physical_offset(master, qid, n) >= slave.dispatched_offset
    # the bytes so far end inside a record: what is whole is dispatched, the rest waits
    replica.dispatch_to(at)
    assert at - 2000 < slave.dispatched_offset <= at
    with pytest.raises(StoreError, match="log ends at"):
        replica.append(at + 1, data[at + 1 :])
    replica.append(at, data[at:])
    touched = replica.dispatch_to(master.commit_log.max_offset())
    assert touched  # queues that gained entries, for long polls to wake
    assert log_bytes(slave) == data
    assert_same_reads(master, slave, "k7")


def test_a_slave_restarted_after_replication_recovers_the_same_log(
    tmp_path: Path, pair: tuple[MessageStore, MessageStore, ReplicaLog]
) -> None:
    master, slave, replica = pair
    data = replicate(master, replica, 200)
    slave.close()  # a crash: no clean shutdown
    again = MessageStore(StoreConfig(store_dir=tmp_path / "s", **SMALL))
    again.start()
    try:
        assert again.commit_log.max_offset() == len(data)
        for qid in range(3):
            assert again.get_max_offset_in_queue(TOPIC, qid) == master.get_max_offset_in_queue(
                TOPIC, qid
            )
    finally:
        again.shutdown()


def test_truncation_cuts_log_queues_and_epochs(
    pair: tuple[MessageStore, MessageStore, ReplicaLog],
) -> None:
    master, slave, replica = pair
    data = replicate(master, replica, 300)
    point = physical_offset(slave, 0, 40)
    epochs = [EpochEntry(1, 0), EpochEntry(3, point)]
    replica.truncate_to(point, epochs, why="test")
    assert slave.commit_log.max_offset() == point
    assert slave.get_max_offset_in_queue(TOPIC, 0) == 40
    assert not replica.marker.exists()
    assert EpochFile(replica.epochs.path).load() == epochs
    # the stream goes on from the cut with the master's bytes
    replica.append(point, data[point:])
    replica.dispatch_to(len(data))
    assert log_bytes(slave) == data
    assert slave.get_max_offset_in_queue(TOPIC, 0) == master.get_max_offset_in_queue(TOPIC, 0)


def test_an_interrupted_truncation_finishes_on_the_next_start(
    tmp_path: Path, pair: tuple[MessageStore, MessageStore, ReplicaLog]
) -> None:
    master, slave, replica = pair
    data = replicate(master, replica, 300)
    cut = physical_offset(master, 2, 10)
    # the marker is written first; a kill -9 right after it leaves the log whole
    save_json(replica.marker, {"offset": cut, "epochs": [[1, 0], [2, cut]]})
    slave.close()
    again = MessageStore(StoreConfig(store_dir=tmp_path / "s", **SMALL))
    again.start()
    try:
        assert again.commit_log.max_offset() == len(data)  # recovery alone keeps it all
        rep = ReplicaLog(again, EpochFile(tmp_path / "s" / "epochs.json"))
        assert rep.finish_truncation()
        assert again.commit_log.max_offset() == cut
        assert again.get_max_offset_in_queue(TOPIC, 2) == 10
        assert not rep.marker.exists()
        assert rep.epochs.entries == [EpochEntry(1, 0), EpochEntry(2, cut)]
        assert not rep.finish_truncation()  # nothing left to do
    finally:
        again.shutdown()
    # and the truncated log survives a further restart as it is
    third = MessageStore(StoreConfig(store_dir=tmp_path / "s", **SMALL))
    third.start()
    try:
        assert third.commit_log.max_offset() == cut
    finally:
        third.shutdown()


def test_a_damaged_truncation_marker_stops_the_start(
    pair: tuple[MessageStore, MessageStore, ReplicaLog],
) -> None:
    _, _, replica = pair
    replica.marker.write_text("{not json")
    with pytest.raises(StoreError, match="cannot tell where to truncate"):
        replica.finish_truncation()


def test_a_log_with_nothing_in_common_starts_over_where_the_masters_begins(
    pair: tuple[MessageStore, MessageStore, ReplicaLog],
) -> None:
    master, slave, replica = pair
    put(slave, b"written when this store was a master of another history", queue_id=0)
    seg = master.commit_log.segment_size
    replica.truncate_to(2 * seg, [EpochEntry(5, 0)], why="test")  # past the slave's end
    assert slave.commit_log.queue.files == []
    assert slave.get_max_offset_in_queue(TOPIC, 0) == 0
    fill_master(master, 400)
    data = log_bytes(master)
    assert len(data) > 2 * seg
    replica.append(2 * seg, data[2 * seg :])
    replica.dispatch_to(len(data))
    assert log_bytes(slave, 2 * seg) == data[2 * seg :]


def test_a_read_limit_hides_the_records_past_it(
    pair: tuple[MessageStore, MessageStore, ReplicaLog],
) -> None:
    """A SYNC_MASTER's readers see what its in-sync slaves confirmed (``read_limit``)."""
    master, _, _ = pair
    fill_master(master, 120)
    everything = master.get_max_offset_in_queue(TOPIC, 0)
    limit = physical_offset(master, 0, 25)  # queue 0's 26th record starts here
    master.read_limit = limit + 1  # ... and ends past the limit: not readable
    assert master.get_max_offset_in_queue(TOPIC, 0) == 25
    got = master.get_message(TOPIC, 0, 20, 100)
    assert got.queue_offsets == list(range(20, 25))
    assert master.get_message(TOPIC, 0, 25, 1).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    master.read_limit = master.commit_log.max_offset()
    assert master.get_max_offset_in_queue(TOPIC, 0) == everything
    master.read_limit = None
    assert master.get_max_offset_in_queue(TOPIC, 0) == everything


def test_a_replica_store_flushes_its_log_by_itself_even_with_sync_flush(tmp_path: Path) -> None:
    """No append of a slave's own asks for a flush: its log is flushed periodically."""
    cfg = StoreConfig(
        store_dir=tmp_path / "r", flush_disk_type="SYNC_FLUSH", flush_interval_commit_log_ms=20,
        flush_commit_log_least_pages=0, **SMALL,
    )  # fmt: skip
    store = MessageStore(cfg)
    store.start(replica=True)
    try:
        replica = ReplicaLog(store, EpochFile(tmp_path / "r" / "epochs.json"))
        replica.append(0, b"\x00" * 5000)  # bytes as replicated (not records: not dispatched)
        deadline = time.monotonic() + 10
        while store.commit_log.flushed_offset() < 5000:
            assert time.monotonic() < deadline, "the replica's log was never flushed"
            time.sleep(0.02)
    finally:
        store.shutdown()


@pytest.mark.parametrize("crash", [True, False], ids=["kill", "clean-stop"])
def test_a_restarted_slave_serves_only_what_was_confirmed_before(
    tmp_path: Path, pair: tuple[MessageStore, MessageStore, ReplicaLog], crash: bool
) -> None:
    """The unconfirmed tail stays in the log (the master goes on from its end) but is not
    readable until the master confirms it: a diverged tail is truncated before anyone
    saw it."""
    master, slave, replica = pair
    fill_master(master, 300)
    data = log_bytes(master)
    replica.append(0, data)
    confirm = physical_offset(master, 0, 40)  # queue 0's 41st record starts here
    replica.dispatch_to(confirm)
    seen = {qid: slave.get_max_offset_in_queue(TOPIC, qid) for qid in range(3)}
    assert seen[0] == 40
    if crash:
        slave.close()
    else:
        slave.shutdown()
    again = MessageStore(StoreConfig(store_dir=tmp_path / "s", **SMALL))
    again.start(replica=True)
    try:
        assert again.commit_log.max_offset() == len(data)  # the tail is kept
        assert again.dispatched_offset == slave.dispatched_offset
        assert {qid: again.get_max_offset_in_queue(TOPIC, qid) for qid in range(3)} == seen
        assert again.query_message(TOPIC, "k299") == []  # not indexed either
        ReplicaLog(again, EpochFile(tmp_path / "s" / "epochs.json")).dispatch_to(len(data))
        for qid in range(3):
            assert again.get_max_offset_in_queue(TOPIC, qid) == master.get_max_offset_in_queue(
                TOPIC, qid
            )
        assert [m.body for m in again.query_message(TOPIC, "k299")] == [
            m.body for m in master.query_message(TOPIC, "k299")
        ]
    finally:
        again.shutdown()


def test_a_read_limit_hides_keyed_lookups_past_it(
    pair: tuple[MessageStore, MessageStore, ReplicaLog],
) -> None:
    master, _, _ = pair
    fill_master(master, 50)
    master.read_limit = physical_offset(master, 0, 10)  # queue 0's 11th record: k30
    assert master.query_message(TOPIC, "k29") != []
    assert master.query_message(TOPIC, "k30") == []
    master.read_limit = None
    assert master.query_message(TOPIC, "k30") != []


def test_a_dispatch_in_slices_reads_as_one_and_refuses_bytes_that_are_not_records(
    pair: tuple[MessageStore, MessageStore, ReplicaLog],
) -> None:
    """A slave dispatches a backlog a slice at a time (its event loop reads and
    acknowledges between slices): the queues and index come out as the master's, and
    bytes past the records that cannot be one are refused once no slice goes on."""
    master, slave, replica = pair
    fill_master(master, 300)  # several segments, BLANKs at their ends included
    data = log_bytes(master)
    replica.append(0, data)
    slices = 0
    while replica.pending(len(data)):
        before = slave.dispatched_offset
        replica.dispatch_to(len(data), max_records=7)
        assert slave.dispatched_offset > before  # each slice goes on
        slices += 1
    assert slices >= 350 // 7 and slave.dispatched_offset == len(data)
    assert_same_reads(master, slave, "k77")
    # a few bytes that are not a record yet may be the start of one: they wait
    replica.append(len(data), b"\xff" * 1000)
    assert replica.dispatch_to(len(data) + 1000, max_records=7) == {}
    assert slave.dispatched_offset == len(data)
    # more than any record could be: refused
    junk = slave.config.max_message_size + (70 << 10)
    replica.append(len(data) + 1000, b"\xff" * junk)
    with pytest.raises(StoreError, match="not a record"):
        replica.dispatch_to(len(data) + 1000 + junk, max_records=7)
    assert slave.dispatched_offset == len(data)


def test_a_dispatch_over_entries_already_there_keeps_them_and_mends_a_wrong_one(
    pair: tuple[MessageStore, MessageStore, ReplicaLog],
) -> None:
    """The compiled dispatch appends at each queue's end; records whose entries are there
    already (the dispatch point behind the queues) go the checked way: entries that agree
    are kept, one that disagrees is rewritten, the queues read as the master's."""
    master, slave, replica = pair
    data = replicate(master, replica, 120)
    cq = slave.consume_queue(TOPIC, 2)
    assert cq is not None
    good = cq.get_entries(5, 1).copy()
    cq.put(5, int(good["offset"][0]) + 1, int(good["size"][0]), 0)  # a wrong entry
    slave.dispatched_offset = 0
    replica.dispatch_to(len(data))
    assert slave.dispatched_offset == len(data)
    assert cq.get_entries(5, 1).tobytes() == good.tobytes()
    assert_same_reads(master, slave, "k11")
    fill_master(master, 30)  # and the common way goes on after it
    more = log_bytes(master, len(data))
    replica.append(len(data), more)
    replica.dispatch_to(len(data) + len(more))
    assert_same_reads(master, slave, "k11")
