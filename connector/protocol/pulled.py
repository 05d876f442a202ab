"""The messages of a pull answer, checked at once and decoded field by field on use.

``decode_record`` builds every field of every message in Python: about 13 us
a message, most of it for fields a consumer never reads. ``decode_records``
checks a whole answer in compiled code instead (structure and body CRCs,
like ``decode_record``: a bad record raises ``CorruptRecordError`` here, not
later), cuts the bodies, and returns ``PulledMessage`` objects:
``MessageExt`` whose other fields are computed the first time they are read,
then kept. The first read of a header field or offset msgId decodes that
column for the whole answer at once; an answer whose consumer reads only
bodies never decodes them (at 10,000 messages a pull that was ~200 ns a
message of the ~800 ``decode_records`` took). Compressed bodies are
inflated at once, so a body that does not inflate is also reported here.

A ``PulledMessage`` keeps the whole answer's bytes alive; copy what you keep
for long (``bytes(msg.body)`` is already a copy of its own). It is made
outside the cyclic garbage collector's lists (``connector.protocol.untracked``):
nothing it holds can refer back to it, and an attribute its reader sets on it
puts it back.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from itertools import repeat
from operator import attrgetter, is_
from typing import Any

import numpy as np

from connector.errors import CorruptRecordError
from connector.protocol.compression import decompress as inflate
from connector.protocol.message import MessageExt, SysFlag
from connector.protocol.msgid import decode_host
from connector.protocol.properties import decode_properties
from connector.protocol.record import MAX_INFLATED_BYTES
from connector.protocol.scan import check_bodies, headers, index_records, offset_ids
from connector.protocol.untracked import pulled_messages, track

__all__ = ["PulledMessage", "decode_records", "queue_offsets"]

# the record header through BODYLEN (see connector.protocol.record.HEADER), big-endian
_HEADER = np.dtype(
    [
        ("total", ">i4"),
        ("magic", ">u4"),
        ("crc", ">i4"),
        ("queue_id", ">i4"),
        ("flag", ">i4"),
        ("queue_offset", ">i8"),
        ("commit_log_offset", ">i8"),
        ("sys_flag", ">i4"),
        ("born_timestamp", ">i8"),
        ("born_host", "V8"),
        ("store_timestamp", ">i8"),
        ("store_host", "V8"),
        ("reconsume_times", ">i4"),
        ("prepared_transaction_offset", ">i8"),
        ("body_len", ">i4"),
    ]
)


_FEW = 64  # records in an answer below which a Python loop beats a numpy call


class _Answer:
    """One pull answer, shared by its messages. Only what every consumer needs is
    made up front (the checks, where the bodies are); the header columns, the
    offset msgIds and where the properties are come the first time a message
    asks for them, each turned into a Python list once."""

    __slots__ = (
        "_header", "_ids", "_lists", "_props", "bodies", "body_end", "body_start", "data",
        "props_at", "starts", "topics",
    )  # fmt: skip

    def __init__(self, data: bytes, *, check_crc: bool) -> None:
        data = bytes(data)
        index = index_records(data)
        sys_flag, bad = check_bodies(data, index.start, index.body_start, index.body_len)
        if check_crc and bad >= 0:
            raise CorruptRecordError("body CRC mismatch", position=int(index.start[bad]))
        self.data = data
        # the index's columns are views of one array sized for the most records the
        # bytes could hold; keep copies of the three read later, not that array
        self.starts = index.start.copy()
        self.props_at = (index.props_start.copy(), index.props_len.copy())
        self.body_start = index.body_start.tolist()
        self.body_end = (index.body_start + index.body_len).tolist()
        self._header: np.ndarray | None = None
        self._ids: str | None = None
        self._props: tuple[list[int], list[int]] | None = None
        # the walk found every record's queue offset (the push consumer reads them all)
        self._lists: dict[str, list[Any]] = {"queue_offset": index.queue_offset.tolist()}
        self.topics: dict[bytes, str] = {}
        self.bodies: dict[int, bytes] = {}  # inflated bodies, by record
        if len(sys_flag) <= _FEW:  # a list beats numpy's fixed costs
            flags = sys_flag.tolist()
            compressed = [i for i, f in enumerate(flags) if f & SysFlag.COMPRESSED]
        else:
            compressed = np.flatnonzero(sys_flag & SysFlag.COMPRESSED).tolist()
        for i in compressed:
            start = self.body_start[i]
            try:
                body = data[start : self.body_end[i]]
                self.bodies[i] = inflate(body, int(sys_flag[i]), limit=MAX_INFLATED_BYTES)
            except ValueError as exc:
                raise CorruptRecordError(
                    f"compressed body does not inflate: {exc}", position=int(index.start[i])
                ) from exc

    def __len__(self) -> int:
        return len(self.body_start)

    @property
    def ids(self) -> str:
        """The offset msgIds of all records, 32 hex digits each."""
        if self._ids is None:
            self._ids = offset_ids(self.data, self.starts)
        return self._ids

    @property
    def props(self) -> tuple[list[int], list[int]]:
        """Where each record's properties start, and their lengths."""
        if self._props is None:
            self._props = (self.props_at[0].tolist(), self.props_at[1].tolist())
        return self._props

    def column(self, name: str) -> list[Any]:
        values = self._lists.get(name)
        if values is None:
            if self._header is None:
                self._header = headers(self.data, self.starts).view(_HEADER)[:, 0]
            values = self._lists[name] = self._header[name].tolist()
        return values


def _header_field(name: str) -> Callable[[PulledMessage], Any]:
    def compute(msg: PulledMessage) -> Any:
        return msg._answer.column(name)[msg._i]

    return compute


def _topic(msg: PulledMessage) -> str:
    a, i = msg._answer, msg._i
    at = a.body_end[i]
    raw = a.data[at + 1 : at + 1 + a.data[at]]
    topic = a.topics.get(raw)
    if topic is None:
        topic = a.topics[raw] = raw.decode("utf-8", errors="replace")
    return topic


def _properties(msg: PulledMessage) -> dict[str, str]:
    starts, lens = msg._answer.props
    start = starts[msg._i]
    return decode_properties(msg._answer.data[start : start + lens[msg._i]])


def _host(name: str) -> Callable[[PulledMessage], str]:
    def compute(msg: PulledMessage) -> str:
        return decode_host(msg._answer.column(name)[msg._i])

    return compute


def _offset_msg_id(msg: PulledMessage) -> str:
    return msg._answer.ids[32 * msg._i : 32 * msg._i + 32]


_COMPUTE: dict[str, Callable[[PulledMessage], Any]] = {
    "topic": _topic,
    "properties": _properties,
    "born_host": _host("born_host"),
    "store_host": _host("store_host"),
    "offset_msg_id": _offset_msg_id,
    "body_crc": _header_field("crc"),
    "store_size": _header_field("total"),
    **{
        name: _header_field(name)
        for name in (
            "queue_id",
            "queue_offset",
            "commit_log_offset",
            "flag",
            "sys_flag",
            "born_timestamp",
            "store_timestamp",
            "reconsume_times",
            "prepared_transaction_offset",
        )
    },
}


class _Lazy:
    """A field decoded from the answer the first time it is read, then kept in the
    message's ``__dict__``, where later reads find it before this descriptor (it has
    no ``__set__``: a value the caller sets goes there too)."""

    __slots__ = ("compute", "name")

    def __init__(self, name: str, compute: Callable[[PulledMessage], Any]) -> None:
        self.name = name
        self.compute = compute

    def __get__(self, msg: PulledMessage | None, owner: type | None = None) -> Any:
        if msg is None:
            return self
        value = self.compute(msg)
        msg.__dict__[self.name] = value
        return value


class PulledMessage(MessageExt):
    """A ``MessageExt`` of a pull answer; equal to the ``decode_record`` of its record.

    It holds its answer, its place in it and its body (every reader reads it);
    the other fields are ``_Lazy``. ``decode_records`` makes it without
    ``__init__`` and untracked; whatever its reader sets on it may refer back
    to it, so a set makes it tracked first."""

    __slots__ = ("_answer", "_i", "body")

    _answer: _Answer
    _i: int

    def __init__(self, answer: _Answer, i: int, body: bytes) -> None:
        _set(self, "_answer", answer)
        _set(self, "_i", i)
        _set(self, "body", body)

    def __setattr__(self, name: str, value: Any) -> None:
        track(self)
        _set(self, name, value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageExt):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable, as MessageExt

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickles as a plain MessageExt (the answer's bytes stay behind)."""
        return (MessageExt, tuple(getattr(self, f) for f in _FIELDS))


_set = object.__setattr__
_FIELDS = tuple(MessageExt.__dataclass_fields__)
assert set(_FIELDS) == {*_COMPUTE, "body"}, "every MessageExt field needs a decoder here"
for _name, _compute in _COMPUTE.items():
    setattr(PulledMessage, _name, _Lazy(_name, _compute))


def decode_records(data: bytes, *, check_crc: bool = True) -> list[MessageExt]:
    """Every record of ``data`` (records back to back, as a pull answers them);
    ``CorruptRecordError`` if any is not a valid record."""
    if not data:
        return []
    answer = _Answer(data, check_crc=check_crc)
    with _no_collection():  # each body cut out of the bytes (or inflated) as it is made
        return pulled_messages(
            PulledMessage, answer, answer.data, answer.body_start, answer.body_end, answer.bodies
        )


_answer_of = attrgetter("_answer")


def queue_offsets(msgs: list[MessageExt]) -> list[int]:
    """The queue offsets of ``msgs``, fresh from ``decode_records`` (none set since),
    all of one answer in its order: read from its decoded column, not a message at
    a time (each message's first read of ``queue_offset`` goes through its ``_Lazy``
    and gives it a ``__dict__``: ~0.4 us). Other lists: read a message at a time."""
    first = msgs[0] if msgs else None
    if type(first) is PulledMessage:
        answer = first._answer
        try:  # every message of that answer, checked in C
            same = len(msgs) == len(answer) and all(map(is_, map(_answer_of, msgs), repeat(answer)))
        except AttributeError:  # a message of another kind among them
            same = False
        if same:
            return answer.column("queue_offset")
    return [m.queue_offset for m in msgs]


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """No garbage collection while an answer's messages are made.

    Without the C module (``connector.protocol.untracked``) each message is an
    object the collector tracks; made by the thousand, they set off a
    collection every 700, and those still alive (all of them, until the list
    is done) are moved to older generations, until a full collection scans the
    whole heap (tens of ms in a large process): 35-40 % of a 10,000-message pull
    went to the collector. Held back for the loop, the first collection after
    it finds the new list once. Nothing is leaked: messages hold no cycles the
    loop makes, and the counts that trigger collections keep running. Left
    alone if the application turned the collector off itself. (With the C
    module the messages are made untracked, and this only saves collections
    that would find none of them.)
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
