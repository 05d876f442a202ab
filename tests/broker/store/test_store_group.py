"""Groups of single messages from many writers (``put_group_nowait``, ``GroupAppender``).

A group must leave exactly the bytes the one-at-a-time path leaves (records,
BLANK fillers at segment ends, ConsumeQueue entries, index hits), refuse a bad
message alone, and, through the asyncio appender, answer each writer with its
own result once the group commit made it durable.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.store.aio import THREAD_COOL_DOWN_S, GroupAppender
from broker.store.config import FlushDiskType, StoreConfig
from broker.store.inner import BatchInner, MessageInner
from broker.store.results import PutMessageResult, PutMessageStatus
from broker.store.store import MessageStore
from connector.errors import ConfigError
from connector.protocol.batch import encode_batch
from connector.protocol.message import Message
from connector.protocol.msgid import encode_host
from tests.support.store import BORN_TS, SMALL, TOPIC, StoreFactory, inner, walk_commit_log

SYNC = FlushDiskType.SYNC_FLUSH
OK = PutMessageStatus.PUT_OK


def _store(path: Path, **overrides: Any) -> MessageStore:
    store = MessageStore(
        StoreConfig(store_dir=path, **{**SMALL, **overrides}), clock=lambda: 1_700_000_123.456
    )
    store.start()
    return store


def _log_bytes(store: MessageStore) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store.config.commit_log_dir.iterdir()))


def _message(
    topic: str,
    queue_id: int,
    size: int,
    tags: str | None,
    keys: list[str],
    flag: int,
    sys_flag: int,
    reconsume: int,
    host: str,
) -> MessageInner:
    m = MessageInner.from_message(
        Message(topic=topic, body=b"b" * size, tags=tags, keys=keys, flag=flag),
        queue_id=queue_id,
        born_timestamp=BORN_TS + size,
        born_host=encode_host(host, 40_000 + size),
        uniq_key=f"U{size:05d}{queue_id}",
        sys_flag=sys_flag,
    )
    m.reconsume_times = reconsume  # as a retried message carries it
    return m


messages = st.builds(
    _message,
    topic=st.sampled_from([TOPIC, "Other", "T" * 127]),
    queue_id=st.integers(0, 3),
    size=st.integers(1, 3000),
    tags=st.sampled_from([None, "a", "tag-b", "\u00e9t\u00e9"]),
    keys=st.lists(st.sampled_from(["k1", "k2", "order 7"]), max_size=2),
    flag=st.integers(-(2**31), 2**31 - 1),
    sys_flag=st.sampled_from([0, 1, 4]),
    reconsume=st.integers(0, 16),
    host=st.sampled_from(["127.0.0.1", "10.1.2.3", "255.255.255.254"]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    msgs=st.lists(messages, min_size=1, max_size=60),
    cuts=st.lists(st.integers(1, 20), min_size=1, max_size=10),
)
def test_a_group_writes_the_bytes_the_single_path_writes(
    msgs: list[MessageInner], cuts: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        one = _store(Path(tmp) / "one", mapped_file_size_commit_log=16 * 1024)
        grouped = _store(Path(tmp) / "group", mapped_file_size_commit_log=16 * 1024)
        try:
            expected = [one.put_message(m) for m in msgs]
            got = []
            at, k = 0, 0
            while at < len(msgs):
                size = cuts[k % len(cuts)]
                results, _ = grouped.put_group_nowait(msgs[at : at + size])
                got += results
                at += size
                k += 1
            assert [r.status for r in got] == [OK] * len(msgs)
            assert [r.append for r in got] == [r.append for r in expected]
            assert _log_bytes(grouped) == _log_bytes(one)
            for topic in {m.topic for m in msgs}:
                for q in range(4):
                    a = one.get_message(topic, q, 0, 100)
                    b = grouped.get_message(topic, q, 0, 100)
                    assert (a.status, a.bodies(), b.next_begin_offset) == (
                        b.status,
                        b.bodies(),
                        a.next_begin_offset,
                    )
                for key in ("k1", "k2", "order", "7", f"U{len(msgs[0].body):05d}0"):
                    hits = [m.commit_log_offset for m in grouped.query_message(topic, key)]
                    assert hits == [m.commit_log_offset for m in one.query_message(topic, key)]
            assert grouped.dispatched_offset == one.dispatched_offset
        finally:
            one.shutdown()
            grouped.shutdown()


def test_group_spanning_segments_leaves_blank_fillers(make_store: StoreFactory) -> None:
    store = make_store(mapped_file_size_commit_log=4096)
    group = [inner(bytes([65 + i]) * 700, queue_id=i % 2) for i in range(12)]
    results, _ = store.put_group_nowait(group)
    assert all(r.status is OK for r in results)
    records = walk_commit_log(store.config.commit_log_dir)
    assert sum(r.blank for r in records) >= 2
    assert [r.body for r in records if not r.blank] == [m.body for m in group]
    for q in (0, 1):
        got = store.get_message(TOPIC, q, 0, 20).bodies()
        assert got == [m.body for m in group if m.queue_id == q]
    offsets = [r.append.queue_offset for r in results if r.append is not None]
    assert offsets == [i // 2 for i in range(12)]


def test_a_bad_message_is_refused_alone(make_store: StoreFactory) -> None:
    store = make_store(max_message_size=1000)
    group = [
        inner(b"fine-0"),
        inner(b""),  # empty body
        inner(b"x" * 1001),  # over max_message_size
        MessageInner(topic="bad/topic", queue_id=0, body=b"y"),
        inner(b"fine-1", queue_id=1),
        MessageInner(topic=TOPIC, queue_id=-1, body=b"z"),
        MessageInner(topic=TOPIC, queue_id=0, body=b"p", properties=b"a\x01" + b"v" * 40_000),
        # not name\x01value\x02 pairs: recovery would take the record for a torn one
        MessageInner(topic=TOPIC, queue_id=0, body=b"q", properties=b"KEYS\x01k"),
        inner(b"fine-2"),
    ]
    results, future = store.put_group_nowait(group)
    assert future is None  # ASYNC_FLUSH
    statuses = [r.status for r in results]
    assert statuses == [
        OK,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.MESSAGE_ILLEGAL,
        OK,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
        PutMessageStatus.MESSAGE_ILLEGAL,
        OK,
    ]
    assert all(r.message for r in results if r.status is not OK)
    assert store.get_message(TOPIC, 0, 0, 10).bodies() == [b"fine-0", b"fine-2"]
    assert store.get_message(TOPIC, 1, 0, 10).bodies() == [b"fine-1"]
    assert [r.body for r in walk_commit_log(store.config.commit_log_dir)] == [
        b"fine-0",
        b"fine-1",
        b"fine-2",
    ]


def test_group_on_a_stopped_store_is_refused(make_store: StoreFactory) -> None:
    store = make_store()
    store.shutdown()
    results, future = store.put_group_nowait([inner(b"a"), inner(b"b")])
    assert future is None
    assert {r.status for r in results} == {PutMessageStatus.SERVICE_NOT_AVAILABLE}


def test_arrival_listeners_hear_each_queue_once_per_group(make_store: StoreFactory) -> None:
    store = make_store()
    heard: list[tuple[str, int, int]] = []
    store.arrival_listeners.append(lambda t, q, n: heard.append((t, q, n)))
    store.put_group_nowait([inner(b"a", queue_id=2), inner(b"b"), inner(b"c", queue_id=2)])
    assert heard == [(TOPIC, 2, 2), (TOPIC, 0, 1)]


async def _writers(appender: GroupAppender, count: int, each: int) -> list[list[Any]]:
    async def writer(w: int) -> list[Any]:
        return [await appender.put(inner(f"{w}-{i}".encode(), queue_id=w % 4)) for i in range(each)]

    return await asyncio.gather(*(writer(w) for w in range(count)))


def test_appender_gives_each_writer_its_durable_result(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=SYNC)
    appender = GroupAppender(store)
    per_writer = asyncio.run(asyncio.wait_for(_writers(appender, 16, 25), 60))
    results = [r for rs in per_writer for r in rs]
    assert [r.status for r in results] == [OK] * 400
    assert store.commit_log.flushed_offset() >= max(r.append.end_offset for r in results)
    assert store.messages_grouped == 400
    assert store.groups_appended < 400  # writers shared groups
    # the loop flushed every step itself: one fdatasync a step, none by the thread
    assert store._group_commit is not None and store._group_commit.groups == 0
    assert appender.commits_on_thread == 0
    assert 0 < appender.commits_on_loop <= store.groups_appended
    assert store.group_commit_stats() == (appender.commits_on_loop, 400)
    for q in range(4):
        bodies = store.get_message(TOPIC, q, 0, 200).bodies()
        assert sorted(bodies) == sorted(
            f"{w}-{i}".encode() for w in range(q, 16, 4) for i in range(25)
        )
        offsets = sorted(r.append.queue_offset for rs in per_writer[q::4] for r in rs)
        assert offsets == list(range(100))


def test_the_thread_answers_flush_disk_timeout_when_the_disk_hangs(
    make_store: StoreFactory,
) -> None:
    # group_commit_on_loop_max_ms = 0: every group goes to the group commit thread
    store = make_store(
        flush_disk_type=SYNC, sync_flush_timeout_ms=100, group_commit_on_loop_max_ms=0
    )
    service = store._group_commit
    assert service is not None
    release = threading.Event()
    real_flush = service._flush

    def stuck_disk(least_pages: int) -> int:
        release.wait(30)  # an fsync that does not come back in time
        return real_flush(least_pages)

    service._flush = stuck_disk
    appender = GroupAppender(store)

    async def scenario() -> list[Any]:
        puts = [appender.put(inner(b"m", queue_id=i)) for i in range(3)]
        return list(await asyncio.gather(*puts))

    try:
        results = asyncio.run(asyncio.wait_for(scenario(), 30))
    finally:
        release.set()
    assert [r.status for r in results] == [PutMessageStatus.FLUSH_DISK_TIMEOUT] * 3
    assert all(r.ok and r.append is not None for r in results)  # stored, not known durable
    assert store.get_message(TOPIC, 1, 0, 1).bodies() == [b"m"]
    assert (appender.commits_on_loop, appender.commits_on_thread) == (0, 1)


def test_a_slow_fdatasync_sends_the_groups_to_the_thread_for_a_while(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_store(flush_disk_type=SYNC, sync_flush_timeout_ms=100)
    assert store.config.group_commit_on_loop_max_ms == 10
    now = [1000.0]
    takes = [0.05]  # how long the loop's next fdatasync takes, on the appender's clock
    real_flush = store.commit_log.flush  # the thread keeps the real one

    def timed_flush(least_pages: int = 0) -> int:
        now[0] += takes[0]
        return real_flush(least_pages)

    store.commit_log.flush = timed_flush  # type: ignore[method-assign]
    appender = GroupAppender(store, clock=lambda: now[0])

    async def step() -> list[PutMessageStatus]:
        puts = [appender.put(inner(b"m", queue_id=i)) for i in range(3)]
        return [r.status for r in await asyncio.gather(*puts)]

    async def scenario() -> list[list[PutMessageStatus]]:
        slow = await step()  # 50 ms on the loop: over the limit, inside the timeout
        moved = (appender.commits_on_loop, appender.commits_on_thread)
        on_thread = await step()  # the cool-down: the thread flushes
        now[0] += THREAD_COOL_DOWN_S
        takes[0] = 0.001
        back = await step()  # after it: the loop again
        takes[0] = 0.2
        late = await step()  # slower than sync_flush_timeout_ms: stored, not known durable
        assert moved == (1, 0)
        return [slow, on_thread, back, late]

    with caplog.at_level(logging.WARNING, logger="broker.store.aio"):
        slow, on_thread, back, late = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert slow == on_thread == back == [OK] * 3
    assert late == [PutMessageStatus.FLUSH_DISK_TIMEOUT] * 3
    assert (appender.commits_on_loop, appender.commits_on_thread) == (3, 1)
    assert store._group_commit is not None and store._group_commit.groups == 1
    assert store.group_commit_stats() == (4, 12)
    assert "an fdatasync took 50.0 ms" in caplog.text
    assert store.get_max_offset_in_queue(TOPIC, 0) == 4


def test_a_failed_fdatasync_on_the_loop_answers_flush_disk_timeout(
    make_store: StoreFactory,
) -> None:
    # answered only after the flush: a send must not hear PUT_OK for a flush that failed
    store = make_store(flush_disk_type=SYNC)

    def failing_disk(least_pages: int = 0) -> int:
        raise OSError(errno.EIO, "Input/output error")

    real_flush = store.commit_log.flush
    store.commit_log.flush = failing_disk  # type: ignore[method-assign]
    appender = GroupAppender(store)

    async def scenario() -> list[Any]:
        return list(await asyncio.gather(*(appender.put(inner(b"m")) for _ in range(3))))

    try:
        results = asyncio.run(asyncio.wait_for(scenario(), 30))
    finally:
        store.commit_log.flush = real_flush  # type: ignore[method-assign]
    assert [r.status for r in results] == [PutMessageStatus.FLUSH_DISK_TIMEOUT] * 3
    assert appender.commits_on_loop == 1


def test_a_batch_waits_for_the_flush_of_its_step(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=SYNC)
    appender = GroupAppender(store)
    batch = BatchInner(TOPIC, 1, encode_batch([(b"b1", 0, b""), (b"b2", 0, b"")]), born_timestamp=1)

    async def scenario() -> list[Any]:
        put, flushed = store.put_messages_nowait(batch, request_flush=False)
        assert flushed is None and put.status is OK
        refused = appender.durable(PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL))
        assert refused.done()  # nothing to wait for
        return list(await asyncio.gather(appender.durable(put), appender.put(inner(b"single"))))

    batch_res, single = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert batch_res.status is single.status is OK
    assert appender.commits_on_loop == 1  # one fdatasync for both
    assert store.commit_log.flushed_offset() >= max(
        batch_res.append.end_offset, single.append.end_offset
    )
    assert store.group_commit_stats() == (1, 2)


def test_group_commit_on_loop_max_ms_must_not_be_negative(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="group_commit_on_loop_max_ms"):
        StoreConfig(store_dir=tmp_path, group_commit_on_loop_max_ms=-1)


def test_appender_refusals_come_back_at_once(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=SYNC)
    appender = GroupAppender(store)

    async def scenario() -> list[Any]:
        return list(await asyncio.gather(appender.put(inner(b"")), appender.put(inner(b"ok"))))

    bad, good = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert good.status is OK


@pytest.mark.parametrize("max_group", [1, 3])
def test_appender_drains_at_max_group(make_store: StoreFactory, max_group: int) -> None:
    store = make_store()
    appender = GroupAppender(store, max_group=max_group)
    per_writer = asyncio.run(asyncio.wait_for(_writers(appender, 7, 3), 30))
    assert all(r.status is OK for rs in per_writer for r in rs)
    assert store.messages_grouped == 21
    assert store.groups_appended >= -(-21 // max_group)
