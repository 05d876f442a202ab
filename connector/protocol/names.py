"""Topic, group and key name rules.

Names reach the filesystem (``consumequeue/{topic}/{queueId}``, config keys), so
they are checked before any path is built: RocketMQ's pattern
``^[%|a-zA-Z0-9_-]+$``, at most 127 characters. The pattern cannot express
``.``, ``/`` or ``\\``, so no name can walk out of the store directory.
"""

from __future__ import annotations

import re

from connector.errors import InvalidGroupError, InvalidKeyError, InvalidTopicError

__all__ = [
    "DEFAULT_TOPIC",
    "DLQ_GROUP_TOPIC_PREFIX",
    "MAX_NAME_LENGTH",
    "NAME_CHARACTER",
    "RETRY_GROUP_TOPIC_PREFIX",
    "SCHEDULE_TOPIC",
    "TRANS_HALF_TOPIC",
    "TRANS_OP_TOPIC",
    "is_system_topic",
    "validate_group",
    "validate_key",
    "validate_topic",
]

MAX_NAME_LENGTH = 127
DEFAULT_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # transactional halves, until decided
TRANS_OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"  # the decisions on them
_SYSTEM_TOPICS = frozenset(
    {
        DEFAULT_TOPIC,
        SCHEDULE_TOPIC,
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "SELF_TEST_TOPIC",
        TRANS_HALF_TOPIC,
        "RMQ_SYS_TRACE_TOPIC",
        TRANS_OP_TOPIC,
    }
)
NAME_CHARACTER = r"[%|a-zA-Z0-9_-]"  # a regex class: one character of a name
_NAME_RE = re.compile(rf"^{NAME_CHARACTER}+$")
_MAX_KEY_LENGTH = 255


def _check_name(kind: str, name: object, error: type[ValueError]) -> str:
    if not isinstance(name, str) or not name:
        raise error(f"{kind} name must be a non-empty string")
    if len(name) > MAX_NAME_LENGTH:
        raise error(f"{kind} name is {len(name)} chars, longer than {MAX_NAME_LENGTH}")
    if not _NAME_RE.fullmatch(name):
        raise error(f"{kind} name {name!r} has characters outside [%|a-zA-Z0-9_-]")
    return name


_VALID_TOPICS: set[str] = set()  # names already checked: a set lookup, not a regex
_VALID_TOPICS_MAX = 65_536


def validate_topic(topic: object) -> str:
    """Return ``topic`` if it is a legal topic name, else raise InvalidTopicError."""
    if isinstance(topic, str) and topic in _VALID_TOPICS:
        return topic
    name = _check_name("topic", topic, InvalidTopicError)
    if len(_VALID_TOPICS) < _VALID_TOPICS_MAX:
        _VALID_TOPICS.add(name)
    return name


def validate_group(group: object) -> str:
    """Return ``group`` if it is a legal consumer/producer group name."""
    return _check_name("group", group, InvalidGroupError)


def validate_key(key: object) -> str:
    """A message key: non-empty text with no separators of the properties codec."""
    if not isinstance(key, str) or not key or key.isspace():
        raise InvalidKeyError("a message key must be a non-empty string")
    if len(key) > _MAX_KEY_LENGTH:
        raise InvalidKeyError(f"a message key is at most {_MAX_KEY_LENGTH} chars")
    if " " in key or "\x01" in key or "\x02" in key:
        raise InvalidKeyError(f"message key {key!r} contains a space or a control separator")
    return key


def is_system_topic(topic: str) -> bool:
    """Reserved topics that producers may not send to directly."""
    return topic in _SYSTEM_TOPICS or topic.startswith(("RMQ_SYS_", "rmq_sys_"))
