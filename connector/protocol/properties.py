"""Message properties codec: ``name\\x01value\\x02`` pairs in UTF-8.

This is RocketMQ's ``MessageDecoder.messageProperties2String`` layout; an
outside tool splitting on the two separators reads the same dict.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from connector.errors import InvalidKeyError

__all__ = [
    "NAME_VALUE_SEPARATOR",
    "PROPERTY_SEPARATOR",
    "PropertyKeys",
    "decode_properties",
    "encode_properties",
    "properties_well_formed",
]

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_BYTES = 32767  # PROPLEN is an i16 in the record layout
# what ``encode_properties`` writes: pairs of a non-empty name and a value, neither holding
# a separator, each pair ended by \x02 (so non-empty properties end with \x02)
_WELL_FORMED = re.compile(rb"(?:[^\x01\x02]+\x01[^\x01\x02]*\x02)*")


class PropertyKeys:
    """Names of the system properties (RocketMQ's ``MessageConst``)."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    UNIQ_KEY = "UNIQ_KEY"
    SHARDING_KEY = "__SHARDINGKEY"
    RECONSUME_TIME = "RECONSUME_TIME"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    PRODUCER_GROUP = "PGROUP"
    TRANSACTION_PREPARED = "TRAN_MSG"
    # pymq: a half that carries a whole batch request, and the batch commit it waits for
    TX_WRITER = "PYMQ_TX_WRITER"
    TX_BATCH = "PYMQ_TX_BATCH"
    TX_MESSAGES = "PYMQ_TX_MESSAGES"
    KEY_SEPARATOR = " "


def encode_properties(properties: Mapping[str, str]) -> bytes:
    """Encode a property dict; names and values may not contain the separators."""
    if not properties:
        return b""
    parts = []
    for name, value in properties.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidKeyError(f"property {name!r} must map a string to a string")
        if not name:
            raise InvalidKeyError("a property name must not be empty")
        for text in (name, value):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise InvalidKeyError(f"property {name!r} contains a \\x01 or \\x02 separator")
        parts.append(f"{name}\x01{value}\x02")
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates, e.g. from JSON "\ud800"
        raise InvalidKeyError("a property name or value is not valid Unicode text") from None


def properties_well_formed(data: bytes | memoryview) -> bool:
    """Whether ``data`` is nothing but ``name\\x01value\\x02`` pairs, as encoded.

    The broker stores only well-formed properties, so recovery can tell a
    record whose end was never written (zeros where the last ``\\x02`` must
    be) from a whole one: the body CRC does not cover the properties.
    """
    return _WELL_FORMED.fullmatch(data) is not None


def decode_properties(data: bytes | memoryview) -> dict[str, str]:
    """Decode ``name\\x01value\\x02...``; a pair without a separator is skipped."""
    if not data:
        return {}
    text = bytes(data).decode("utf-8", errors="replace")
    result: dict[str, str] = {}
    for pair in text.split(PROPERTY_SEPARATOR):
        name, sep, value = pair.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            result[name] = value
    return result
