"""The store's input: messages as the broker hands them over, properties encoded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from connector.protocol.batch import encode_batch
from connector.protocol.hashing import tags_code
from connector.protocol.message import Message
from connector.protocol.properties import PropertyKeys, encode_properties

__all__ = ["BatchInner", "MessageInner", "index_keys"]

LOCALHOST = b"\x7f\x00\x00\x01\x00\x00\x00\x00"


def index_keys(properties: dict[str, str]) -> tuple[str, ...]:
    """The keys a message is indexed under: its KEYS and its UNIQ_KEY."""
    keys = properties.get(PropertyKeys.KEYS, "")
    out = [k for k in keys.split(PropertyKeys.KEY_SEPARATOR) if k] if keys else []
    uniq = properties.get(PropertyKeys.UNIQ_KEY)
    if uniq:
        out.append(uniq)
    return tuple(out)


@dataclass(slots=True)
class MessageInner:
    """One message ready to append (RocketMQ's ``MessageExtBrokerInner``)."""

    topic: str
    queue_id: int
    body: bytes
    properties: bytes = b""
    tags_code: int = 0
    keys: tuple[str, ...] = ()
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCALHOST
    reconsume_times: int = 0

    @classmethod
    def from_message(
        cls,
        msg: Message,
        *,
        queue_id: int,
        born_timestamp: int,
        born_host: bytes = LOCALHOST,
        uniq_key: str | None = None,
        sys_flag: int = 0,
    ) -> MessageInner:
        props = msg.all_properties()
        if uniq_key:
            props[PropertyKeys.UNIQ_KEY] = uniq_key
        return cls(
            topic=msg.topic,
            queue_id=queue_id,
            body=msg.body,
            properties=encode_properties(props),
            tags_code=tags_code(msg.tags),
            keys=index_keys(props),
            flag=msg.flag,
            sys_flag=sys_flag,
            born_timestamp=born_timestamp,
            born_host=born_host,
        )


@dataclass(slots=True)
class BatchInner:
    """Many messages for one queue, in the wire batch encoding.

    ``data`` is what a producer sends (``connector.protocol.batch``); the
    store validates it whole and appends it under one lock hold.
    """

    topic: str
    queue_id: int
    data: bytes | memoryview
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCALHOST

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Message],
        *,
        queue_id: int,
        born_timestamp: int,
        uniq_keys: Sequence[str] | None = None,
        born_host: bytes = LOCALHOST,
    ) -> BatchInner:
        if not messages:
            raise ValueError("a batch needs at least one message")
        topic = messages[0].topic
        entries = []
        for i, msg in enumerate(messages):
            if msg.topic != topic:
                raise ValueError("every message of a batch must have the same topic")
            props = msg.all_properties()
            if uniq_keys is not None:
                props[PropertyKeys.UNIQ_KEY] = uniq_keys[i]
            entries.append((msg.body, msg.flag, encode_properties(props)))
        return cls(
            topic=topic,
            queue_id=queue_id,
            data=encode_batch(entries),
            born_timestamp=born_timestamp,
            born_host=born_host,
        )
