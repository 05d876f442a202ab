"""Flushing: SYNC_FLUSH acknowledges only durable data and shares fsyncs between
waiting writers; FLUSH_DISK_TIMEOUT when a flush does not finish in time;
the ASYNC_FLUSH service catches up on its own.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future

from broker.store.config import FlushDiskType
from broker.store.inner import MessageInner
from broker.store.mapped_file import PAGE_SIZE
from broker.store.results import PutMessageStatus
from connector.protocol.message import Message
from tests.support.store import TOPIC, StoreFactory, inner, put, put_batch, segment_files
from tests.support.waits import wait_until

SYNC = FlushDiskType.SYNC_FLUSH
ASYNC = FlushDiskType.ASYNC_FLUSH


def test_sync_flush_put_is_durable_when_acknowledged(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=SYNC, mapped_file_size_commit_log=4096)
    assert store.commit_log.flushed_offset() == 0
    results = [put(store, f"durable-{i}".encode() * 20) for i in range(60)]
    for res in results:
        assert res.status is PutMessageStatus.PUT_OK
        assert res.append is not None
        # the acknowledgement came after the flush reached the message's end
        assert store.commit_log.flushed_offset() >= res.append.end_offset
    last = results[-1].append
    assert last is not None
    files = segment_files(store.config.commit_log_dir)
    assert len(files) > 1
    with open(files[-1], "rb") as f:
        data = f.read()
    pos = last.wrote_offset - int(files[-1].name)
    assert data[pos : pos + 4] == last.wrote_bytes.to_bytes(4, "big")
    assert b"durable-59" in data[pos : pos + last.wrote_bytes]


def test_sync_flush_batch(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=SYNC, mapped_file_size_commit_log=4096)
    res = put_batch(store, [b"b" * 300] * 40)
    assert res.append is not None
    assert store.commit_log.flushed_offset() >= res.append.end_offset


def test_group_commit_shares_fsyncs(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=SYNC, mapped_file_size_commit_log=65536)
    threads, per_thread = 16, 50
    statuses: list[PutMessageStatus] = []
    ends: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def writer(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            res = store.put_message(inner(f"t{t}-{i}".encode(), queue_id=t % 4))
            with lock:
                statuses.append(res.status)
                if res.append is not None:
                    ends.append(res.append.end_offset)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert not any(w.is_alive() for w in workers)
    total = threads * per_thread
    assert statuses == [PutMessageStatus.PUT_OK] * total
    assert store.commit_log.flushed_offset() >= max(ends)
    group = store._group_commit
    assert group is not None
    assert group.requests_served >= total
    assert 0 < group.groups < group.requests_served
    assert sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(4)) == total


def test_flush_disk_timeout_when_flush_never_completes(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=SYNC, sync_flush_timeout_ms=50)
    result, future = store.put_message_nowait(inner(b"x"))
    assert result.status is PutMessageStatus.PUT_OK
    assert future is not None
    assert store.wait_flush(result, future).status is PutMessageStatus.PUT_OK
    never: Future[bool] = Future()
    timed_out = store.wait_flush(result, never)
    assert timed_out.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert timed_out.ok  # stored, just not known to be durable
    assert timed_out.append == result.append
    failed: Future[bool] = Future()
    failed.set_result(False)  # the flush itself failed
    assert store.wait_flush(result, failed).status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    # ASYNC_FLUSH-style answers (no future) are returned as they are
    assert store.wait_flush(result, None) is result


def test_async_flush_returns_no_future(make_store: StoreFactory) -> None:
    store = make_store(flush_disk_type=ASYNC)
    result, future = store.put_message_nowait(inner(b"x"))
    assert result.status is PutMessageStatus.PUT_OK
    assert future is None


def test_async_flusher_catches_up_when_enough_pages_are_dirty(make_store: StoreFactory) -> None:
    store = make_store(
        flush_disk_type=ASYNC,
        flush_interval_commit_log_ms=20,
        flush_commit_log_least_pages=4,
        flush_commit_log_thorough_interval_ms=3_600_000,
    )
    res = put(store, b"p" * (5 * PAGE_SIZE))  # 5 dirty pages: more than the 4 needed
    assert res.append is not None
    end = res.append.end_offset
    wait_until(
        lambda: store.commit_log.flushed_offset() >= end,
        10.0,
        interval_s=0.005,
        what="the CommitLog flushed to the last append",
    )
    assert store.commit_log.flushed_offset() == store.commit_log.max_offset()


def test_async_thorough_flush_takes_even_one_dirty_page(make_store: StoreFactory) -> None:
    store = make_store(
        flush_disk_type=ASYNC,
        flush_interval_commit_log_ms=20,
        flush_commit_log_least_pages=4,
        flush_commit_log_thorough_interval_ms=100,
    )
    res = put(store, b"small")
    assert res.append is not None
    end = res.append.end_offset
    wait_until(
        lambda: store.commit_log.flushed_offset() >= end,
        10.0,
        interval_s=0.005,
        what="the CommitLog flushed to the last append",
    )


def test_shutdown_flushes_and_writes_clean_checkpoint(make_store: StoreFactory) -> None:
    store = make_store(
        flush_disk_type=ASYNC,
        flush_interval_commit_log_ms=3_600_000,
        flush_commit_log_thorough_interval_ms=3_600_000,
    )
    assert store.config.abort_path.exists()
    res = put(store, b"tail")
    assert res.append is not None
    assert store.commit_log.flushed_offset() < res.append.end_offset  # nothing flushed yet
    store.shutdown()
    assert not store.config.abort_path.exists()
    from broker.store.checkpoint import Checkpoint

    cp = Checkpoint.load(store.config.checkpoint_path)
    assert cp is not None
    assert cp.clean_shutdown
    assert cp.physic_offset == cp.logic_offset == res.append.end_offset
    assert cp.queue_offsets == {TOPIC: {"0": 1}}


def test_asyncio_waiters_share_one_future_per_group(make_store: StoreFactory) -> None:
    import asyncio

    from broker.store.aio import FlushWaiter

    store = make_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    msg = MessageInner.from_message(Message(topic=TOPIC, body=b"a" * 64), queue_id=0,
                                    born_timestamp=1)  # fmt: skip

    async def writer(waiter: FlushWaiter, n: int) -> list[bool]:
        out = []
        for _ in range(n):
            res, flushed = store.put_message_nowait(msg)
            assert res.status is PutMessageStatus.PUT_OK and flushed is not None
            out.append(await waiter.wait(flushed))
        return out

    async def main() -> list[list[bool]]:
        waiter = FlushWaiter()
        results = await asyncio.gather(*(writer(waiter, 20) for _ in range(32)))
        assert waiter._shared == {}  # every group's wrapper was released
        return results

    results = asyncio.run(main())
    assert all(all(r) for r in results)
    gc = store._group_commit
    assert gc is not None and gc.requests_served == 640
    assert gc.groups < gc.requests_served
    assert store.get_max_offset_in_queue(TOPIC, 0) == 640
    assert store.commit_log.flushed_offset() >= store.commit_log.max_offset()
