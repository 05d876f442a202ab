"""Pulled messages (decoded on use) equal what the Python record decoder builds."""

from __future__ import annotations

import copy
import gc
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import CorruptRecordError
from connector.protocol import pulled
from connector.protocol.message import MessageExt, SysFlag
from connector.protocol.pulled import PulledMessage, decode_records, queue_offsets
from connector.protocol.record import decode_record
from tests.support.records import record, sample


def reference(data: bytes) -> list[MessageExt]:
    out, pos = [], 0
    while pos < len(data):
        msg = decode_record(data, pos)
        out.append(msg)
        pos += msg.store_size
    return out


def test_fields_equal_the_python_decoder() -> None:
    data = sample()
    got, want = decode_records(data), reference(data)
    assert len(got) == len(want) == 7
    for g, w in zip(got, want, strict=True):
        assert isinstance(g, PulledMessage) and isinstance(g, MessageExt)
        for name in MessageExt.__dataclass_fields__:
            assert getattr(g, name) == getattr(w, name), name
        assert g == w and w == g
        assert (g.tags, g.keys, g.msg_id) == (w.tags, w.keys, w.msg_id)
        assert repr(g).endswith(repr(w)[len("MessageExt") :])
    assert got[2].body == b"z" * 5000  # the old flag without codec bits: zlib
    assert [m.body for m in got[4:]] == [b"z" * 5000] * 3  # LZ4, ZSTD, ZLIB
    assert got[0].keys == ["k1", "k2"] and got[0].msg_id == "ABC"
    assert got[1].topic == "Tópico" and got[1].store_host == "10.0.0.0:9984"


def test_fields_can_be_set_and_copied() -> None:
    msg = decode_records(sample())[0]
    msg.body = b"changed"
    msg.properties["x"] = "y"  # the decoded dict is kept: changes stay
    assert msg.body == b"changed" and msg.properties["x"] == "y"
    back = pickle.loads(pickle.dumps(msg))
    assert type(back) is MessageExt and back == msg
    assert copy.copy(msg) == msg


def test_empty_answer() -> None:
    assert decode_records(b"") == []
    assert queue_offsets([]) == []


def test_queue_offsets_of_a_whole_answer_or_any_list() -> None:
    data = sample()
    want = [m.queue_offset for m in reference(data)]
    assert queue_offsets(decode_records(data)) == want  # the answer's column
    some = decode_records(data)[1::2]  # a filtered answer: read a message at a time
    assert queue_offsets(some) == want[1::2]
    mixed = decode_records(data)[:3] + reference(data)[3:]
    assert queue_offsets(mixed) == want
    # as long as one answer, but of two (the second's offsets differ): read one at a time
    other = decode_records(b"".join(record(100 + i, b"x") for i in range(len(want))))
    two = decode_records(data)[:3] + other[3:]
    assert queue_offsets(two) == want[:3] + [m.queue_offset for m in other[3:]] != want


def test_body_crc_mismatch_is_corrupt() -> None:
    first = record(0, b"good")
    data = first + record(1, b"body", crc=12345)
    with pytest.raises(CorruptRecordError) as err:
        decode_records(data)
    assert err.value.position == len(first)
    assert len(decode_records(data, check_crc=False)) == 2


def test_truncated_answer_is_corrupt() -> None:
    data = sample()
    with pytest.raises(CorruptRecordError):
        decode_records(data[:-3])


def test_body_that_does_not_inflate_is_corrupt() -> None:
    data = record(0, b"not zlib at all", sys_flag=SysFlag.COMPRESSED)
    with pytest.raises(CorruptRecordError, match="inflate"):
        decode_records(data)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=300),
            st.text(
                alphabet=st.characters(codec="utf-8", exclude_characters="\x00\x01\x02"),
                min_size=1,
                max_size=20,
            ),
            st.dictionaries(
                st.text(alphabet="abcXYZ_", min_size=1, max_size=8),
                st.text(
                    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
                    max_size=30,
                ),
                max_size=4,
            ),
        ),
        max_size=20,
    )
)
def test_any_answer_decodes_like_the_python_decoder(
    items: list[tuple[bytes, str, dict[str, str]]],
) -> None:
    topics = [t.encode()[:127].decode("utf-8", errors="ignore") or "T" for _, t, _ in items]
    data = b"".join(
        record(i, body, topic=topic.encode(), props=props)
        for i, ((body, _, props), topic) in enumerate(zip(items, topics, strict=True))
    )
    assert decode_records(data) == reference(data)


def test_the_collector_is_held_back_only_while_messages_are_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """decode_records turns the garbage collector off while it makes the messages and
    back on, and leaves it off when the application had turned it off."""
    data = sample()
    seen: list[bool] = []
    make = pulled.pulled_messages

    def spy(cls: type[PulledMessage], answer: object, *columns: Any) -> list[PulledMessage]:
        seen.append(gc.isenabled())
        return make(cls, answer, *columns)

    monkeypatch.setattr(pulled, "pulled_messages", spy)
    assert gc.isenabled()
    assert len(decode_records(data)) == len(reference(data))
    assert seen == [False]  # off while the messages were made
    assert gc.isenabled()  # and on again after
    gc.disable()
    try:
        decode_records(data)
        assert not gc.isenabled()  # the application's choice is kept
    finally:
        gc.enable()


@pytest.mark.parametrize("count", [3, pulled._FEW, pulled._FEW + 1, 200])
def test_compressed_bodies_and_queue_offsets_in_small_and_large_answers(count: int) -> None:
    """Up to ``_FEW`` records an answer is read with lists, above with numpy: either way
    every compressed body is inflated and the queue offsets are the records'."""
    data = sample()
    samples = reference(data)
    compressed = data[sum(m.store_size for m in samples[:2]) :][: samples[2].store_size]
    parts = [
        compressed if i % 5 == 2 else record(1000 + 3 * i, f"b{i}".encode()) for i in range(count)
    ]
    answer = b"".join(parts)
    got, want = decode_records(answer), reference(answer)
    assert [m.body for m in got] == [m.body for m in want]
    assert [m.body for m in got if m.sys_flag & SysFlag.COMPRESSED] == [b"z" * 5000] * (
        (count + 2) // 5
    )
    assert queue_offsets(got) == [m.queue_offset for m in want]
    assert got == want
