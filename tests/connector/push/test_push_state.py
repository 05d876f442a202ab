"""A push consumer's pure state: the process queue's offsets to commit, the local
offset file of broadcasting consumers, and the adaptive pull page."""

from __future__ import annotations

from pathlib import Path

from connector.client.push.offset_store import LocalFileOffsetStore
from connector.client.push.process_queue import ProcessQueue
from connector.client.push.settings import PULL_BATCH_MAX, PULL_BATCH_MIN, PushSettings
from connector.protocol.message import MessageExt, MessageQueue

MQ = MessageQueue("T", "broker-a", 0)


def msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt("T", b"x" * 10, 0, o, 0, {}) for o in offsets]


def test_the_offset_to_commit_is_the_smallest_still_pending() -> None:
    pq = ProcessQueue()
    batch = msgs(5, 6, 7, 8)
    pq.put(batch)
    pq.advance(9)
    assert (pq.count, pq.bytes) == (4, 40)
    assert pq.remove(batch[2:3]) == 5  # 7 done, 5 and 6 not: commit stays at 5
    assert pq.remove(batch[:2]) == 8
    assert pq.remove(batch[3:]) == 9
    pq.advance(12)  # a pull found only other tags up to 12
    assert pq.remove([]) == 12 and pq.is_empty()


def test_bulk_offsets_and_a_pull_from_below_what_is_held() -> None:
    pq = ProcessQueue()
    first, second = msgs(10, 11, 12), msgs(13, 14)
    pq.put(first, [10, 11, 12])
    pq.put(second, [13, 14])
    pq.advance(15)
    assert (pq.count, pq.bytes, pq.max_offset) == (5, 50, 14)
    again = msgs(12, 13, 14, 15)  # re-pulled from 12 (an offset reset): 15 alone is new
    pq.put(again)
    pq.advance(16)
    assert (pq.count, pq.max_offset) == (6, 15)
    pq.started.update(dict.fromkeys([10, 11], 1.0))
    assert pq.remove(first[:2], [10, 11]) == 12 and not pq.started
    assert pq.remove(first[:2], [10, 11]) == 12  # removed twice: nothing changes
    assert (pq.count, pq.bytes) == (4, 40)
    assert pq.remove([*first[2:], *second, again[3]]) == 16 and pq.is_empty()


def test_a_run_consumed_from_the_front_and_one_around_a_message_still_held() -> None:
    """A consumed run at the front of what is held leaves it in one step; a run that is
    not exactly the front (a message inside it is still held) never moves the offset
    to commit past that message."""
    pq = ProcessQueue()
    page = msgs(*range(100, 110))
    pq.put(page, list(range(100, 110)))
    pq.advance(110)
    assert pq.remove(page[:4], [100, 101, 102, 103]) == 104
    assert list(pq._order) == [104, 105, 106, 107, 108, 109]
    assert pq.remove(page[6:7], [106]) == 104  # 106 done out of order
    pq.put(msgs(99), [99])  # an offset reset: the order is rebuilt from what is held
    assert pq.remove(msgs(99), [99]) == 104
    # 104, 106 and 107 done (106 again): the run spans the order's first three
    # entries, 104, 105 and 107, but 105 is still held
    assert pq.remove([page[4], page[6], page[7]], [104, 106, 107]) == 105
    assert pq.remove([page[5], *page[8:]], [105, 108, 109]) == 110 and pq.is_empty()


def test_orderly_batches_commit_or_come_back_in_order() -> None:
    pq = ProcessQueue()
    pq.put(msgs(0, 1, 2, 3))
    pq.advance(4)
    first = pq.take(2)
    assert [m.queue_offset for m in first] == [0, 1]
    assert pq.commit() == 2
    again = pq.take(2)
    back = pq.put_back()
    assert back == again and [m.reconsume_times for m in back] == [1, 1]
    assert [m.queue_offset for m in pq.take(1)] == [2]  # the same one first
    assert pq.commit() == 3
    assert pq.take(5) and pq.commit() == 4


def test_the_offset_file_survives_a_restart_and_is_replaced_whole(tmp_path: Path) -> None:
    path = tmp_path / "c@1" / "g" / "offsets.json"
    store = LocalFileOffsetStore(path)
    assert store.read(MQ) == -1
    store.update(MQ, 42)
    store.persist([MQ])
    assert not list(path.parent.glob("*.tmp"))
    assert LocalFileOffsetStore(path).read(MQ) == 42
    path.write_text("{not json")  # a file torn by something else: start without it
    assert LocalFileOffsetStore(path).read(MQ) == -1


def test_the_adaptive_pull_page_grows_on_a_backlog_and_falls_back_when_caught_up() -> None:
    s = PushSettings()
    assert s.pull_batch_size is None and s.pull_batch(None, False) == PULL_BATCH_MIN == 32
    pages = [s.pull_batch(None, True)]
    for _ in range(5):  # every answer left more behind it
        pages.append(s.pull_batch(pages[-1], True))
    assert pages == [32, 128, 512, PULL_BATCH_MAX, PULL_BATCH_MAX, PULL_BATCH_MAX]
    assert PULL_BATCH_MAX == 1000
    assert s.pull_batch(PULL_BATCH_MAX, False) == 32  # caught up: RocketMQ's page again
    assert s.pull_batch_text() == "auto (32-1000)"
    # never more than a queue may hold before its pulls pause
    small = PushSettings(pull_threshold_for_queue=200)
    assert small.pull_batch(128, True) == 200 and small.pull_batch_text() == "auto (32-200)"
    assert PushSettings(pull_threshold_for_queue=10).pull_batch(32, True) == 32
    # set: every pull asks for it, backlog or not
    fixed = PushSettings(pull_batch_size=7)
    assert [fixed.pull_batch(a, m) for a, m in ((None, True), (7, True), (7, False))] == [7] * 3
    assert fixed.pull_batch_text() == "7"
