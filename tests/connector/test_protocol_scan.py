"""The compiled record indexer agrees with the Python record decoder."""

from __future__ import annotations

import zlib

import pytest

from connector.errors import CorruptRecordError
from connector.protocol.properties import encode_properties
from connector.protocol.record import decode_record, encode_record
from connector.protocol.scan import check_bodies, header_fields, index_records, kernels, offset_ids

HOST = b"\x7f\x00\x00\x01\x00\x00\x27\x0f"


def record(i: int, body: bytes, topic: bytes = b"T", props: dict[str, str] | None = None) -> bytes:
    return encode_record(
        topic=topic, body=body, properties=encode_properties(props or {"K": str(i)}),
        queue_id=i % 4, queue_offset=1000 + i, physical_offset=i * 7, born_timestamp=1,
        born_host=HOST, store_timestamp=2, store_host=HOST,
    )  # fmt: skip


def test_index_matches_decoder() -> None:
    bodies = [b"", b"x", b"y" * 300, bytes(range(256)) * 20]
    recs = [record(i, b, topic=b"Topic%d" % i) for i, b in enumerate(bodies)]
    data = b"".join(recs)
    index = index_records(data)
    assert len(index) == len(recs)
    assert index.bodies() == bodies
    assert index.queue_offset.tolist() == [1000, 1001, 1002, 1003]
    pos = 0
    for i, rec in enumerate(recs):
        assert index.start[i] == pos and index.size[i] == len(rec)
        msg = decode_record(data, pos)
        props = data[int(index.props_start[i]) : int(index.props_start[i] + index.props_len[i])]
        assert props == encode_properties(msg.properties)
        pos += len(rec)


@pytest.mark.parametrize("bad", [None, 0, 2])
def test_checks_and_ids_agree_with_header_fields(bad: int | None) -> None:
    """``check_bodies`` and ``offset_ids`` are ``header_fields`` in parts: same
    SYSFLAGs, same first bad body CRC, same offset msgIds."""
    recs = [bytearray(record(i, b"body-%d" % i)) for i in range(4)]
    if bad is not None:
        recs[bad][8] ^= 0x01  # the stored body CRC (BODYCRC, bytes 8..11)
    data = b"".join(recs)
    index = index_records(data)
    sys_flag, _born, _stored, ids, first_bad = header_fields(
        data, index.start, index.body_start, index.body_len
    )
    flags, checked_bad = check_bodies(data, index.start, index.body_start, index.body_len)
    assert flags.tolist() == sys_flag.tolist()
    assert checked_bad == first_bad == (-1 if bad is None else bad)
    assert offset_ids(data, index.start) == ids.tobytes().decode("ascii")
    assert (
        offset_ids(data, index.start)[32:64]
        == decode_record(data, int(index.start[1])).offset_msg_id
    )


def test_empty_answer() -> None:
    assert len(index_records(b"")) == 0


@pytest.mark.parametrize("cut", [1, 50, 100])
def test_truncated_answer_is_corrupt(cut: int) -> None:
    data = record(0, b"a" * 40) + record(1, b"b" * 40)
    with pytest.raises(CorruptRecordError) as err:
        index_records(data[:-cut])
    assert err.value.position == len(record(0, b"a" * 40))


def test_bad_magic_is_corrupt() -> None:
    data = bytearray(record(0, b"abc"))
    data[4] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        index_records(bytes(data))


def test_compiled_crc_is_zlibs() -> None:
    data = bytes(range(256)) * 20
    for start in (0, 1, 7):
        for n in [*range(20), 63, 64, 65, 1000, 4097]:
            piece = data[start : start + n]
            assert kernels.crc32(piece, 0) == zlib.crc32(piece)
