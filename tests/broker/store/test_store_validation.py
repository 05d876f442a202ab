"""What the store refuses before writing a byte: bad topic names (which must
never become paths), empty or oversized bodies, oversized properties, and any
write while the store is not running.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.store.inner import BatchInner, MessageInner
from broker.store.results import GetMessageStatus, PutMessageStatus
from broker.store.store import MessageStore
from connector.errors import InvalidTopicError
from connector.protocol.message import Message
from tests.support.store import BORN_TS, TOPIC, StoreFactory, inner, put, segment_files

BAD_TOPICS = ["../x", "a/b", "a" * 128, "..", ".", "a b", "a\\b", "ключ", "x\x00y", ""]


def _nothing_written(store: MessageStore, tmp_path: Path) -> None:
    assert store.commit_log.max_offset() == 0
    assert list(store.config.consume_queue_dir.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    assert not (tmp_path / "x").exists()
    assert not (store.config.store_dir / "x").exists()
    assert not (store.config.consume_queue_dir.parent / "x").exists()


def _raw_inner(topic: str, body: bytes = b"body", queue_id: int = 0) -> MessageInner:
    # built directly: Message/from_message would not stop a bad topic either
    return MessageInner(topic=topic, queue_id=queue_id, body=body, born_timestamp=BORN_TS)


@pytest.mark.parametrize("topic", BAD_TOPICS)
def test_illegal_topic_is_refused_and_makes_no_path(
    make_store: StoreFactory, tmp_path: Path, topic: str
) -> None:
    store = make_store()
    result = store.put_message(_raw_inner(topic))
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert not result.ok
    assert result.append is None
    _nothing_written(store, tmp_path)
    assert store.topics() == []


@pytest.mark.parametrize("topic", ["../x", "a/b", "a" * 128])
def test_illegal_topic_batch_is_refused(
    make_store: StoreFactory, tmp_path: Path, topic: str
) -> None:
    store = make_store()
    msgs = [Message(topic=topic, body=b"a"), Message(topic=topic, body=b"b")]
    batch = BatchInner.from_messages(msgs, queue_id=0, born_timestamp=BORN_TS)
    result = store.put_messages(batch)
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
    _nothing_written(store, tmp_path)


def test_reads_of_illegal_topics_touch_nothing(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store()
    got = store.get_message("../x", 0, 0)
    assert got.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    assert store.get_max_offset_in_queue("../x", 0) == 0
    assert store.get_offset_in_queue_by_time("../x", 0, 0) == 0
    assert store.query_message("../x", "k") == []
    with pytest.raises(InvalidTopicError):
        store.delete_topic("../x")
    _nothing_written(store, tmp_path)


def test_longest_legal_topic(make_store: StoreFactory) -> None:
    store = make_store()
    topic = "%|_-aZ09" + "t" * 119
    assert len(topic) == 127
    put(store, b"ok", topic=topic)
    assert (store.config.consume_queue_dir / topic / "0").is_dir()
    [msg] = store.get_message(topic, 0, 0).messages()
    assert msg.topic == topic


def test_negative_queue_id(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store()
    assert store.put_message(_raw_inner(TOPIC, queue_id=-1)).status is (
        PutMessageStatus.MESSAGE_ILLEGAL
    )
    _nothing_written(store, tmp_path)


def test_empty_body(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store()
    assert store.put_message(inner(b"")).status is PutMessageStatus.MESSAGE_ILLEGAL
    _nothing_written(store, tmp_path)


def test_body_size_limit(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store(max_message_size=1024)
    over = store.put_message(inner(b"x" * 1025))
    assert over.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert over.append is None
    _nothing_written(store, tmp_path)
    put(store, b"x" * 1024)  # exactly the limit is fine


@pytest.mark.parametrize("props", [b"KEYS\x01k", b"KEYS\x01k\x02\x00", b"\x01v\x02", b"K\x02"])
def test_properties_that_are_not_pairs(
    make_store: StoreFactory, tmp_path: Path, props: bytes
) -> None:
    """Recovery tells a torn record by its properties, so none may be stored malformed."""
    store = make_store()
    msg = MessageInner(topic=TOPIC, queue_id=0, body=b"x", properties=props)
    result = store.put_message(msg)
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert "properties" in (result.message or "")
    _nothing_written(store, tmp_path)


@pytest.mark.parametrize("bad", [b"", b"x" * 1025])
def test_batch_with_one_bad_body_writes_nothing(
    make_store: StoreFactory, tmp_path: Path, bad: bytes
) -> None:
    store = make_store(max_message_size=1024)
    msgs = [Message(topic=TOPIC, body=b) for b in (b"good", bad, b"good too")]
    result = store.put_messages(BatchInner.from_messages(msgs, queue_id=0, born_timestamp=BORN_TS))
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert result.append is None
    assert store.commit_log.max_offset() == 0
    assert store.get_max_offset_in_queue(TOPIC, 0) == 0
    assert segment_files(store.config.commit_log_dir) in (
        [],
        [store.config.commit_log_dir / "00000000000000000000"],
    )


def test_properties_too_large(make_store: StoreFactory) -> None:
    store = make_store()
    msg = inner(b"x", properties={"big": "v" * 40_000})
    result = store.put_message(msg)
    assert not result.ok
    assert result.append is None
    assert store.commit_log.max_offset() == 0
    assert store.get_max_offset_in_queue(TOPIC, 0) == 0


def test_not_started_store_refuses_writes(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store(start=False)
    assert store.put_message(inner(b"x")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    batch = BatchInner.from_messages(
        [Message(topic=TOPIC, body=b"x")], queue_id=0, born_timestamp=1
    )
    assert store.put_messages(batch).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    result, future = store.put_message_nowait(inner(b"x"))
    assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    assert future is None
    assert not (tmp_path / "store" / "commitlog").exists()


def test_stopped_store_refuses_writes(make_store: StoreFactory) -> None:
    store = make_store()
    put(store, b"before")
    store.shutdown()
    assert store.put_message(inner(b"after")).status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    again = make_store()
    assert again.get_message(TOPIC, 0, 0).bodies() == [b"before"]
