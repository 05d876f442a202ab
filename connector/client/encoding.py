"""A producer's messages as request bodies: one message or a batch of one topic, in
the batch encoding (``connector.protocol.batch``), each with its UNIQ_KEY, and
the record size each will have once stored (for offset msgIds).

A message of only a body (and perhaps tags) is packed directly (no properties
dict: ~2x faster); any other message goes through its properties. A batch (or an
auto-batch of single sends) of such plain messages is laid out in one compiled call
over the message objects (``encode_messages`` in ``connector/protocol/_kernels.c``:
~0.4 us a message, against ~4 us a message for the per-message path and ~100 us a
call for the array path), the same bytes as the per-message path; one of
``ARRAY_BATCH_BYTES`` or more goes the array path (``connector.protocol.fastbatch``),
which can write into a thread's scratch buffer. Bodies over
``compress_msg_body_over_howmuch`` are compressed (single messages only).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Any

from connector.errors import MessageIllegalError, MessageTooLargeError
from connector.protocol.batch import encode_batch, encode_entry
from connector.protocol.compression import CompressionType, compress
from connector.protocol.message import Message
from connector.protocol.msgid import UniqKeyGenerator
from connector.protocol.names import validate_topic
from connector.protocol.properties import PropertyKeys, encode_properties
from connector.protocol.record import record_size

__all__ = ["ARRAY_BATCH_BYTES", "Encoded", "Encoder", "plain_size"]

# a plain batch of about this many bytes or more is laid out by the array path, into the
# sending thread's scratch buffer (megabytes of fresh memory a batch cost page faults)
ARRAY_BATCH_BYTES = 1 << 20
_messages_kernel: Any = None  # encode_messages, loaded with the first batch


class Encoded:
    """A send's request body and what is needed to read its answer."""

    __slots__ = ("born", "compression", "data", "half", "msg_ids", "sizes", "topic")

    def __init__(
        self,
        topic: str,
        data: bytes | memoryview,
        msg_ids: Sequence[str],
        sizes: list[int],
        compression: CompressionType | None,
        born: int | None = None,
    ) -> None:
        self.topic = topic
        self.data = data
        self.msg_ids = msg_ids
        self.sizes = sizes
        self.compression = compression  # of a single message's body, or None
        self.born = born  # the request's born time (ms) if the caller set it, else now
        self.half: tuple[str, int] | None = None  # a batch half's (writer, batch) key


class Encoder:
    """Encodes for one producer (its size limit and compression). Thread-safe."""

    def __init__(
        self,
        *,
        max_message_size: int,
        compress_msg_body_over_howmuch: int,
        compress_type: CompressionType,
        compress_level: int,
    ) -> None:
        self.max_message_size = max_message_size
        self.compress_over = compress_msg_body_over_howmuch
        self.compress_type = compress_type
        self.compress_level = compress_level
        self.uniq = UniqKeyGenerator()
        self._local = threading.local()  # per thread: the batch encoding scratch

    def check(self, msg: Message) -> None:
        validate_topic(msg.topic)
        msg.validate()
        if not msg.body:
            raise MessageIllegalError("message body is empty")
        if len(msg.body) > self.max_message_size:
            raise MessageTooLargeError(len(msg.body), self.max_message_size)

    def one(self, msg: Message) -> Encoded:
        """One message: a batch of one."""
        body = msg.body
        if (
            type(body) is bytes
            and 0 < len(body) <= self.compress_over
            and not (msg._keys or msg.properties or msg.delay_level or msg.flag)
        ):  # the common case, without a properties dict: ~2x faster per message
            return self.plain_one(msg, body)
        self.check(msg)
        props = msg.all_properties()
        uniq = props.get(PropertyKeys.UNIQ_KEY) or self.uniq.next_id()
        props[PropertyKeys.UNIQ_KEY] = uniq
        body, compression = msg.body, None
        if len(body) > self.compress_over:
            packed = compress(body, self.compress_type, self.compress_level)
            if len(packed) < len(body):
                body, compression = packed, self.compress_type
        encoded_props = encode_properties(props)
        size = record_size(len(body), len(msg.topic.encode()), len(encoded_props))
        data = encode_batch([(body, msg.flag, encoded_props)])
        return Encoded(msg.topic, data, [uniq], [size], compression)

    def plain_one(self, msg: Message, body: bytes) -> Encoded:
        """A message of only a body (and perhaps tags), encoded as ``one`` would (the
        same batch entry, byte for byte)."""
        topic = msg.topic
        validate_topic(topic)
        tags = msg.tags
        uniq = self.uniq.next_id()
        props = b"UNIQ_KEY\x01" + uniq.encode() + b"\x02"
        if tags:
            msg.validate()
            props = b"TAGS\x01" + tags.encode() + b"\x02" + props
        size = record_size(len(body), len(topic.encode()), len(props))
        return Encoded(topic, encode_entry(body, props), [uniq], [size], None)

    def plain_checked(self, msg: Message) -> bool:
        """Whether ``msg`` is only a body (bytes, not compressed) and perhaps tags, which
        a batch encodes in compiled code; such a message is checked here."""
        body = msg.body
        if not (
            type(body) is bytes
            and 0 < len(body) <= self.compress_over
            and not (msg._keys or msg.properties or msg.delay_level or msg.flag)
        ):
            return False
        validate_topic(msg.topic)
        tags = msg.tags
        if tags:
            msg.validate()
            try:
                tags.encode()
            except UnicodeEncodeError:
                raise MessageIllegalError("tags are not valid text (a lone surrogate?)") from None
        return True

    def batch(self, msgs: Sequence[Message], *, scratch: bool = False) -> Encoded:
        """Messages of one topic in one request. ``scratch``: a compiled encoding may go
        into this thread's scratch buffer (valid until the thread encodes again)."""
        if not msgs:
            raise MessageIllegalError("a batch needs at least one message")
        topic = validate_topic(msgs[0].topic)
        first = msgs[0].body
        if len(msgs) * (len(first) if type(first) is bytes else 0) < ARRAY_BATCH_BYTES:
            plain = self.plain_list(msgs, topic, self.max_message_size)
        elif _plain(msgs, topic):
            plain = self.plain_batch(msgs, topic, scratch=scratch)
        else:
            plain = None
        if plain is not None:
            if len(plain.data) > self.max_message_size:
                raise MessageTooLargeError(
                    len(plain.data), self.max_message_size,
                    message=f"batch of {len(plain.data)} bytes exceeds {self.max_message_size}",
                )  # fmt: skip
            return plain
        topic_len = len(topic.encode())
        limit = self.max_message_size
        entries, sizes, msg_ids = [], [], []
        ids = self.uniq.next_ids(len(msgs))
        for msg, uniq in zip(msgs, ids, strict=True):
            body = msg.body
            if msg.topic != topic:
                raise MessageIllegalError("every message of a batch must have the same topic")
            if not body or not isinstance(body, bytes):
                raise MessageIllegalError("message body must be non-empty bytes")
            if len(body) > limit:
                raise MessageTooLargeError(len(body), limit)
            if msg.delay_level:
                raise MessageIllegalError("delay levels are not supported in batches")
            if msg.tags or msg._keys or msg.properties:  # _keys: None unless keys were set
                msg.validate()
                props = msg.all_properties()
                key = props.setdefault(PropertyKeys.UNIQ_KEY, uniq)  # the caller's, if set
                encoded = encode_properties(props)
            else:  # the common case, without building a dict
                key = uniq
                encoded = b"UNIQ_KEY\x01" + uniq.encode() + b"\x02"
            entries.append((body, msg.flag, encoded))
            sizes.append(record_size(len(body), topic_len, len(encoded)))
            msg_ids.append(key)
        data = encode_batch(entries)
        if len(data) > limit:
            raise MessageTooLargeError(
                len(data), limit, message=f"batch of {len(data)} bytes exceeds {limit}"
            )
        return Encoded(topic, data, msg_ids, sizes, None)

    def gathered(self, topic: str, msgs: Sequence[Message], pre: Sequence[object]) -> Encoded:
        """An auto-batch: ``msgs`` gathered one by one, each already encoded alone
        (``pre``, an ``Encoded``) or plain (encoded here)."""
        if not any(pre):  # every one plain, none encoded yet (Producer.send leaves them)
            encoded = self.plain_list(msgs, topic, self.compress_over)
            if encoded is not None:
                return encoded
        parts: list[bytes] = []
        ids: list[str] = []
        sizes: list[int] = []
        for msg, given in zip(msgs, pre, strict=True):
            one = given if isinstance(given, Encoded) else self.plain_one(msg, msg.body)
            parts.append(one.data)  # type: ignore[arg-type]  # a single message: bytes
            ids.append(one.msg_ids[0])
            sizes.append(one.sizes[0])
        return Encoded(topic, b"".join(parts), ids, sizes, None)

    def scratch(self, size: int) -> Any:
        """This thread's buffer for encoding a batch of ``size`` bytes (a numpy uint8
        array, grown as needed): a sync ``send_batch`` is done with it before the
        thread encodes the next one (see ``Producer.send_batch`` for a hook that sends)."""
        buf = getattr(self._local, "scratch", None)
        if buf is None or len(buf) < size:
            import numpy as np  # noqa: PLC0415

            buf = self._local.scratch = np.empty(max(size, 1 << 20), dtype=np.uint8)
        return buf

    def plain_list(self, msgs: Sequence[Message], topic: str, max_body: int) -> Encoded | None:
        """Messages of ``topic`` that are only a body (bytes, up to ``max_body``) and
        perhaps tags, laid out in one compiled call; None if one is not such a message
        (the per-message path then says what is wrong with it)."""
        global _messages_kernel  # noqa: PLW0603 - loaded once, on first use
        if _messages_kernel is None:
            from connector.protocol.scan import kernels  # noqa: PLC0415 - loads numpy

            _messages_kernel = kernels.encode_messages
        ids = self.uniq.next_block(len(msgs))
        got = _messages_kernel(
            msgs, topic, ids.head.encode(), ids.first, max_body, len(topic.encode())
        )
        if got is None:
            return None
        data, sizes = got
        return Encoded(topic, data, ids, sizes, None)

    def plain_batch(self, msgs: Sequence[Message], topic: str, *, scratch: bool) -> Encoded | None:
        """Messages with a body and perhaps tags, encoded in compiled code (see
        ``connector.protocol.fastbatch``); None sends them down the per-message path."""
        import numpy as np  # noqa: PLC0415 - numpy loads with the first large batch

        from connector.protocol.fastbatch import encode_plain  # noqa: PLC0415

        n = len(msgs)
        bodies = [m.body for m in msgs]
        tags = [m.tags for m in msgs]
        tag_data = tag_off = has_tag = None
        if any(tags):
            try:
                raw = [t.encode() if t else b"" for t in tags]
            except UnicodeEncodeError:  # a lone surrogate: the per-message path says so
                return None
            tag_data = np.frombuffer(b"".join(raw), dtype=np.uint8)
            tag_off = _offsets(np, map(len, raw), n)
            has_tag = np.fromiter(map(bool, raw), dtype=np.bool_, count=n)
        body = np.frombuffer(b"".join(bodies), dtype=np.uint8)
        body_off = _offsets(np, map(len, bodies), n)
        ids = self.uniq.next_block(n)
        limit = self.max_message_size
        batch = encode_plain(
            topic, body, body_off, tag_data, tag_off, has_tag, ids, limit,
            scratch=self.scratch if scratch else None,
        )  # fmt: skip
        if len(batch.data) > limit:
            raise MessageTooLargeError(
                len(batch.data), limit, message=f"batch of {len(batch.data)} bytes exceeds {limit}"
            )
        return Encoded(topic, batch.data, ids, batch.record_sizes, None)


def plain_size(msg: Message) -> int:
    """About what a plain message takes in a batch request: its body, its tags and
    the entry's fixed part with a UNIQ_KEY."""
    tags = msg.tags
    return len(msg.body) + (len(tags) + 6 if tags else 0) + 62


def _plain(msgs: Sequence[Message], topic: str) -> bool:
    """Every message has ``topic``, a bytes body, and nothing but perhaps tags."""
    for m in msgs:
        if (
            m.topic != topic
            or m._keys  # None unless keys were set (reading .keys would make a list)
            or m.properties
            or m.delay_level
            or m.flag
            or type(m.body) is not bytes
        ):
            return False
    return True


def _offsets(np: Any, lengths: Iterable[int], n: int) -> Any:
    """``[0, l0, l0+l1, ...]`` as int64: where each of n pieces starts in their join."""
    out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(lengths, dtype=np.int64, count=n), out=out[1:])
    return out
