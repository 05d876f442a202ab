"""The batch encoders write exactly what the reference codec
(``connector.protocol.record.encode_record``) writes, message by message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.store.config import StoreConfig
from broker.store.inner import BatchInner, MessageInner
from broker.store.results import AppendResult, PutMessageStatus
from broker.store.store import MessageStore
from connector.protocol.hashing import tags_code
from connector.protocol.message import Message
from connector.protocol.msgid import encode_host
from connector.protocol.properties import encode_properties
from connector.protocol.record import encode_record
from tests.support.clocks import FakeClock
from tests.support.store import BORN_TS, TOPIC, StoreFactory, segment_files

prop_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=60
)
messages = st.lists(
    st.tuples(
        st.binary(min_size=1, max_size=3000),  # body
        st.dictionaries(prop_text.filter(bool), prop_text, max_size=6),  # user properties
        st.integers(-(2**31), 2**31 - 1),  # flag
        st.one_of(st.none(), st.sampled_from(["TagA", "TagB", "标签"])),  # tags
        st.lists(st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True), max_size=3),  # keys
    ),
    min_size=1,
    max_size=25,
)


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MessageStore]:
    """One store for every hypothesis example (each appends after the previous one)."""
    config = StoreConfig(
        store_dir=tmp_path_factory.mktemp("encoder") / "store",
        mapped_file_size_commit_log=16384,  # batches often split across segments
        consume_queue_entries_per_file=100,
        max_hash_slot_num=64,
        max_index_num=1000,
        clean_resource_interval_ms=3_600_000,
        store_host="10.9.8.7",
        store_port=10912,
    )
    store = MessageStore(config)
    store.start()
    yield store
    store.shutdown()


def _expected(
    batch_msgs: list[Message], store: MessageStore, append: AppendResult, born_host: bytes
) -> list[bytes]:
    out = []
    for i, m in enumerate(batch_msgs):
        out.append(
            encode_record(
                topic=TOPIC.encode(),
                body=m.body,
                properties=encode_properties(m.all_properties()),
                queue_id=2,
                queue_offset=append.queue_offset + i,
                physical_offset=int(append.physical_offsets[i]),
                flag=m.flag,
                born_timestamp=BORN_TS + 5,
                born_host=born_host,
                store_timestamp=append.store_timestamp,
                store_host=store.store_host,
            )
        )
    return out


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(msgs=messages)
def test_stored_batch_equals_reference_records(
    shared_store: MessageStore, msgs: list[tuple[bytes, dict[str, str], int, str | None, list[str]]]
) -> None:
    store = shared_store
    batch_msgs = [
        Message(topic=TOPIC, body=b, properties=p, flag=f, tags=t, keys=k) for b, p, f, t, k in msgs
    ]
    born_host = encode_host("192.168.1.20", 40001)
    batch = BatchInner.from_messages(
        batch_msgs, queue_id=2, born_timestamp=BORN_TS + 5, born_host=born_host
    )
    start = store.get_max_offset_in_queue(TOPIC, 2)
    result = store.put_messages(batch)
    assert result.status is PutMessageStatus.PUT_OK
    assert result.append is not None
    assert result.append.queue_offset == start
    got = store.get_message(TOPIC, 2, start, max_nums=len(msgs))
    assert got.records() == _expected(batch_msgs, store, result.append, born_host)
    assert got.bodies() == [m.body for m in batch_msgs]


def _twin(root: Path, clock: FakeClock) -> MessageStore:
    store = MessageStore(
        StoreConfig(
            store_dir=root,
            mapped_file_size_commit_log=4096,
            consume_queue_entries_per_file=10,
            clean_resource_interval_ms=3_600_000,
        ),
        clock=clock,
    )
    store.start()
    return store


def test_batch_and_single_puts_write_identical_files(tmp_path: Path) -> None:
    """The same messages, one by one or as one batch: the same bytes on disk."""
    clock = FakeClock()
    rng = np.random.default_rng(7)
    msgs = [
        Message(
            topic=TOPIC,
            body=rng.bytes(int(rng.integers(1, 900))),
            tags=f"T{i % 3}",
            keys=[f"key{i}"],
            properties={"p": "v" * int(rng.integers(0, 50))},
            flag=i,
        )
        for i in range(60)
    ]
    singles = _twin(tmp_path / "singles", clock)
    batched = _twin(tmp_path / "batched", clock)
    try:
        for m in msgs:
            r = singles.put_message(
                MessageInner.from_message(m, queue_id=1, born_timestamp=BORN_TS)
            )
            assert r.status is PutMessageStatus.PUT_OK
        r = batched.put_messages(BatchInner.from_messages(msgs, queue_id=1, born_timestamp=BORN_TS))
        assert r.status is PutMessageStatus.PUT_OK
        a = segment_files(singles.config.commit_log_dir)
        b = segment_files(batched.config.commit_log_dir)
        assert len(a) > 5
        assert [p.name for p in a] == [p.name for p in b]
        for pa, pb in zip(a, b, strict=True):
            assert pa.read_bytes() == pb.read_bytes(), pa.name
        qa = sorted((singles.config.consume_queue_dir / TOPIC / "1").iterdir())
        qb = sorted((batched.config.consume_queue_dir / TOPIC / "1").iterdir())
        assert [p.name for p in qa] == [p.name for p in qb]
        for pa, pb in zip(qa, qb, strict=True):
            assert pa.read_bytes() == pb.read_bytes(), pa.name
        for i in (0, 31, 59):
            assert [m.body for m in batched.query_message(TOPIC, f"key{i}")] == [msgs[i].body]
    finally:
        singles.shutdown()
        batched.shutdown()


@pytest.mark.parametrize("tag", ["TagA", "标签", "émoji-😀", "a" * 200])
def test_batch_tags_codes_match_single_puts(make_store: StoreFactory, tag: str) -> None:
    store = make_store()
    msgs = [Message(topic=TOPIC, body=b"one", tags=tag), Message(topic=TOPIC, body=b"two")]
    res = store.put_messages(BatchInner.from_messages(msgs, queue_id=0, born_timestamp=1))
    assert res.status is PutMessageStatus.PUT_OK
    single = store.put_message(MessageInner.from_message(msgs[0], queue_id=0, born_timestamp=1))
    assert single.status is PutMessageStatus.PUT_OK
    cq = store.consume_queue(TOPIC, 0)
    assert cq is not None
    codes = cq.get_entries(0, 3)["tags_code"].tolist()
    assert codes == [tags_code(tag), 0, tags_code(tag)]
    got = store.get_message(TOPIC, 0, 0, tags_codes=[tags_code(tag)])
    assert got.queue_offsets == [0, 2]
    assert [m.tags for m in got.messages()] == [tag, tag]
