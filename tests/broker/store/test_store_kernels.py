"""The compiled batch kernels agree with the plain-Python codecs they replace."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.store.index import key_hash
from broker.store.kernels import (
    LOG_END_OF_DATA,
    LOG_SEGMENT_END,
    encode_batch_records,
    scan_batch,
    scan_log,
)
from connector.errors import CorruptRecordError, MessageIllegalError
from connector.protocol.batch import decode_batch, encode_batch
from connector.protocol.hashing import tags_code
from connector.protocol.msgid import encode_host
from connector.protocol.properties import encode_properties, properties_well_formed
from connector.protocol.record import HEADER, MESSAGE_MAGIC_CODE, check_record, encode_record

TOPIC = "Kernel_Topic-1"
text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02 "),
    min_size=1,
    max_size=12,
)
entry = st.tuples(
    st.binary(min_size=1, max_size=300),
    st.integers(-(2**31), 2**31 - 1),
    st.dictionaries(text, text, max_size=3),
    st.one_of(st.none(), text),
    st.lists(text, max_size=3),
    st.one_of(st.none(), text),
)


def _props(user: dict[str, str], tags: str | None, keys: list[str], uniq: str | None) -> bytes:
    # user properties never carry the system names here; those come from the other arguments
    props = {k: v for k, v in user.items() if k not in ("TAGS", "KEYS", "UNIQ_KEY")}
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = " ".join(keys)
    if uniq:
        props["UNIQ_KEY"] = uniq
    return encode_properties(props)


@settings(max_examples=60, deadline=None)
@given(entries=st.lists(entry, min_size=1, max_size=25), first=st.integers(0, 2**40))
def test_scan_and_encode_match_the_reference_codec(
    entries: list[tuple[bytes, int, dict[str, str], str | None, list[str], str | None]],
    first: int,
) -> None:
    wire = [(b, f, _props(u, t, k, q)) for b, f, u, t, k, q in entries]
    data = encode_batch(wire)
    scanned, reason = scan_batch(data, topic=TOPIC, max_message_size=4096)
    assert scanned is not None, reason
    ref = decode_batch(data, max_message_size=4096)
    assert scanned.count == len(ref)
    assert scanned.flags.tolist() == ref.flags
    assert scanned.crcs.tolist() == [zlib.crc32(b) & 0x7FFFFFFF for b in ref.bodies]
    assert scanned.tags_codes.tolist() == [tags_code(t) for *_, t, _, _ in entries]
    want_keys = []
    for i, (*_, _t, keys, uniq) in enumerate(entries):
        want_keys += [(key_hash(f"{TOPIC}#{k}"), i) for k in keys]
        if uniq:
            want_keys.append((key_hash(f"{TOPIC}#{uniq}"), i))
    got_keys = list(zip(scanned.key_hashes.tolist(), scanned.key_msgs.tolist(), strict=True))
    assert sorted(got_keys) == sorted(want_keys)

    topic = np.frombuffer(TOPIC.encode(), dtype=np.uint8)
    born, store = encode_host("1.2.3.4", 5), encode_host("5.6.7.8", 10911)
    template = np.frombuffer(
        HEADER.pack(0, MESSAGE_MAGIC_CODE, 0, 7, 0, 0, 0, 2, 111, born, 222, store, 0, 0, 0),
        dtype=np.uint8,
    )
    n = scanned.count
    dst = np.zeros(sum(150 + len(b) + len(p) for b, _, p in wire), dtype=np.uint8)
    offsets, sizes = np.empty(n, np.int64), np.empty(n, np.int64)
    cq = np.empty(n * 20, np.uint8)
    sizes_in = scanned.body_lens + scanned.props_lens + 91 + len(topic)
    rel = np.concatenate(([0], np.cumsum(sizes_in)[:-1])).astype(np.int64)
    written = int(sizes_in.sum())
    encode_batch_records(
        scanned.data, scanned.starts, scanned.body_lens, scanned.props_lens, scanned.flags,
        scanned.crcs, scanned.tags_codes, 0, n, rel, dst, template, topic, 1000, first,
        offsets, sizes, cq,
    )  # fmt: skip
    want = []
    pos = first
    for i, (body, flag, props) in enumerate(wire):
        rec = encode_record(
            topic=TOPIC.encode(), body=body, properties=props, queue_id=7,
            queue_offset=1000 + i, physical_offset=pos, flag=flag, sys_flag=2,
            born_timestamp=111, born_host=born, store_timestamp=222, store_host=store,
        )  # fmt: skip
        assert struct.unpack(">qiq", cq[i * 20 : i * 20 + 20].tobytes()) == (
            pos, len(rec), scanned.tags_codes[i],
        )  # fmt: skip
        want.append(rec)
        pos += len(rec)
    assert dst[:written].tobytes() == b"".join(want)

    # recovery's scanner reads the same records back with the same tag codes and key hashes
    cols = np.zeros((9, n + 1), dtype=np.int64)
    keys = np.zeros((2, 16_400), dtype=np.int64)
    status, got, end, nkeys = scan_log(dst[:written], 0, first, True, *cols, *keys)
    assert (status, got, end) == (LOG_SEGMENT_END, n, written)
    assert cols[0, :n].tolist() == offsets.tolist()  # commit log offsets
    assert cols[3, :n].tolist() == list(range(1000, 1000 + n))  # queue offsets
    assert cols[8, :n].tolist() == scanned.tags_codes.tolist()
    assert keys[0, :nkeys].tolist() == scanned.key_hashes.tolist()
    assert keys[1, :nkeys].tolist() == scanned.key_msgs.tolist()
    assert offsets.tolist() == [first + sum(map(len, want[:i])) for i in range(n)]


def _entry(body: bytes, *, magic: int = MESSAGE_MAGIC_CODE, crc: int | None = None,
           total_delta: int = 0, props: bytes = b"") -> bytes:  # fmt: skip
    total = 22 + len(body) + len(props) + total_delta
    c = zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc
    head = struct.pack(">iIiii", total, magic, c, 0, len(body))
    return head + body + struct.pack(">h", len(props)) + props


GOOD = _entry(b"fine")
BAD = {
    "empty": b"",
    "truncated": GOOD + GOOD[:10],
    "bad magic in second": GOOD + _entry(b"x", magic=0x12345678),
    "total too big": GOOD + _entry(b"x", total_delta=50),
    "total too small": _entry(b"xyz", total_delta=-2) + b"zz",
    "crc mismatch": GOOD + _entry(b"x", crc=1),
    "empty body": GOOD + _entry(b""),
    "trailing garbage": GOOD + b"\x00\x01\x02",
    "too large body": _entry(b"x" * 5000),
    # properties must be name\x01value\x02 pairs: recovery relies on it (see scan_log)
    "properties without the last separator": GOOD + _entry(b"x", props=b"KEYS\x01k"),
    "properties ending in zeros": _entry(b"x", props=b"KEYS\x01k\x02\x00\x00"),
    "property without a name": _entry(b"x", props=b"\x01v\x02"),
    "property without a value separator": _entry(b"x", props=b"KEYS\x02"),
    "property value holding a separator": _entry(b"x", props=b"a\x01b\x01c\x02"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_scan_rejects_what_the_reference_decoder_rejects(name: str) -> None:
    data = BAD[name]
    with pytest.raises(MessageIllegalError):
        decode_batch(data, max_message_size=4096)
    scanned, reason = scan_batch(data, topic=TOPIC, max_message_size=4096)
    assert scanned is None
    assert reason


@settings(max_examples=300, deadline=None)
@given(props=st.lists(st.sampled_from([b"\x00", b"\x01", b"\x02", b"a", b"KEYS"]), max_size=12))
def test_scan_and_decoder_agree_on_which_properties_are_well_formed(props: list[bytes]) -> None:
    raw = b"".join(props)
    data = _entry(b"body", props=raw)
    try:
        decode_batch(data, max_message_size=4096)
        ok = True
    except MessageIllegalError:
        ok = False
    scanned, _ = scan_batch(data, topic=TOPIC, max_message_size=4096)
    assert (scanned is not None) == ok == properties_well_formed(raw)
    pairs = raw.split(b"\x02")
    expected = raw == b"" or (
        raw.endswith(b"\x02")
        and all(p.count(b"\x01") == 1 and not p.startswith(b"\x01") for p in pairs[:-1])
    )
    assert ok == expected


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=200))
def test_scan_never_crashes_and_agrees_on_random_bytes(data: bytes) -> None:
    try:
        decode_batch(data, max_message_size=4096)
        ok = True
    except MessageIllegalError:
        ok = False
    scanned, _ = scan_batch(data, topic=TOPIC, max_message_size=4096)
    assert (scanned is not None) == ok


@pytest.mark.parametrize(
    ("props", "delayed"),
    [
        ({"DELAY": "3"}, True),
        ({"TAGS": "a", "DELAY": "1", "KEYS": "k"}, True),
        ({"DELAYX": "3"}, False),
        ({"XDELAY": "3"}, False),
        ({"note": "DELAY"}, False),
        ({}, False),
    ],
)
def test_scan_notes_a_delay_level_property(props: dict[str, str], delayed: bool) -> None:
    data = encode_batch([(b"plain", 0, b""), (b"body", 0, encode_properties(props))])
    scanned, reason = scan_batch(data, topic=TOPIC, max_message_size=4096)
    assert scanned is not None, reason
    assert bool(scanned.delayed) is delayed


def _log_record(topic: bytes, props: bytes, offset: int) -> bytes:
    return encode_record(
        topic=topic, body=b"body", properties=props, queue_id=0, queue_offset=0,
        physical_offset=offset, born_timestamp=1, born_host=encode_host("127.0.0.1", 1),
        store_timestamp=2, store_host=encode_host("127.0.0.1", 2),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("topic", "props", "keep", "error", "check_error"),
    [
        # a record whose end never reached the disk: zeros from ``keep`` bytes on
        (b"Topic", b"KEYS\x01k1\x02TAGS\x01t\x02", -3, 13, "properties are not"),
        (b"Topic", b"KEYS\x01k1\x02", -1, 13, "properties are not"),
        (b"Topic", b"", -3, 12, "topic 'Topi.x00' is not a valid name"),  # torn in the topic
        (b"Topic", b"KEYS\x01k1\x02", None, None, None),
        (b"Topic", b"", None, None, None),
    ],
)
def test_scan_log_and_check_record_find_a_torn_record_end(
    topic: bytes, props: bytes, keep: int | None, error: int | None, check_error: str | None
) -> None:
    """The body CRC does not cover topic and properties; their form shows a torn end."""
    first = _log_record(topic, b"KEYS\x01k0\x02", 0)
    rec = bytearray(_log_record(topic, props, len(first)))
    if keep is not None:
        rec[keep:] = bytes(-keep)
    seg = np.frombuffer(first + bytes(rec) + bytes(64), dtype=np.uint8)
    cols = np.zeros((9, 4), dtype=np.int64)
    keys = np.zeros((2, 16_400), dtype=np.int64)
    status, n, pos, nkeys = scan_log(seg, 0, 0, True, *cols, *keys)
    if error is None:
        assert (status, n) == (LOG_END_OF_DATA, 2)
        check_record(seg, len(first), expected_offset=len(first), limit=len(seg))
        return
    assert (status, n, pos, nkeys) == (error, 1, len(first), 1)  # the first record and its key
    assert check_error is not None
    with pytest.raises(CorruptRecordError, match=check_error):
        check_record(seg, len(first), expected_offset=len(first), limit=len(seg))
