"""Batch codec: round trips, the entry layout, and whole-batch rejection of any defect."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import MessageIllegalError, MessageTooLargeError
from connector.protocol.batch import (
    BATCH_ENTRY_OVERHEAD,
    DecodedBatch,
    decode_batch,
    encode_batch,
)
from connector.protocol.properties import encode_properties

MAX = 4 * 1024 * 1024

# properties as the broker accepts them: name\x01value\x02 pairs, any other bytes inside
_text = st.binary(max_size=12).map(lambda b: b.replace(b"\x01", b"").replace(b"\x02", b""))
properties_strategy = st.lists(
    st.tuples(_text.filter(bool), _text).map(lambda nv: nv[0] + b"\x01" + nv[1] + b"\x02"),
    max_size=4,
).map(b"".join)
entries_strategy = st.lists(
    st.tuples(
        st.binary(min_size=1, max_size=300),
        st.integers(-(2**31), 2**31 - 1),
        properties_strategy,
    ),
    min_size=1,
    max_size=20,
)

THREE = [
    (b"first body", 0, encode_properties({"TAGS": "A"})),
    (b"second body!", 5, encode_properties({"KEYS": "k1 k2", "TAGS": "B"})),
    (b"3", -1, b""),
]


def entry_offsets(entries: list[tuple[bytes, int, bytes]]) -> list[int]:
    offsets, pos = [], 0
    for body, _flag, props in entries:
        offsets.append(pos)
        pos += BATCH_ENTRY_OVERHEAD + len(body) + len(props)
    return offsets


def patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


def rejected(data: bytes | bytearray | memoryview, **kwargs: int) -> MessageIllegalError:
    kwargs.setdefault("max_message_size", MAX)
    with pytest.raises(MessageIllegalError):
        decode_batch(bytes(data), **kwargs)
    with pytest.raises(MessageIllegalError) as info:
        decode_batch(memoryview(data), **kwargs)
    return info.value


# --------------------------------------------------------------------------- good batches


@settings(max_examples=150, deadline=None)
@given(entries=entries_strategy)
def test_round_trip(entries: list[tuple[bytes, int, bytes]]) -> None:
    data = encode_batch(entries)
    assert len(data) == sum(BATCH_ENTRY_OVERHEAD + len(b) + len(p) for b, _, p in entries)
    batch = decode_batch(data, max_message_size=MAX)
    assert isinstance(batch, DecodedBatch)
    assert len(batch) == len(entries)
    assert batch.bodies == [b for b, _, _ in entries]
    assert batch.flags == [f for _, f, _ in entries]
    assert batch.properties == [p for _, _, p in entries]
    assert batch.crcs == [zlib.crc32(b) & 0x7FFFFFFF for b, _, _ in entries]
    assert decode_batch(memoryview(data), max_message_size=MAX) == batch
    assert decode_batch(memoryview(bytearray(data)), max_message_size=MAX) == batch


def test_entry_layout_read_by_an_outside_tool() -> None:
    data = encode_batch(THREE)
    assert BATCH_ENTRY_OVERHEAD == 22
    pos = 0
    for body, flag, props in THREE:
        total, magic, crc, got_flag, body_len = struct.unpack_from(">iIiii", data, pos)
        assert total == 22 + len(body) + len(props)
        assert magic == 0xDAA320A7
        assert crc == zlib.crc32(body) & 0x7FFFFFFF
        assert got_flag == flag
        assert body_len == len(body)
        assert data[pos + 20 : pos + 20 + body_len] == body
        (props_len,) = struct.unpack_from(">h", data, pos + 20 + body_len)
        assert props_len == len(props)
        assert data[pos + 22 + body_len : pos + total] == props
        pos += total
    assert pos == len(data)


def test_encode_empty_sequence_is_empty_bytes() -> None:
    assert encode_batch([]) == b""


def test_encode_rejects_properties_that_do_not_fit_proplen() -> None:
    with pytest.raises(MessageIllegalError):
        encode_batch([(b"x", 0, b"p" * 32768)])
    longest = b"p\x01" + b"v" * 32764 + b"\x02"
    data = encode_batch([(b"x", 0, longest)])
    assert decode_batch(data, max_message_size=MAX).properties == [longest]


def test_body_at_exactly_the_limit_is_accepted() -> None:
    data = encode_batch([(b"a" * 100, 0, b""), (b"b" * 99, 0, b"")])
    assert len(decode_batch(data, max_message_size=100)) == 2


def test_max_count_is_inclusive() -> None:
    data = encode_batch(THREE)
    assert len(decode_batch(data, max_message_size=MAX, max_count=3)) == 3


# --------------------------------------------------------------------------- malformed


def test_empty_input() -> None:
    assert "empty" in str(rejected(b""))
    assert "empty" in str(rejected(memoryview(b"")))


def test_truncated_at_every_length_inside_an_entry() -> None:
    data = encode_batch(THREE)
    boundaries = set(entry_offsets(THREE))
    for cut in range(1, len(data)):
        if cut in boundaries:
            # The format has no entry count: a cut between entries is a
            # shorter, well-formed batch (the transport's length must catch it).
            n = sorted(boundaries).index(cut)
            assert decode_batch(data[:cut], max_message_size=MAX).bodies == [
                b for b, _, _ in THREE[:n]
            ]
        else:
            rejected(data[:cut])


def test_truncated_inside_the_header_of_a_later_entry() -> None:
    data = encode_batch(THREE)
    second = entry_offsets(THREE)[1]
    err = rejected(data[: second + 10])
    assert "entry 1" in str(err)


def test_wrong_magic_in_the_second_entry() -> None:
    data = encode_batch(THREE)
    second = entry_offsets(THREE)[1]
    err = rejected(patch(data, second + 4, ">I", 0xCBD43194))
    assert "magic" in str(err)
    assert "entry 1" in str(err)


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("delta", [1, 7, 10_000, 2**31 - 1])
def test_total_size_too_big(index: int, delta: int) -> None:
    data = encode_batch(THREE)
    start = entry_offsets(THREE)[index]
    (total,) = struct.unpack_from(">i", data, start)
    rejected(patch(data, start, ">i", min(total + delta, 2**31 - 1)))


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize(
    "lie",
    [
        lambda total: -(2**31),
        lambda total: -1,
        lambda total: 0,
        lambda total: 1,
        lambda total: BATCH_ENTRY_OVERHEAD - 1,
        lambda total: total - 1,
        lambda total: total - 2,
    ],
    ids=["min_i32", "-1", "0", "1", "overhead-1", "total-1", "total-2"],
)
def test_total_size_too_small(index: int, lie: Callable[[int], int]) -> None:
    data = encode_batch(THREE)
    start = entry_offsets(THREE)[index]
    (total,) = struct.unpack_from(">i", data, start)
    rejected(patch(data, start, ">i", lie(total)))


@pytest.mark.parametrize("delta", [1, 2, 3, 100, 2**20])
def test_body_length_overrunning_the_entry(delta: int) -> None:
    data = encode_batch(THREE)
    second = entry_offsets(THREE)[1]
    body_len = len(THREE[1][0])
    rejected(patch(data, second + 16, ">i", body_len + delta))


@pytest.mark.parametrize("delta", [-1, -3])
def test_body_length_too_short(delta: int) -> None:
    data = encode_batch(THREE)
    second = entry_offsets(THREE)[1]
    body_len = len(THREE[1][0])
    rejected(patch(data, second + 16, ">i", body_len + delta))


@pytest.mark.parametrize("props_len", [-1, -32768, 0, 32767])
def test_properties_length_lies(props_len: int) -> None:
    data = encode_batch(THREE)
    second = entry_offsets(THREE)[1]
    body, _flag, props = THREE[1]
    assert props_len != len(props)
    err = rejected(patch(data, second + 20 + len(body), ">h", props_len))
    assert "entry 1" in str(err)


@pytest.mark.parametrize(
    "props",
    [
        b"KEYS\x01k1 k2\x02TAGS\x01B\x00",  # zeros where the last separator must be
        b"KEYS\x01k1 k2\x02TAGS\x01B",
        b"KEYS\x01k1\x01k2\x02",
        b"\x01B\x02",
        b"TAGS\x02",
    ],
)
def test_properties_that_are_not_pairs(props: bytes) -> None:
    entries = [THREE[0], (b"second body!", 5, props), THREE[2]]
    err = rejected(encode_batch(entries))
    assert "entry 1: properties are not" in str(err)


@pytest.mark.parametrize("garbage", [b"\x00", b"x" * 21, b"x" * 22, b"\xda\xa3\x20\xa7" * 10])
def test_trailing_garbage(garbage: bytes) -> None:
    rejected(encode_batch(THREE) + garbage)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_crc_mismatch(index: int) -> None:
    data = bytearray(encode_batch(THREE))
    data[entry_offsets(THREE)[index] + 20] ^= 0x40
    err = rejected(data)
    assert "CRC" in str(err)
    assert f"entry {index}" in str(err)


def test_crc_field_damage() -> None:
    data = encode_batch(THREE)
    third = entry_offsets(THREE)[2]
    (crc,) = struct.unpack_from(">i", data, third + 8)
    assert "CRC" in str(rejected(patch(data, third + 8, ">i", crc ^ 1)))


@settings(max_examples=100, deadline=None)
@given(entries=entries_strategy, data=st.data())
def test_any_body_bit_flip_rejects_the_whole_batch(
    entries: list[tuple[bytes, int, bytes]], data: st.DataObject
) -> None:
    raw = bytearray(encode_batch(entries))
    index = data.draw(st.integers(0, len(entries) - 1))
    body = entries[index][0]
    i = data.draw(st.integers(0, len(body) - 1))
    raw[entry_offsets(entries)[index] + 20 + i] ^= 1 << data.draw(st.integers(0, 7))
    rejected(raw)


def test_empty_body() -> None:
    assert "empty body" in str(rejected(encode_batch([(b"", 0, b"")])))
    err = rejected(encode_batch([(b"a", 0, b""), (b"", 0, b"p\x01v\x02"), (b"c", 0, b"")]))
    assert "entry 1" in str(err)


def test_negative_body_length() -> None:
    data = encode_batch(THREE)
    rejected(patch(data, 16, ">i", -5))


def test_body_larger_than_max_message_size() -> None:
    data = encode_batch([(b"a" * 10, 0, b""), (b"b" * 101, 0, b"")])
    with pytest.raises(MessageTooLargeError) as info:
        decode_batch(data, max_message_size=100)
    assert info.value.size == 101
    assert info.value.max_size == 100
    assert isinstance(info.value, MessageIllegalError)
    assert isinstance(info.value, ValueError)


def test_max_count_exceeded() -> None:
    data = encode_batch(THREE)
    err = rejected(data, max_count=2)
    assert "more than 2" in str(err)
    rejected(encode_batch([(b"x", 0, b"")]), max_count=0)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_raise_only_message_illegal(data: bytes) -> None:
    try:
        batch = decode_batch(data, max_message_size=MAX)
    except MessageIllegalError as exc:
        assert exc.code in {"MESSAGE_ILLEGAL", "MESSAGE_SIZE_EXCEEDED"}
    else:
        assert len(batch) >= 1
        assert (
            encode_batch(list(zip(batch.bodies, batch.flags, batch.properties, strict=True)))
            == data
        )


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_byte_change_is_rejected_or_decodes_to_a_consistent_batch(
    data: st.DataObject,
) -> None:
    raw = bytearray(encode_batch(THREE))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] = data.draw(st.integers(0, 255).filter(lambda v: v != raw[i]))
    try:
        batch = decode_batch(bytes(raw), max_message_size=MAX)
    except MessageIllegalError:
        return
    # Only bytes no check covers (FLAG, property bytes) can change undetected;
    # whatever decodes re-encodes to exactly the input.
    assert len(batch) == 3
    assert batch.bodies == [b for b, _, _ in THREE]
    assert encode_batch(
        list(zip(batch.bodies, batch.flags, batch.properties, strict=True))
    ) == bytes(raw)
