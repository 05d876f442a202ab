"""Arrow columns -> batch encoding: the compiled encoder agrees with the message path."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import MessageIllegalError, MessageTooLargeError
from connector.protocol.batch import decode_batch, encode_batch
from connector.protocol.msgid import IdBlock
from connector.protocol.properties import decode_properties, encode_properties
from connector.protocol.record import record_size
from connector.spark.encode import encode_columns

BINARY = pa.binary()
IDS = [f"{i:032X}" for i in range(64)]


def reference(bodies: list[bytes], tags: list[str | None] | None) -> bytes:
    entries = []
    for i, body in enumerate(bodies):
        props = {"UNIQ_KEY": IDS[i]}
        if tags is not None and tags[i]:
            props["TAGS"] = tags[i]  # type: ignore[assignment]
        entries.append((body, 0, encode_properties(props)))
    return encode_batch(entries)


def check(bodies: list[bytes], tags: list[str | None] | None, typ: pa.DataType = BINARY) -> None:
    arr = pa.array(
        bodies if typ in (pa.binary(), pa.large_binary()) else [b.decode() for b in bodies], typ
    )
    tag_arr = None if tags is None else pa.array(tags, pa.string())
    batch = encode_columns("Topic", arr, tag_arr, IDS[: len(bodies)], 1 << 20)
    assert batch.data == reference(bodies, tags)
    decoded = decode_batch(batch.data, max_message_size=1 << 20)
    assert decoded.bodies == bodies
    assert batch.msg_ids == IDS[: len(bodies)]
    assert batch.record_sizes == [
        record_size(len(b), 5, len(p)) for b, p in zip(bodies, decoded.properties, strict=True)
    ]
    for i, p in enumerate(decoded.properties):
        assert decode_properties(p)["UNIQ_KEY"] == IDS[i]


def test_bodies_and_tags() -> None:
    check([b"a", b"bb" * 100, bytes(range(1, 256))], None)
    check([b"a", b"b", b"c", b"d"], ["x", None, "", "\u4e2d\u6587"])
    check([b"plain text", b"caf\xc3\xa9"], ["t", "t"], pa.string())
    check([b"x" * 10, b"y"], None, pa.large_binary())


def test_sliced_columns() -> None:
    arr = pa.array([b"skip", b"keep1", b"keep2"]).slice(1)
    tags = pa.array(["s", None, "T"]).slice(1)
    batch = encode_columns("Topic", arr, tags, IDS[:2], 1 << 20)
    assert batch.data == reference([b"keep1", b"keep2"], [None, "T"])


def test_bad_rows_are_refused() -> None:
    with pytest.raises(MessageIllegalError, match="null body"):
        encode_columns("T", pa.array([b"a", None]), None, IDS[:2], 100)
    with pytest.raises(MessageIllegalError, match="non-empty"):
        encode_columns("T", pa.array([b"a", b""]), None, IDS[:2], 100)
    with pytest.raises(MessageTooLargeError):
        encode_columns("T", pa.array([b"a" * 101]), None, IDS[:1], 100)
    with pytest.raises(MessageIllegalError, match="separator"):
        encode_columns("T", pa.array([b"a"]), pa.array(["bad\x01tag"]), IDS[:1], 100)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(min_size=1, max_size=300),
            st.none()
            | st.text(
                st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                max_size=10,
            ),
        ),
        min_size=1,
        max_size=64,
    )
)
def test_any_rows_match(rows: list[tuple[bytes, str | None]]) -> None:
    check([b for b, _ in rows], [t for _, t in rows])


@settings(max_examples=60, deadline=None)
@given(
    first=st.sampled_from([0, 1, 0xFFF0, 0xFFFF]) | st.integers(0, 0xFFFF),
    rows=st.integers(1, 40),
    tagged=st.booleans(),
)
def test_an_id_block_is_written_as_its_strs(first: int, rows: int, tagged: bool) -> None:
    """Ids given as an IdBlock (head + counter, written by the compiled loop) encode to
    the same bytes as the same ids given as strs, across the counter's wrap."""
    block = IdBlock("0A0B0C0D1F90DEADBEEF0123ABCD", first, rows)
    ids = block.tolist()
    assert [int(i[-4:], 16) for i in ids] == [(first + i) & 0xFFFF for i in range(rows)]
    bodies = pa.array([b"m%d" % i for i in range(rows)])
    tags = pa.array(["t" if i % 3 else None for i in range(rows)], pa.string()) if tagged else None
    fast = encode_columns("Topic", bodies, tags, block, 1 << 20)
    slow = encode_columns("Topic", bodies, tags, list(ids), 1 << 20)
    assert bytes(fast.data) == bytes(slow.data)
    assert fast.msg_ids == ids
    decoded = decode_batch(fast.data, max_message_size=1 << 20)
    assert [decode_properties(p)["UNIQ_KEY"] for p in decoded.properties] == ids


def test_an_id_block_of_the_wrong_length_is_refused() -> None:
    with pytest.raises(MessageIllegalError, match="one msg id per message"):
        encode_columns("T", pa.array([b"a", b"b"]), None, IdBlock("0" * 28, 0, 3), 100)
