"""CommitLog record codec: round trips, the byte layout at fixed offsets, and
that ``check_record`` / ``decode_record`` reject every kind of damaged record.
"""

from __future__ import annotations

import dataclasses
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import CorruptRecordError
from connector.protocol.message import MessageExt, SysFlag
from connector.protocol.msgid import decode_offset_msg_id, encode_host
from connector.protocol.properties import encode_properties
from connector.protocol.record import (
    BLANK_MAGIC_CODE,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    body_crc,
    check_record,
    decode_record,
    encode_blank,
    encode_record,
    read_header,
    record_size,
)

STORE_HOST = ("10.1.2.3", 10911)
BORN_HOST = ("192.168.0.7", 53211)

topics = st.from_regex(r"[%|a-zA-Z0-9_-]{1,127}", fullmatch=True)
prop_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x01\x02"),
    max_size=16,
)
property_dicts = st.dictionaries(prop_text.filter(bool), prop_text, max_size=5)
i32 = st.integers(-(2**31), 2**31 - 1)
u63 = st.integers(0, 2**63 - 1)
hosts = st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 0xFFFF))
# Any SYSFLAG bit but COMPRESSED (a random body does not inflate).
sys_flags = st.integers(0, 0x3F).map(lambda f: f & ~SysFlag.COMPRESSED)


def make_record(**overrides: Any) -> bytes:
    fields: dict[str, Any] = {
        "topic": b"TopicTest",
        "body": b"hello pymq",
        "properties": encode_properties({"TAGS": "TagA", "KEYS": "k1 k2"}),
        "queue_id": 3,
        "queue_offset": 42,
        "physical_offset": 0,
        "flag": 7,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000,
        "born_host": encode_host(*BORN_HOST),
        "store_timestamp": 1_700_000_000_123,
        "store_host": encode_host(*STORE_HOST),
        "reconsume_times": 2,
        "prepared_transaction_offset": 0,
    }
    fields.update(overrides)
    return encode_record(**fields)


def patch(record: bytes, offset: int, fmt: str, value: int) -> bytes:
    buf = bytearray(record)
    struct.pack_into(fmt, buf, offset, value)
    return bytes(buf)


# --------------------------------------------------------------------------- round trip


@settings(max_examples=150, deadline=None)
@given(
    fields=st.fixed_dictionaries(
        {
            "topic": topics,
            "body": st.binary(max_size=2048),
            "props": property_dicts,
            "queue_id": st.integers(0, 2**31 - 1),
            "queue_offset": u63,
            "physical_offset": u63,
            "flag": i32,
            "sys_flag": sys_flags,
            "born_ts": u63,
            "store_ts": u63,
            "born": hosts,
            "store": hosts,
            "reconsume": st.integers(0, 2**31 - 1),
            "prepared": u63,
        }
    )
)
def test_encode_decode_round_trip(fields: dict[str, Any]) -> None:
    topic: str = fields["topic"]
    body: bytes = fields["body"]
    props: dict[str, str] = fields["props"]
    queue_id: int = fields["queue_id"]
    queue_offset: int = fields["queue_offset"]
    physical_offset: int = fields["physical_offset"]
    flag: int = fields["flag"]
    sys_flag: int = fields["sys_flag"]
    born_ts: int = fields["born_ts"]
    store_ts: int = fields["store_ts"]
    born: tuple[str, int] = fields["born"]
    store: tuple[str, int] = fields["store"]
    reconsume: int = fields["reconsume"]
    prepared: int = fields["prepared"]
    encoded_props = encode_properties(props)
    rec = encode_record(
        topic=topic.encode(),
        body=body,
        properties=encoded_props,
        queue_id=queue_id,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        flag=flag,
        sys_flag=sys_flag,
        born_timestamp=born_ts,
        born_host=encode_host(*born),
        store_timestamp=store_ts,
        store_host=encode_host(*store),
        reconsume_times=reconsume,
        prepared_transaction_offset=prepared,
    )
    assert len(rec) == record_size(len(body), len(topic), len(encoded_props))

    msg = decode_record(rec)
    assert isinstance(msg, MessageExt)
    assert msg.topic == topic
    assert msg.body == body
    assert msg.properties == props
    assert msg.queue_id == queue_id
    assert msg.queue_offset == queue_offset
    assert msg.commit_log_offset == physical_offset
    assert msg.flag == flag
    assert msg.sys_flag == sys_flag
    assert msg.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    assert msg.born_timestamp == born_ts
    assert msg.born_host == f"{born[0]}:{born[1]}"
    assert msg.store_timestamp == store_ts
    assert msg.store_host == f"{store[0]}:{store[1]}"
    assert msg.reconsume_times == reconsume
    assert msg.prepared_transaction_offset == prepared
    assert msg.store_size == len(rec)
    assert decode_offset_msg_id(msg.offset_msg_id) == (f"{store[0]}:{store[1]}", physical_offset)

    # The same record somewhere inside a segment: same answer from check and decode.
    prefix = b"\xee" * 13
    segment = prefix + rec + b"\x00" * 5
    check = check_record(segment, len(prefix), expected_offset=physical_offset, limit=len(segment))
    assert check.size == len(rec)
    assert not check.blank
    assert check.topic == topic
    assert check.queue_id == queue_id
    assert check.queue_offset == queue_offset
    assert check.store_timestamp == store_ts
    assert check.properties == encoded_props
    assert check.body_len == len(body)
    assert decode_record(memoryview(segment), len(prefix)) == msg


def test_empty_body_round_trips() -> None:
    rec = make_record(body=b"")
    assert struct.unpack_from(">i", rec, 84)[0] == 0
    assert struct.unpack_from(">i", rec, 8)[0] == 0  # crc32(b"") == 0
    msg = decode_record(rec)
    assert msg.body == b""
    assert msg.topic == "TopicTest"
    assert check_record(rec, 0, expected_offset=0, limit=len(rec)).body_len == 0


def test_empty_properties_and_unicode_properties_round_trip() -> None:
    assert decode_record(make_record(properties=b"")).properties == {}
    props = {"键": "值 ✓", "UNIQ_KEY": "ABC"}
    assert decode_record(make_record(properties=encode_properties(props))).properties == props


def test_message_ext_accessors_read_properties() -> None:
    msg = decode_record(make_record())
    assert msg.tags == "TagA"
    assert msg.keys == ["k1", "k2"]
    assert msg.msg_id == msg.offset_msg_id  # no UNIQ_KEY -> the offset msgId
    uniq = decode_record(make_record(properties=encode_properties({"UNIQ_KEY": "U1"})))
    assert uniq.msg_id == "U1"


# --------------------------------------------------------------------------- byte layout


def test_layout_read_by_an_outside_tool() -> None:
    """Parse the bytes with plain struct calls at RocketMQ's v1 offsets."""
    body = b"\x00\x01payload\xff"
    topic = b"%RETRY%group_1"
    props = encode_properties({"TAGS": "TagA", "UNIQ_KEY": "0123"})
    rec = make_record(
        topic=topic,
        body=body,
        properties=props,
        queue_id=5,
        queue_offset=0x0102030405060708,
        physical_offset=0x1122334455667788,
        flag=-9,
        sys_flag=SysFlag.MULTI_TAGS,
        born_timestamp=111,
        store_timestamp=0x7EDCBA9876543210,
        reconsume_times=3,
        prepared_transaction_offset=99,
    )

    def at(fmt: str, off: int) -> Any:
        return struct.unpack_from(fmt, rec, off)[0]

    assert at(">i", 0) == len(rec)
    assert at(">I", 4) == 0xDAA320A7
    assert rec[4:8] == bytes.fromhex("daa320a7")
    assert at(">i", 8) == zlib.crc32(body) & 0x7FFFFFFF
    assert at(">i", 12) == 5
    assert at(">i", 16) == -9
    assert at(">q", 20) == 0x0102030405060708
    assert at(">q", 28) == 0x1122334455667788
    assert at(">i", 36) == SysFlag.MULTI_TAGS
    assert at(">q", 40) == 111
    assert rec[48:52] == bytes([192, 168, 0, 7])
    assert at(">i", 52) == BORN_HOST[1]
    assert at(">q", 56) == 0x7EDCBA9876543210
    assert rec[64:68] == bytes([10, 1, 2, 3])
    assert at(">i", 68) == STORE_HOST[1]
    assert at(">i", 72) == 3
    assert at(">q", 76) == 99
    assert at(">i", 84) == len(body)
    assert rec[88 : 88 + len(body)] == body
    t = 88 + len(body)
    assert rec[t] == len(topic)
    assert rec[t + 1 : t + 1 + len(topic)] == topic
    p = t + 1 + len(topic)
    assert at(">h", p) == len(props)
    assert rec[p + 2 :] == props
    assert p + 2 + len(props) == len(rec)

    assert HEADER_SIZE == 88
    header = read_header(rec)
    assert header.total_size == len(rec)
    assert header.magic == MESSAGE_MAGIC_CODE
    assert header.physical_offset == 0x1122334455667788
    assert header.store_host == encode_host(*STORE_HOST)
    assert header.body_len == len(body)


@settings(max_examples=100, deadline=None)
@given(body=st.binary(max_size=512))
def test_body_crc_is_masked_crc32(body: bytes) -> None:
    crc = body_crc(body)
    assert crc == zlib.crc32(body) & 0x7FFFFFFF
    assert 0 <= crc < 2**31
    assert struct.unpack_from(">i", make_record(body=body), 8)[0] == crc


def test_body_crc_masks_the_sign_bit() -> None:
    # crc32(b"a") = 0xE8B7BE43 has its top bit set; RocketMQ keeps the low 31 bits.
    assert zlib.crc32(b"a") == 0xE8B7BE43
    assert body_crc(b"a") == 0x68B7BE43
    assert body_crc(memoryview(b"a")) == 0x68B7BE43


def test_encode_rejects_what_the_length_fields_cannot_hold() -> None:
    with pytest.raises(CorruptRecordError):
        make_record(topic=b"t" * 128)
    assert decode_record(make_record(topic=b"t" * 127)).topic == "t" * 127
    with pytest.raises(CorruptRecordError):
        make_record(properties=b"x" * 32768)
    big = b"k\x01" + b"v" * (32767 - 3) + b"\x02"
    assert len(big) == 32767
    assert decode_record(make_record(properties=big)).properties == {"k": "v" * 32764}


def test_encode_record_with_explicit_crc_writes_it() -> None:
    rec = make_record(crc=12345)
    assert struct.unpack_from(">i", rec, 8)[0] == 12345
    with pytest.raises(CorruptRecordError, match="CRC"):
        check_record(rec, 0, expected_offset=0, limit=len(rec))
    assert check_record(rec, 0, expected_offset=0, limit=len(rec), check_crc=False).size == len(rec)


# --------------------------------------------------------------------------- check_record


def test_check_record_accepts_a_good_record() -> None:
    rec = make_record(physical_offset=4096)
    check = check_record(rec, 0, expected_offset=4096, limit=len(rec))
    assert check.size == len(rec)
    assert check.blank is False
    assert check.topic == "TopicTest"
    assert check.queue_id == 3
    assert check.queue_offset == 42
    assert check.store_timestamp == 1_700_000_000_123
    assert check.properties == encode_properties({"TAGS": "TagA", "KEYS": "k1 k2"})
    assert check.body_len == len(b"hello pymq")


def test_check_record_walks_a_segment_of_records_then_blank() -> None:
    base = 1 << 30
    segment_size = 1024
    recs: list[bytes] = []
    pos = 0
    for i in range(4):
        rec = make_record(physical_offset=base + pos, queue_offset=i, body=bytes([i]) * (i * 10))
        recs.append(rec)
        pos += len(rec)
    segment = bytearray(b"".join(recs))
    segment += encode_blank(segment_size - len(segment))
    segment += b"\x00" * (segment_size - len(segment))
    assert len(segment) == segment_size

    seen = []
    pos = 0
    while True:
        check = check_record(
            memoryview(segment), pos, expected_offset=base + pos, limit=segment_size
        )
        if check.blank:
            assert pos + check.size == segment_size
            break
        seen.append(check.queue_offset)
        pos += check.size
    assert seen == [0, 1, 2, 3]


def test_check_record_bad_magic() -> None:
    rec = make_record(physical_offset=100)
    bad = patch(rec, 4, ">I", 0xDEADBEEF)
    with pytest.raises(CorruptRecordError, match="magic") as info:
        check_record(bad, 0, expected_offset=100, limit=len(bad))
    assert info.value.position == 100
    assert info.value.code == "CORRUPT_RECORD"


@pytest.mark.parametrize("index", [0, 5, -1])
def test_check_record_flipped_body_byte_fails_crc(index: int) -> None:
    body = b"0123456789abcdef"
    rec = bytearray(make_record(body=body))
    rec[HEADER_SIZE + (index % len(body))] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        check_record(memoryview(rec), 0, expected_offset=0, limit=len(rec))
    # The lengths are still consistent, so without the CRC check it passes.
    assert check_record(
        memoryview(rec), 0, expected_offset=0, limit=len(rec), check_crc=False
    ).size == len(rec)


@settings(max_examples=100, deadline=None)
@given(body=st.binary(min_size=1, max_size=256), data=st.data())
def test_any_body_damage_is_caught(body: bytes, data: st.DataObject) -> None:
    rec = bytearray(make_record(body=body))
    i = data.draw(st.integers(0, len(body) - 1))
    bit = data.draw(st.integers(0, 7))
    rec[HEADER_SIZE + i] ^= 1 << bit
    with pytest.raises(CorruptRecordError):
        check_record(memoryview(rec), 0, expected_offset=0, limit=len(rec))
    with pytest.raises(CorruptRecordError):
        decode_record(bytes(rec))


@pytest.mark.parametrize("expected", [0, 99, 101, 100 + 2**32])
def test_check_record_physical_offset_must_be_own_position(expected: int) -> None:
    rec = make_record(physical_offset=100)
    with pytest.raises(CorruptRecordError, match="PHYSICALOFFSET") as info:
        check_record(rec, 0, expected_offset=expected, limit=len(rec))
    assert info.value.position == expected


@pytest.mark.parametrize("total", [-1, 0, 8, HEADER_SIZE, HEADER_SIZE + 2, -(2**31)])
def test_check_record_total_size_too_small(total: int) -> None:
    rec = patch(make_record(), 0, ">i", total)
    with pytest.raises(CorruptRecordError):
        check_record(rec, 0, expected_offset=0, limit=len(rec))


@pytest.mark.parametrize("extra", [1, 100, 2**31 - 1])
def test_check_record_total_size_larger_than_limit(extra: int) -> None:
    rec = make_record()
    total = min(len(rec) + extra, 2**31 - 1)
    bad = patch(rec, 0, ">i", total)
    with pytest.raises(CorruptRecordError, match="out of range"):
        check_record(bad, 0, expected_offset=0, limit=len(bad))


def test_check_record_limit_cuts_the_record() -> None:
    rec = make_record()
    segment = rec + b"\x00" * 64  # bytes exist, but lie beyond the readable region
    with pytest.raises(CorruptRecordError):
        check_record(segment, 0, expected_offset=0, limit=len(rec) - 1)
    assert check_record(segment, 0, expected_offset=0, limit=len(rec)).size == len(rec)


def test_check_record_truncated_at_every_length() -> None:
    rec = make_record()
    for cut in range(len(rec)):
        part = rec[:cut]
        with pytest.raises(CorruptRecordError):
            check_record(part, 0, expected_offset=0, limit=len(part))
        with pytest.raises(CorruptRecordError):
            decode_record(part)


def test_check_record_no_room_for_a_header() -> None:
    buf = make_record()
    with pytest.raises(CorruptRecordError, match="no room"):
        check_record(buf, 0, expected_offset=0, limit=7)
    with pytest.raises(CorruptRecordError, match="no room"):
        check_record(buf, 10, expected_offset=10, limit=17)


def test_check_record_lengths_that_do_not_add_up() -> None:
    rec = make_record()
    # TOTALSIZE claims 4 more bytes than the fields hold; those bytes are readable.
    longer = patch(rec, 0, ">i", len(rec) + 4) + b"\x00" * 4
    with pytest.raises(CorruptRecordError, match="add up"):
        check_record(longer, 0, expected_offset=0, limit=len(longer))
    with pytest.raises(CorruptRecordError, match="add up"):
        decode_record(longer)


@pytest.mark.parametrize("delta", [-3, -1, 1, 2, 1000])
def test_check_record_body_length_lies(delta: int) -> None:
    rec = make_record(body=b"0123456789")
    bad = patch(rec, 84, ">i", 10 + delta)
    with pytest.raises(CorruptRecordError):
        check_record(bad, 0, expected_offset=0, limit=len(bad), check_crc=False)
    with pytest.raises(CorruptRecordError):
        decode_record(bad, check_crc=False)


@pytest.mark.parametrize("body_len", [-1, -5, -88, -(2**31)])
def test_negative_body_length_is_corrupt(body_len: int) -> None:
    # CRC field 0 matches crc32 of the empty slice a negative length selects,
    # so only the length check stands between these bytes and a bogus decode.
    bad = patch(patch(make_record(), 84, ">i", body_len), 8, ">i", 0)
    with pytest.raises(CorruptRecordError):
        check_record(bad, 0, expected_offset=0, limit=len(bad))
    with pytest.raises(CorruptRecordError):
        decode_record(bad)
    with pytest.raises(CorruptRecordError):
        decode_record(bad, check_crc=False)


@pytest.mark.parametrize("topic_len", [0, 8, 10, 127, 128, 255])
def test_check_record_topic_length_lies(topic_len: int) -> None:
    body = b"abc"
    rec = bytearray(make_record(body=body, topic=b"TopicTest"))  # real length 9
    rec[HEADER_SIZE + len(body)] = topic_len
    with pytest.raises(CorruptRecordError):
        check_record(memoryview(rec), 0, expected_offset=0, limit=len(rec))
    with pytest.raises(CorruptRecordError):
        decode_record(bytes(rec))


@pytest.mark.parametrize("props_len", [-1, -32768, 0, 1, 32767])
def test_check_record_properties_length_lies(props_len: int) -> None:
    body, topic = b"abc", b"T"
    props = encode_properties({"A": "1"})
    rec = make_record(body=body, topic=topic, properties=props)
    assert props_len != len(props)
    bad = patch(rec, HEADER_SIZE + len(body) + 1 + len(topic), ">h", props_len)
    with pytest.raises(CorruptRecordError):
        check_record(bad, 0, expected_offset=0, limit=len(bad))
    with pytest.raises(CorruptRecordError):
        decode_record(bad)


def test_check_record_topic_not_utf8() -> None:
    rec = make_record(topic=b"\xff\xfeT")
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        check_record(rec, 0, expected_offset=0, limit=len(rec))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_any_single_byte_damage_raises_only_corrupt_record(data: st.DataObject) -> None:
    """Whatever byte is changed, the checker and decoder answer or raise CorruptRecordError."""
    rec = bytearray(make_record(physical_offset=0))
    i = data.draw(st.integers(0, len(rec) - 1))
    value = data.draw(st.integers(0, 255).filter(lambda v: v != rec[i]))
    rec[i] = value
    try:
        check = check_record(memoryview(rec), 0, expected_offset=0, limit=len(rec))
    except CorruptRecordError:
        pass
    else:
        assert check.size == len(rec)
    try:
        msg = decode_record(bytes(rec))
    except CorruptRecordError:
        pass
    else:
        assert msg.store_size == len(rec)


@settings(max_examples=200, deadline=None)
@given(junk=st.binary(min_size=0, max_size=300))
def test_random_bytes_raise_only_corrupt_record(junk: bytes) -> None:
    try:
        check = check_record(junk, 0, expected_offset=0, limit=len(junk))
    except CorruptRecordError as exc:
        assert exc.position == 0
    else:
        assert 8 <= check.size <= len(junk)
    try:
        msg = decode_record(junk)
    except CorruptRecordError as exc:
        assert exc.position == 0
    else:
        assert HEADER_SIZE + 3 <= msg.store_size <= len(junk)


# --------------------------------------------------------------------------- BLANK


def test_blank_layout() -> None:
    blank = encode_blank(500)
    assert len(blank) == 8
    assert struct.unpack(">iI", blank) == (500, 0xCBD43194)
    assert BLANK_MAGIC_CODE == 0xCBD43194


@pytest.mark.parametrize("left", [8, 9, 300])
def test_blank_accepted_when_it_claims_exactly_the_bytes_left(left: int) -> None:
    rec = make_record(physical_offset=1000)
    segment = rec + encode_blank(left) + b"\x00" * (left - 8)
    check = check_record(segment, len(rec), expected_offset=1000 + len(rec), limit=len(segment))
    assert check.blank is True
    assert check.size == left


@pytest.mark.parametrize("claim", [0, 7, 8, 299, 301, -300])
def test_blank_rejected_when_the_claim_is_wrong(claim: int) -> None:
    left = 300
    segment = encode_blank(claim) + b"\x00" * (left - 8)
    with pytest.raises(CorruptRecordError, match="BLANK") as info:
        check_record(segment, 0, expected_offset=77, limit=left)
    assert info.value.position == 77


def test_decode_record_refuses_a_blank() -> None:
    buf = encode_blank(200) + b"\x00" * 192
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_record(buf)


# --------------------------------------------------------------------------- decode_record


def test_decode_record_errors() -> None:
    rec = make_record()
    with pytest.raises(CorruptRecordError, match="magic"):
        decode_record(patch(rec, 4, ">I", 0))
    flipped = bytearray(rec)
    flipped[HEADER_SIZE] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_record(bytes(flipped))
    assert decode_record(bytes(flipped), check_crc=False).body[0] == rec[HEADER_SIZE] ^ 0xFF
    with pytest.raises(CorruptRecordError, match="header"):
        decode_record(rec[: HEADER_SIZE - 1])
    with pytest.raises(CorruptRecordError) as info:
        decode_record(b"\x00" * 5 + rec[:-1], 5)
    assert info.value.position == 5


@settings(max_examples=50, deadline=None)
@given(original=st.binary(max_size=4096))
def test_decode_record_inflates_a_compressed_body(original: bytes) -> None:
    stored = zlib.compress(original)
    rec = make_record(body=stored, sys_flag=SysFlag.COMPRESSED | SysFlag.MULTI_TAGS)
    assert struct.unpack_from(">i", rec, 8)[0] == zlib.crc32(stored) & 0x7FFFFFFF
    msg = decode_record(rec)
    assert msg.body == original
    assert msg.sys_flag & SysFlag.COMPRESSED
    assert decode_record(rec, decompress=False).body == stored


def test_decode_record_compressed_body_that_does_not_inflate() -> None:
    rec = make_record(body=b"not zlib at all", sys_flag=SysFlag.COMPRESSED)
    with pytest.raises(CorruptRecordError, match="inflate"):
        decode_record(rec)
    assert decode_record(rec, decompress=False).body == b"not zlib at all"


def test_decode_record_uncompressed_body_is_not_inflated() -> None:
    stored = zlib.compress(b"payload")
    assert decode_record(make_record(body=stored, sys_flag=0)).body == stored


@settings(max_examples=100, deadline=None)
@given(store=hosts, offset=u63)
def test_offset_msg_id_decodes_to_store_host_and_offset(
    store: tuple[str, int], offset: int
) -> None:
    msg = decode_record(make_record(store_host=encode_host(*store), physical_offset=offset))
    assert len(msg.offset_msg_id) == 32
    assert msg.offset_msg_id == msg.offset_msg_id.upper()
    assert decode_offset_msg_id(msg.offset_msg_id) == (f"{store[0]}:{store[1]}", offset)
    assert decode_offset_msg_id(msg.offset_msg_id) == (msg.store_host, msg.commit_log_offset)


def test_decode_without_the_body_reads_every_other_field() -> None:
    """``with_body=False`` (a large batch half's header and properties): the same
    message but an empty body, and a damaged body is not looked at."""
    rec = make_record(body=b"b" * 5000)
    whole = decode_record(rec)
    head = decode_record(rec, with_body=False)
    assert head.body == b""
    assert head == dataclasses.replace(whole, body=b"")
    damaged = bytearray(rec)
    damaged[HEADER_SIZE + 10] ^= 0xFF  # a body byte: the CRC no longer matches
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_record(bytes(damaged))
    assert decode_record(bytes(damaged), with_body=False) == head
    damaged[0:4] = struct.pack(">i", len(rec) + 1)  # the layout is still checked
    with pytest.raises(CorruptRecordError):
        decode_record(bytes(damaged), with_body=False)
