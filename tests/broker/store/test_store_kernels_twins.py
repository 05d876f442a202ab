"""The store's C kernels and their plain-Python twins give the same results on the same
inputs: good batches and records, and corrupted, truncated or random bytes (where the C
code must stop with a status, never read outside the buffer)."""

from __future__ import annotations

import itertools
import mmap
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.store import _kernels_py as plain
from broker.store import kernels
from broker.store.consume_queue import CQ_DTYPE
from connector.protocol.batch import encode_batch
from connector.protocol.msgid import encode_host
from connector.protocol.properties import encode_properties
from connector.protocol.record import encode_record

compiled: ModuleType = kernels._kernels
TOPIC = "Twin_Topic"
PREFIX = zlib.crc32(f"{TOPIC}#".encode())


def test_the_store_kernels_are_compiled() -> None:
    assert kernels.COMPILED  # `pip install -e .` built broker/store/_kernels.c here


def _both(fn: str, make_args: Any) -> tuple[Any, Any, list[Any], list[Any]]:
    """Run kernel ``fn`` of both modules on fresh copies of the same arguments; (results,
    argument lists after the calls) for the C module and the twin."""
    c_args, p_args = make_args(), make_args()
    return getattr(compiled, fn)(*c_args), getattr(plain, fn)(*p_args), c_args, p_args


def _same_arrays(a: list[Any], b: list[Any]) -> None:
    for x, y in zip(a, b, strict=True):
        if isinstance(x, np.ndarray):
            assert x.tobytes() == y.tobytes()


def _scan_batch_args(data: bytes, max_count: int = 1 << 20) -> list[Any]:
    buf = np.frombuffer(data, dtype=np.uint8)
    cap = len(data) // 23 + 1
    cols = [np.zeros(cap, np.int64) for _ in range(6)]
    keys = [np.zeros(len(data) // 2 + 1, np.int64) for _ in range(2)]
    return [buf, 4096, max_count, PREFIX, *cols, *keys]


def _batch(bodies: list[bytes], props: list[dict[str, str]]) -> bytes:
    return encode_batch(
        [(b, i, encode_properties(p)) for i, (b, p) in enumerate(zip(bodies, props, strict=True))]
    )


PROPS = [
    {},
    {"TAGS": "tag-a", "KEYS": "k1 k2  k3", "UNIQ_KEY": "U1"},
    {"TAGS": "\u00e9t\u00e9 \U0001f600", "DELAY": "3"},
    {"a": "b", "KEYS": " "},
]


@settings(max_examples=150, deadline=None)
@given(
    bodies=st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=6),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 40),
)
def test_scan_batch_twins_agree_on_good_and_corrupted_batches(
    bodies: list[bytes], flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(_batch(bodies, [PROPS[i % len(PROPS)] for i in range(len(bodies))]))
    for at, x in flips:  # corrupted bytes anywhere: lengths, magic, CRCs, properties
        data[at % len(data)] ^= x
    if cut:
        del data[-cut:]  # truncated
    c, p, c_args, p_args = _both("scan_batch", lambda: _scan_batch_args(bytes(data)))
    assert c == p
    status, n, nkeys, _ = c
    if status == 0:
        for x, y in zip(c_args[4:10], p_args[4:10], strict=True):
            assert x[:n].tolist() == y[:n].tolist()
    for x, y in zip(c_args[10:], p_args[10:], strict=True):
        assert x[:nkeys].tolist() == y[:nkeys].tolist()


def test_scan_batch_refuses_arrays_that_are_too_small() -> None:
    data = _batch([b"x"], [{"KEYS": "a b c d"}])
    args = _scan_batch_args(data)
    args[10] = np.zeros(2, np.int64)  # room for 2 of the 4 keys
    for module in (compiled, plain):
        with pytest.raises(ValueError, match="out of bounds"):
            module.scan_batch(*args)
    with pytest.raises(TypeError):
        compiled.scan_batch(*args[:4], *[np.zeros(8, np.float64)] * 6, *args[10:])


def _records(n: int, first: int = 0, props: list[dict[str, str]] | None = None) -> bytes:
    out = b""
    for i in range(n):
        p = (props or PROPS)[i % len(props or PROPS)]
        out += encode_record(
            topic=TOPIC.encode(), body=bytes([i]) * (10 + 7 * i), properties=encode_properties(p),
            queue_id=i % 3, queue_offset=100 + i, physical_offset=first + len(out), flag=i,
            born_timestamp=1_700_000_000_000 + i, born_host=encode_host("10.0.0.1", 4000 + i),
            store_timestamp=1_700_000_000_500 + i, store_host=encode_host("10.0.0.2", 10911),
        )  # fmt: skip
    return out


def _scan_log_args(buf: Any, pos: int, base: int, chunk: int = 16) -> list[Any]:
    cols = np.zeros((9, chunk), np.int64)
    keys = np.zeros((2, 16_400 + chunk * 4), np.int64)
    return [buf, pos, base, True, *cols, *keys]


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 8),
    flips=st.lists(st.tuples(st.integers(0, 100_000), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 600),
    tail=st.sampled_from([b"", bytes(64), b"\xff" * 13]),
)
def test_scan_log_twins_agree_on_corrupted_and_truncated_segments(
    n: int, flips: list[tuple[int, int]], cut: int, tail: bytes
) -> None:
    data = bytearray(_records(n, first=1 << 20) + tail)
    for at, x in flips:
        data[at % len(data)] ^= x
    del data[len(data) - min(cut, len(data) - 1) :]
    raw = bytes(data)
    c, p, c_args, p_args = _both(
        "scan_log", lambda: _scan_log_args(np.frombuffer(raw, np.uint8), 0, 1 << 20)
    )
    assert c == p
    _, got, _, nkeys = c
    for x, y in zip(c_args[4:13], p_args[4:13], strict=True):
        assert x[:got].tolist() == y[:got].tolist()
    for x, y in zip(c_args[13:], p_args[13:], strict=True):
        assert x[:nkeys].tolist() == y[:nkeys].tolist()


def test_scan_log_of_a_corrupted_mapped_segment_file(tmp_path: Path) -> None:
    """The recovery scan over a real mmap'd segment whose records were garbled and whose
    file was cut short: both implementations stop at the same record, with a status."""
    good = _records(12)
    segment = tmp_path / "00000000000000000000"
    garbled = bytearray(good)
    third = len(_records(3))
    garbled[third + 84 : third + 88] = b"\x7f\xff\xff\xf0"  # record 3's BODYLEN: huge
    segment.write_bytes(bytes(garbled[: len(garbled) - 5]))  # and the last record torn
    with segment.open("r+b") as f, mmap.mmap(f.fileno(), 0) as mapped:
        view = np.frombuffer(mapped, dtype=np.uint8)
        try:
            c = compiled.scan_log(*_scan_log_args(view, 0, 0))
            p = plain.scan_log(*_scan_log_args(view, 0, 0))
            assert c == p
            assert c[:3] == (7, 3, third)  # "body length out of range" at record 3
            # from every position, not only record starts: a status, never a crash
            for pos in range(0, len(view) + 3, 7):
                assert compiled.scan_log(*_scan_log_args(view, pos, 0)) == plain.scan_log(
                    *_scan_log_args(view, pos, 0)
                )
        finally:
            del view


@settings(max_examples=200, deadline=None)
@given(
    starts=st.lists(st.integers(-5, 900), min_size=1, max_size=6),
    sizes=st.lists(st.integers(-5, 400), min_size=6, max_size=6),
    flip=st.tuples(st.integers(0, 10_000), st.integers(1, 255)),
)
def test_check_records_twins_agree_on_any_positions(
    starts: list[int], sizes: list[int], flip: tuple[int, int]
) -> None:
    data = bytearray(_records(4))
    data[flip[0] % len(data)] ^= flip[1]
    raw = np.frombuffer(bytes(data), np.uint8)

    def args() -> list[Any]:
        k = len(starts)
        return [raw, np.array(starts, np.int64), np.array(sizes[:k], np.int64),
                np.zeros(k, np.int64), np.zeros(k, np.int64)]  # fmt: skip

    c, p, c_args, p_args = _both("check_records", args)
    assert c == p
    _same_arrays(c_args[3:] if c < 0 else [], p_args[3:] if c < 0 else [])


def test_encode_twins_write_the_same_records() -> None:
    wire = [(bytes([65 + i]) * (5 + i), i, encode_properties(PROPS[i % 4])) for i in range(9)]
    data = encode_batch(wire)
    scanned, reason = kernels.scan_batch(data, topic=TOPIC, max_message_size=4096)
    assert scanned is not None, reason
    n = scanned.count
    topic = np.frombuffer(TOPIC.encode(), np.uint8)
    template = np.arange(88, dtype=np.uint8)
    sizes = scanned.body_lens + scanned.props_lens + 91 + len(topic)
    rel = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)

    def batch_args() -> list[Any]:
        return [scanned.data, scanned.starts, scanned.body_lens, scanned.props_lens,
                scanned.flags, scanned.crcs, scanned.tags_codes, 2, n - 2, rel,
                np.zeros(int(sizes.sum()) + 10, np.uint8), template, topic, 77, 5000,
                np.zeros(n, np.int64), np.zeros(n, np.int64),
                np.zeros((n - 2) * 20, np.uint8)]  # fmt: skip

    c, p, c_args, p_args = _both("encode_batch_records", batch_args)
    assert c is None and p is None
    _same_arrays(c_args, p_args)
    bad = batch_args()
    bad[9] = rel + 1_000_000  # positions past the end of dst
    for module in (compiled, plain):
        with pytest.raises(ValueError, match="out of bounds"):
            module.encode_batch_records(*bad)

    # singles: two topics, three queues, a segment that takes only some of them
    bodies = [bytes([i]) * (3 + i) for i in range(7)]
    props = [encode_properties(PROPS[i % 4]) for i in range(7)]
    topics_raw = [TOPIC.encode(), b"Other"]
    src = b"".join(bodies) + b"".join(props) + b"".join(topics_raw)
    table = np.zeros((7, kernels.SINGLE_COLUMNS), np.int64)
    table[:, kernels.S_QUEUE_ID] = [i % 3 for i in range(7)]
    table[:, kernels.S_FLAG] = range(7)
    table[:, kernels.S_BORN_TS] = 1_700_000_000_000
    table[:, kernels.S_TAGS_CODE] = range(-3, 4)
    table[:, kernels.S_BODY_LEN] = [len(b) for b in bodies]
    table[:, kernels.S_PROPS_LEN] = [len(p) for p in props]
    table[:, kernels.S_TOPIC] = [i % 2 for i in range(7)]
    table[:, kernels.S_SLOT] = [i % 3 for i in range(7)]
    at = len(src) - sum(map(len, topics_raw))
    topics = np.array([[at, len(topics_raw[0]), zlib.crc32(topics_raw[0] + b"#")],
                       [at + len(topics_raw[0]), 5, zlib.crc32(b"Other#")]], np.int64)  # fmt: skip

    def single_args(first: int, limit: int) -> list[Any]:
        slots = np.array([[10, 0, 0], [20, 0, 0], [30, 0, 0]], np.int64)
        return [np.frombuffer(src, np.uint8), table, topics, slots, first,
                np.zeros(2048, np.uint8), 16, limit, 1 << 30, 123, 456,
                np.zeros((7, 3), np.int64), np.zeros(7 * 20, np.uint8),
                np.zeros((len(src) // 2 + 1, 2), np.int64), 0]  # fmt: skip

    for first, limit in [(0, 2048), (0, 700), (3, 2048), (7, 2048)]:
        c, p, c_args, p_args = _both(
            "encode_single_records", lambda f=first, lim=limit: single_args(f, lim)
        )
        assert c == p
        _same_arrays(c_args, p_args)


def test_index_insert_twins_thread_the_same_chains() -> None:
    slot_num, count = 16, 1
    rng = np.random.default_rng(7)
    hashes = rng.integers(0, 2**31, 40).astype(np.int64)
    offsets = rng.integers(0, 2**40, 40).astype(np.int64)
    diffs = rng.integers(0, 2**20, 40).astype(np.int64)

    def args() -> list[Any]:
        buf = np.zeros(40 + slot_num * 4 + 64 * 20, np.uint8)
        buf[40 + 4 * 3 : 40 + 4 * 4] = [0, 0, 0, 99]  # a slot left pointing past the entries
        return [buf, slot_num, count, 0, hashes, offsets, diffs]

    c, p, c_args, p_args = _both("index_insert", args)
    assert c == p == (41, 15)  # the stale slot was already counted as used
    _same_arrays(c_args, p_args)
    full = args()
    full[2] = 63  # room for one more entry only
    for module in (compiled, plain):
        with pytest.raises(ValueError, match="index file full"):
            module.index_insert(*full)


def _group_args(names: list[bytes], qids: list[int], qoffs: list[int], cap: int) -> list[Any]:
    """group_queues' arguments for records of the given topics, queues and queue offsets
    (topic crcs all alike, so that only the names' bytes tell topics apart)."""
    raw = b"".join(names)
    at = np.cumsum([0] + [len(x) for x in names])[:-1]
    n = len(names)
    cols = [
        at.astype(np.int64), np.array([len(x) for x in names], np.int64),
        np.full(n, 12345, np.int64), np.array(qids, np.int64), np.array(qoffs, np.int64),
        np.arange(n, dtype=np.int64) * 1000 + 7, np.arange(n, dtype=np.int64) + 90,
        np.arange(n, dtype=np.int64) * -3,
    ]  # fmt: skip
    return [np.frombuffer(raw, np.uint8), n, *cols, np.zeros((cap, 4), np.int64),
            np.zeros(n * 20, np.uint8)]  # fmt: skip


NAMES = st.sampled_from([b"T", b"U", b"TT", b"T_1"])


@settings(max_examples=200, deadline=None)
@given(
    records=st.lists(st.tuples(NAMES, st.integers(-1, 2), st.integers(0, 3)), max_size=40),
    cap=st.integers(1, 6),
)
def test_group_queues_twins_group_the_same_entries(
    records: list[tuple[bytes, int, int]], cap: int
) -> None:
    names = [t for t, _, _ in records]
    qids = [q for _, q, _ in records]
    nxt: dict[tuple[bytes, int], int] = {}
    qoffs = []
    for t, q, skip in records:  # mostly rising by one a queue, sometimes not
        qoffs.append(nxt.get((t, q), 50) + (skip == 3))
        nxt[(t, q)] = qoffs[-1] + 1
    c, p, c_args, p_args = _both("group_queues", lambda: _group_args(names, qids, qoffs, cap))
    assert c == p
    queues = list(dict.fromkeys(zip(names, qids, strict=True)))
    if len(queues) > cap:
        assert c == -1
        return
    assert c == len(queues)
    _same_arrays(c_args, p_args)
    groups, entries = c_args[10][:c].tolist(), c_args[11].view(CQ_DTYPE)
    at = 0
    for (first, count, qoff, rising), queue in zip(groups, queues, strict=True):
        rows = [i for i, k in enumerate(zip(names, qids, strict=True)) if k == queue]
        assert (first, count, qoff) == (rows[0], len(rows), qoffs[rows[0]])
        assert rising == all(qoffs[b] == qoffs[a] + 1 for a, b in itertools.pairwise(rows))
        got = entries[at : at + count]
        assert got["offset"].tolist() == [i * 1000 + 7 for i in rows]
        assert got["size"].tolist() == [i + 90 for i in rows]
        assert got["tags_code"].tolist() == [i * -3 for i in rows]
        at += count


def test_group_queues_refuses_names_outside_the_buffer() -> None:
    args = _group_args([b"T", b"U"], [0, 0], [1, 1], 4)
    args[2] = np.array([0, 5], np.int64)  # the second name would start past the buffer
    for module in (compiled, plain):
        with pytest.raises(ValueError, match="out of bounds"):
            module.group_queues(*args)
    args = _group_args([b"T"], [0], [1], 4)
    args[1] = 2  # more records than the columns have
    for module in (compiled, plain):
        with pytest.raises(ValueError, match="out of bounds"):
            module.group_queues(*args)
