"""The client's C kernels and their plain-Python twins give the same results on the same
inputs: pull answers as stored, and corrupted or truncated ones (bad CRCs, lengths that
point outside the answer), where the C code must answer with a status or ValueError."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.protocol import _kernels_py as plain
from connector.protocol.batch import encode_batch
from connector.protocol.message import Message, SysFlag
from connector.protocol.msgid import encode_host
from connector.protocol.properties import encode_properties
from connector.protocol.record import encode_record, record_size
from connector.protocol.scan import COMPILED, index_records
from connector.protocol.scan import kernels as compiled

PROPS = [
    {"UNIQ_KEY": "ID0", "TAGS": "a", "KEYS": "k1 k2"},
    {},
    {"TAGS": "b", "x": "y", "e": ""},
    {"KEYS": "only"},
]


def test_the_client_kernels_are_compiled() -> None:
    assert COMPILED  # `pip install -e .` built connector/protocol/_kernels.c here


def _answer(
    n: int, props: list[dict[str, str]] | None = None, raw_props: bytes | None = None
) -> bytes:
    out = b""
    for i in range(n):
        p = raw_props if raw_props is not None else encode_properties((props or PROPS)[i % 4])
        out += encode_record(
            topic=b"TwinTopic", body=bytes([97 + i % 26]) * (1 + 9 * i), properties=p,
            queue_id=1, queue_offset=500 + i, physical_offset=4096 * i, flag=0,
            born_timestamp=1_700_000_000_000 + i, born_host=encode_host("10.1.1.1", 9),
            store_timestamp=1_700_000_000_100 + i, store_host=encode_host("10.1.1.2", 10911),
        )  # fmt: skip
    return out


def _run(fn: str, make_args: Any) -> tuple[Any, list[Any]]:
    """``fn`` of both modules on fresh copies of the arguments: both must return the
    same, or both raise ValueError; (result, C's arguments after the call). The arrays
    written must be the same too, except after ``fill`` gave up (status >= 0: the
    caller then decodes row by row or raises, and reads none of them)."""
    results = []
    for module in (compiled, plain):
        args = make_args()
        try:
            results.append((getattr(module, fn)(*args), args))
        except ValueError:
            results.append((ValueError, args))
    (c, c_args), (p, p_args) = results
    assert c == p
    if c is not ValueError and not (fn == "fill" and c[0] >= 0):
        for x, y in zip(c_args, p_args, strict=True):
            if isinstance(x, np.ndarray) and x.flags.writeable:
                assert x.tobytes() == y.tobytes(), fn
    return c, c_args


def _walk_args(data: bytes) -> list[Any]:
    return [np.frombuffer(data, np.uint8), np.zeros((7, len(data) // 88 + 1), np.int64)]


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 6),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 120),
)
def test_twins_agree_on_corrupted_and_truncated_answers(
    n: int, flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(_answer(n))
    for at, x in flips:
        data[at % len(data)] ^= x
    del data[len(data) - min(cut, len(data)) :]
    raw = bytes(data)
    (count, _), args = _run("walk", lambda: _walk_args(raw))
    cols = args[1][:, :count]
    starts, body_start, body_len = (np.ascontiguousarray(cols[k]) for k in (0, 2, 3))
    props_start, props_len = np.ascontiguousarray(cols[4]), np.ascontiguousarray(cols[5])
    buf = np.frombuffer(raw, np.uint8)
    _run("check_bodies", lambda: [buf, starts, body_start, body_len, np.zeros(count, np.int64)])
    _run("fields", lambda: [buf, starts, body_start, body_len, np.zeros((count, 3), np.int64),
                            np.zeros((count, 32), np.uint8)])  # fmt: skip
    _run("offset_ids", lambda: [buf, starts, np.zeros((count, 32), np.uint8)])
    _run("rows", lambda: [buf, starts, np.zeros((count, 88), np.uint8)])
    _run("gather", lambda: [buf, body_start, body_len, np.zeros(int(body_len.sum()), np.uint8),
                            np.zeros(count + 1, np.int32)])  # fmt: skip
    names = np.frombuffer(b"TAGSKEYSUNIQ_KEY", np.uint8)
    _run("split_props", lambda: [buf, props_start, props_len, names,
                                 np.array([0, 4, 8, 16], np.int64),
                                 np.zeros((int(props_len.sum()) // 2 + 1, 4), np.int64),
                                 np.zeros(count, np.int64), np.full((count, 3), -1, np.int64),
                                 np.zeros(1, np.int64)])  # fmt: skip
    _run("fill", lambda: _fill_args(raw, args[1], count))


def _fill_args(raw: bytes, cols: np.ndarray, n: int) -> list[Any]:
    props_len = int(cols[5, :n].sum())
    specials = b"UNIQ_KEYTAGSKEYS"
    return [
        np.frombuffer(raw, np.uint8), np.frombuffer(specials, np.uint8),
        np.array([0, 8, 12, 16], np.int64), int(SysFlag.COMPRESSED),
        *(np.ascontiguousarray(cols[k, :n]) for k in (0, 2, 3, 4, 5, 6)), n,
        np.zeros((3, n), np.int64), np.zeros(int(cols[3, :n].sum()), np.uint8),
        np.zeros(n + 1, np.int32), np.zeros((2, props_len), np.uint8),
        np.zeros((2, props_len // 2 + 2), np.int32), np.zeros(n + 1, np.int32),
        np.zeros((3, props_len + 32 * n), np.uint8), np.zeros((3, n + 1), np.int32),
        np.zeros((3, n), np.bool_),
    ]  # fmt: skip


@pytest.mark.parametrize(
    "raw_props",
    [
        b"TAGS\x01t\x02TAGS\x01u\x02",  # a name twice: row by row
        b"\x01v\x02a\x01b\x02",  # a pair without a name: skipped
        b"noseparator\x02k\x01v",  # no \x01, then no final \x02
        b"",
    ],
)
def test_fill_twins_agree_on_unusual_properties(raw_props: bytes) -> None:
    raw = _answer(3, raw_props=raw_props)
    (count, bad), args = _run("walk", lambda: _walk_args(raw))
    assert (count, bad) == (3, -1)
    status, _ = _run("fill", lambda: _fill_args(raw, args[1], count))[0]
    assert status == (0 if raw_props.startswith(b"TAGS") else -1)


def test_a_body_crc_mismatch_is_reported_by_both() -> None:
    raw = bytearray(_answer(3))
    (count, _), args = _run("walk", lambda: _walk_args(bytes(raw)))
    raw[int(args[1][2, 1])] ^= 1  # the second record's body
    data = bytes(raw)
    buf = np.frombuffer(data, np.uint8)
    starts, bs, bl = (np.ascontiguousarray(args[1][k, :count]) for k in (0, 2, 3))
    assert _run("check_bodies", lambda: [buf, starts, bs, bl, np.zeros(3, np.int64)])[0] == 1
    assert _run("fill", lambda: _fill_args(data, args[1], count))[0][0] == 2


def test_positions_outside_the_answer_raise_instead_of_reading() -> None:
    raw = _answer(2)
    buf = np.frombuffer(raw, np.uint8)
    far = np.array([len(raw) - 10], np.int64)
    for module in (compiled, plain):
        with pytest.raises(ValueError, match="out of bounds"):
            module.offset_ids(buf, far, np.zeros((1, 32), np.uint8))
        with pytest.raises(ValueError, match="out of bounds"):
            module.gather(buf, far, np.array([100], np.int64), np.zeros(100, np.uint8),
                          np.zeros(2, np.int32))  # fmt: skip
        with pytest.raises(ValueError, match="out of bounds"):
            module.check_bodies(buf, np.array([0], np.int64), np.array([88], np.int64),
                                np.array([len(raw)], np.int64), np.zeros(1, np.int64))  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    bodies=st.lists(st.binary(min_size=1, max_size=300), min_size=0, max_size=8),
    tags=st.lists(st.one_of(st.none(), st.text(min_size=1, max_size=5)), min_size=8, max_size=8),
    id_first=st.integers(-1, 70_000),
)
def test_encode_plain_twins_write_the_same_batch(
    bodies: list[bytes], tags: list[str | None], id_first: int
) -> None:
    n = len(bodies)
    body = np.frombuffer(b"".join(bodies) or b"\0", np.uint8)
    off = np.cumsum([0] + [len(b) for b in bodies]).astype(np.int64)
    tag_bytes = [(t or "").replace("\x01", "").replace("\x02", "").encode() for t in tags[:n]]
    tag_data = np.frombuffer(b"".join(tag_bytes) or b"\0", np.uint8)
    tag_off = np.cumsum([0] + [len(t) for t in tag_bytes]).astype(np.int64)
    has = np.array([t is not None for t in tags[:n]], np.bool_)
    ids = b"0123456789ABCDEF0123456789AB" if id_first >= 0 else b"F" * 32 * n
    size = int(
        sum(len(b) + 22 + 9 + 33 + 6 + len(t) for b, t in zip(bodies, tag_bytes, strict=True))
    )

    def args() -> list[Any]:
        return [body, off, np.frombuffer(ids or b"\0", np.uint8), id_first, tag_data, tag_off,
                has, np.frombuffer(b"UNIQ_KEY\x01", np.uint8), np.frombuffer(b"TAGS\x01", np.uint8),
                0xDAA320A7, np.zeros(size, np.uint8)]  # fmt: skip

    assert _run("encode_plain", args)[0] is None


def test_twins_index_the_same_as_the_decoder() -> None:
    raw = _answer(5)
    index = index_records(raw)  # the loaded implementation, C here
    (count, bad), args = _run("walk", lambda: _walk_args(raw))
    assert (count, bad) == (5, -1)
    assert args[1][0, :5].tolist() == index.start.tolist()
    assert index.start.flags.c_contiguous  # the columns are rows of one array


def test_bad_argument_types_are_refused() -> None:
    with pytest.raises(TypeError):
        compiled.walk(np.zeros(10, np.uint8), np.zeros((7, 2), np.float64))
    with pytest.raises(ValueError, match="7 rows"):
        compiled.walk(np.zeros(10, np.uint8), np.zeros((6, 2), np.int64))
    with pytest.raises(TypeError):
        compiled.walk(np.zeros(10, np.uint8))
    module: ModuleType = compiled
    with pytest.raises(TypeError):
        module.offset_ids(
            np.zeros(100, np.uint8), np.zeros(4, np.int64)[::2], np.zeros((2, 32), np.uint8)
        )


def _message(
    topic: str, body: Any, tags: str | None, keys: str | None, flag: int, props: dict[str, str]
) -> Any:
    m = Message(topic=topic, body=b"x", tags=tags, keys=keys, flag=flag, properties=props)
    m.body = body  # as a caller may set it: any bytes, even empty, or not bytes at all
    return m


MESSAGE = st.builds(
    _message,
    st.sampled_from(["T", "T", "T", "U"]),
    st.one_of(st.binary(min_size=0, max_size=40), st.just(bytearray(b"ba"))),
    st.one_of(st.none(), st.sampled_from(["", "tg", "t\x01", "\ud800", "é" * 3])),
    st.sampled_from([None, None, None, "k"]),
    st.sampled_from([0, 0, 0, 3]),
    st.sampled_from([{}, {}, {}, {"p": "v"}]),
)


@settings(max_examples=300, deadline=None)
@given(msgs=st.lists(MESSAGE, max_size=12), first=st.integers(0, 0xFFFF))
def test_encode_messages_twins_lay_out_plain_messages_as_the_per_message_path(
    msgs: list[Any], first: int
) -> None:
    """Both say None for the same lists (a message that is not only a body of bytes
    under the limit and text tags); otherwise the same bytes and record sizes, which
    are the per-message encoding's (TAGS, then UNIQ_KEY) with these ids."""
    head = b"0A0B0C0D0E0F1011121314151617"
    c = compiled.encode_messages(msgs, "T", head, first, 30, 1)
    assert c == plain.encode_messages(msgs, "T", head, first, 30, 1)
    plain_ones = all(
        m.topic == "T" and type(m.body) is bytes and 0 < len(m.body) <= 30
        and not (m._keys or m.properties or m.flag or m.delay_level)
        and (not m.tags or ("\x01" not in m.tags and "\ud800" not in m.tags))
        for m in msgs
    )  # fmt: skip
    if not plain_ones:
        assert c is None
        return
    assert c is not None
    entries, sizes = [], []
    for i, m in enumerate(msgs):
        uniq = head.decode() + f"{(first + i) & 0xFFFF:04X}"
        props = (f"TAGS\x01{m.tags}\x02" if m.tags else "") + f"UNIQ_KEY\x01{uniq}\x02"
        entries.append((m.body, 0, props.encode()))
        sizes.append(record_size(len(m.body), 1, len(props.encode())))
    assert c == (encode_batch(entries), sizes)


def test_encode_messages_refuses_what_is_not_a_list_of_messages() -> None:
    for module in (compiled, plain):
        with pytest.raises(TypeError):
            module.encode_messages([], "T", b"short", 0, 10, 1)
        with pytest.raises(TypeError):
            module.encode_messages(None, "T", b"0" * 28, 0, 10, 1)
        with pytest.raises(AttributeError):
            module.encode_messages([object()], "T", b"0" * 28, 0, 10, 1)
