"""Properties codec: ``name\\x01value\\x02`` pairs in UTF-8 (RocketMQ's layout)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import ClientError, InvalidKeyError
from connector.protocol.properties import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    PropertyKeys,
    decode_properties,
    encode_properties,
)

text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
    max_size=30,
)
property_dicts = st.dictionaries(text.filter(bool), text, max_size=8)


def outside_tool_split(data: bytes) -> dict[str, str]:
    """How a non-pymq reader (Java's ``string2messageProperties``) splits the bytes."""
    result = {}
    for pair in data.decode("utf-8").split("\x02"):
        if pair:
            name, value = pair.split("\x01", 1)
            result[name] = value
    return result


def test_separators_are_rocketmq_s() -> None:
    assert NAME_VALUE_SEPARATOR == "\x01"
    assert PROPERTY_SEPARATOR == "\x02"


def test_empty_dict_encodes_to_no_bytes() -> None:
    assert encode_properties({}) == b""
    assert decode_properties(b"") == {}
    assert decode_properties(memoryview(b"")) == {}


def test_exact_bytes() -> None:
    data = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "E": ""})
    assert data == b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02E\x01\x02"


def test_unicode_is_utf8() -> None:
    props = {"键": "值", "emoji": "😀 ok", "ü": "ß"}
    data = encode_properties(props)
    assert data == "键\x01值\x02emoji\x01😀 ok\x02ü\x01ß\x02".encode()
    assert decode_properties(data) == props
    assert list(decode_properties(data)) == list(props)  # order kept


@settings(max_examples=200, deadline=None)
@given(props=property_dicts)
def test_round_trip(props: dict[str, str]) -> None:
    data = encode_properties(props)
    assert isinstance(data, bytes)
    assert decode_properties(data) == props
    assert decode_properties(memoryview(data)) == props
    assert decode_properties(memoryview(bytearray(data))) == props
    assert outside_tool_split(data) == props
    assert data.count(b"\x02") == len(props)


@pytest.mark.parametrize(
    "props",
    [
        {"a\x01b": "v"},
        {"a\x02b": "v"},
        {"k": "v\x01w"},
        {"k": "v\x02w"},
        {"\x01": ""},
        {"k": "\x02"},
        {"ok": "fine", "bad": "x\x02y"},
    ],
)
def test_separators_rejected(props: dict[str, str]) -> None:
    with pytest.raises(InvalidKeyError, match="separator"):
        encode_properties(props)


@pytest.mark.parametrize("props", [{"": "v"}, {"": ""}])
def test_empty_name_rejected(props: dict[str, str]) -> None:
    with pytest.raises(InvalidKeyError, match="empty"):
        encode_properties(props)


@pytest.mark.parametrize("props", [{"k": 1}, {"k": None}, {1: "v"}, {b"k": "v"}, {"k": b"v"}])
def test_non_string_rejected(props: dict[Any, Any]) -> None:
    with pytest.raises(InvalidKeyError, match="string"):
        encode_properties(props)


def test_invalid_key_error_is_a_client_value_error() -> None:
    with pytest.raises(ValueError) as info:
        encode_properties({"a": "\x01"})
    assert isinstance(info.value, ClientError)
    assert info.value.code == "KEY_ILLEGAL"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"a\x011\x02", {"a": "1"}),
        (b"a\x011", {"a": "1"}),  # last separator missing
        (b"a\x011\x02junk\x02b\x012\x02", {"a": "1", "b": "2"}),  # pair without \x01 skipped
        (b"\x01orphan\x02c\x013\x02", {"c": "3"}),  # empty name skipped
        (b"a\x01x\x01y\x02", {"a": "x\x01y"}),  # first \x01 splits
        (b"a\x011\x02a\x012\x02", {"a": "2"}),  # a repeated name: the last wins
        (b"\x02\x02", {}),
    ],
)
def test_decode_is_lenient_with_foreign_bytes(data: bytes, expected: dict[str, str]) -> None:
    assert decode_properties(data) == expected


def test_decode_invalid_utf8_does_not_raise() -> None:
    decoded = decode_properties(b"k\x01\xff\xfe\x02")
    assert list(decoded) == ["k"]
    assert "\ufffd" in decoded["k"]


def test_property_key_names_match_rocketmq_message_const() -> None:
    assert PropertyKeys.KEYS == "KEYS"
    assert PropertyKeys.TAGS == "TAGS"
    assert PropertyKeys.WAIT_STORE_MSG_OK == "WAIT"
    assert PropertyKeys.DELAY_TIME_LEVEL == "DELAY"
    assert PropertyKeys.RETRY_TOPIC == "RETRY_TOPIC"
    assert PropertyKeys.REAL_TOPIC == "REAL_TOPIC"
    assert PropertyKeys.REAL_QUEUE_ID == "REAL_QID"
    assert PropertyKeys.UNIQ_KEY == "UNIQ_KEY"
    assert PropertyKeys.SHARDING_KEY == "__SHARDINGKEY"
    assert PropertyKeys.RECONSUME_TIME == "RECONSUME_TIME"
    assert PropertyKeys.MAX_RECONSUME_TIMES == "MAX_RECONSUME_TIMES"
    assert PropertyKeys.ORIGIN_MESSAGE_ID == "ORIGIN_MESSAGE_ID"
    assert PropertyKeys.PRODUCER_GROUP == "PGROUP"
    assert PropertyKeys.KEY_SEPARATOR == " "
