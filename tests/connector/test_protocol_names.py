"""Topic, group and key name rules (names reach the filesystem)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import ClientError, InvalidGroupError, InvalidKeyError, InvalidTopicError
from connector.protocol.names import (
    DEFAULT_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    MAX_NAME_LENGTH,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    is_system_topic,
    validate_group,
    validate_key,
    validate_topic,
)

LEGAL = "%|abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

GOOD_NAMES = ["T", "TopicTest", "%RETRY%g", "%DLQ%group-1", "a|b", "A_b-9", "x" * 127]
BAD_NAMES: list[Any] = [
    "../x",
    "..",
    "a/b",
    "/abs",
    "a\\b",
    "a.b",
    "",
    "x" * 128,
    "主题",
    "topic²",  # a unicode digit
    "ｔｏｐｉｃ",  # full-width letters
    None,
    " ",
    "a b",
    "T\n",  # `$` alone would match before a trailing newline
    "T\r\n",
    "\nT",
    "T\x00",
    "a:b",
    "a*b",
    123,
    b"T",
]


def test_constants() -> None:
    assert MAX_NAME_LENGTH == 127
    assert DEFAULT_TOPIC == "TBW102"
    assert SCHEDULE_TOPIC == "SCHEDULE_TOPIC_XXXX"
    assert RETRY_GROUP_TOPIC_PREFIX == "%RETRY%"
    assert DLQ_GROUP_TOPIC_PREFIX == "%DLQ%"


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_validate_topic_accepts(name: str) -> None:
    assert validate_topic(name) == name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_validate_topic_rejects(name: Any) -> None:
    with pytest.raises(InvalidTopicError) as info:
        validate_topic(name)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, ClientError)
    assert info.value.code == "TOPIC_ILLEGAL"


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_validate_group_accepts(name: str) -> None:
    assert validate_group(name) == name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_validate_group_rejects(name: Any) -> None:
    with pytest.raises(InvalidGroupError) as info:
        validate_group(name)
    assert info.value.code == "GROUP_ILLEGAL"


@settings(max_examples=200, deadline=None)
@given(name=st.text(alphabet=LEGAL, min_size=1, max_size=127))
def test_every_name_of_legal_characters_is_accepted(name: str) -> None:
    assert validate_topic(name) == name
    assert validate_group(name) == name


@settings(max_examples=200, deadline=None)
@given(
    prefix=st.text(alphabet=LEGAL, max_size=20),
    bad=st.characters(exclude_characters=LEGAL),
    suffix=st.text(alphabet=LEGAL, max_size=20),
)
def test_any_other_character_is_rejected(prefix: str, bad: str, suffix: str) -> None:
    with pytest.raises(InvalidTopicError):
        validate_topic(prefix + bad + suffix)
    with pytest.raises(InvalidGroupError):
        validate_group(prefix + bad + suffix)


@pytest.mark.parametrize(
    "topic",
    [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_X",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "rmq_sys_anything",
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
    ],
)
def test_is_system_topic_true(topic: str) -> None:
    assert is_system_topic(topic) is True


@pytest.mark.parametrize(
    "topic", ["T", "TopicTest", "%RETRY%g", "%DLQ%g", "RMQ_SYS", "tbw102", "XRMQ_SYS_", "TBW1020"]
)
def test_is_system_topic_false(topic: str) -> None:
    assert is_system_topic(topic) is False


@pytest.mark.parametrize("key", ["k", "order-1", "键", "a.b/c", "x" * 255, "id:42"])
def test_validate_key_accepts(key: str) -> None:
    assert validate_key(key) == key


@pytest.mark.parametrize(
    "key",
    ["", " ", "\t", "  \n", "a b", " a", "a ", "a\x01b", "a\x02b", "x" * 256, None, 5, b"k"],
)
def test_validate_key_rejects(key: Any) -> None:
    with pytest.raises(InvalidKeyError) as info:
        validate_key(key)
    assert isinstance(info.value, ValueError)
    assert info.value.code == "KEY_ILLEGAL"
