"""Hash codes stored on disk: ``tags_code`` must be Java's ``String.hashCode``."""

from __future__ import annotations

import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.protocol.hashing import crc32, key_hash, tags_code


def java_string_hash(s: str) -> int:
    """Independent reference: iterate UTF-16 code units, wrap like a Java int."""
    h = 0
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:  # a surrogate pair in Java's char[]
            cp -= 0x10000
            units = [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units = [cp]
        for unit in units:
            h = h * 31 + unit
            h = (h + 2**31) % 2**32 - 2**31
    return h


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A", 65),
        ("TagA", 2598919),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
        ("中", 20013),
        ("😀", 1772899),  # U+1F600: hashed as the pair D83D DE00
        ("TagA||TagB", java_string_hash("TagA||TagB")),
    ],
)
def test_tags_code_known_java_values(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected
    assert tags_code(text) == expected


@pytest.mark.parametrize("empty", ["", None])
def test_no_tags_is_zero(empty: str | None) -> None:
    assert tags_code(empty) == 0


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=64))
def test_tags_code_matches_reference(text: str) -> None:
    code = tags_code(text)
    assert code == java_string_hash(text)
    assert -(2**31) <= code < 2**31


@settings(max_examples=100, deadline=None)
@given(key=st.text(max_size=64))
def test_key_hash_is_non_negative_masked_crc32(key: str) -> None:
    h = key_hash(key)
    assert h == zlib.crc32(key.encode("utf-8")) & 0x7FFFFFFF
    assert 0 <= h < 2**31
    assert key_hash(key) == h


def test_key_hash_known_value() -> None:
    assert key_hash("TopicTest#order-1") == zlib.crc32(b"TopicTest#order-1") & 0x7FFFFFFF
    assert key_hash("") == 0


def test_parse_tags() -> None:
    from connector.protocol.hashing import parse_tags

    assert parse_tags("A || B ||C") == frozenset({"A", "B", "C"})
    assert parse_tags(None) is None and parse_tags("") is None and parse_tags(" * ") is None
    assert parse_tags("A || *") is None


@pytest.mark.parametrize("size", [0, 1, 7, 100, 4096, 250_000])
def test_crc32_is_zlibs(size: int) -> None:
    # the CRC of records, batch entries, index keys: zlib-ng's where installed, the
    # same values as zlib's (a log written by either reads back with the other)
    data = bytes(random.Random(size).getrandbits(8) for _ in range(min(size, 4096))) * (
        size // 4096 + 1
    )
    data = data[:size]
    assert crc32(data) == zlib.crc32(data)
    assert crc32(memoryview(data)[1:]) == zlib.crc32(data[1:])
    assert crc32(data, 12345) == zlib.crc32(data, 12345)  # a running CRC, as index keys use
