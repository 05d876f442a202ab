"""Pulled records -> Arrow: the compiled path agrees with the row-by-row decoder."""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import CorruptRecordError
from connector.protocol.compression import CompressionType, compress
from connector.protocol.message import SysFlag
from connector.protocol.properties import encode_properties
from connector.protocol.record import encode_record
from connector.spark.columnar import arrow_schema, records_to_batch, rows_to_batch
from connector.spark.options import READ_SCHEMA

SCHEMA = arrow_schema(READ_SCHEMA)
HOST = b"\x7f\x00\x00\x01\x00\x00\x27\x0f"


def record(
    offset: int, body: bytes, props: bytes, *, sys_flag: int = 0, crc: int | None = None
) -> bytes:
    return encode_record(
        topic=b"T", body=body, properties=props, queue_id=3, queue_offset=offset,
        physical_offset=4096 + offset * 100, sys_flag=sys_flag, born_host=HOST, crc=crc,
        born_timestamp=1_700_000_000_123 + offset, store_timestamp=1_700_000_000_456 + offset,
        store_host=HOST,
    )  # fmt: skip


def both(data: bytes, end: int = 1 << 62, tags: frozenset[str] | None = None) -> pa.RecordBatch:
    args = {"topic": "T", "broker_name": "broker-a", "end": end, "tags": tags}
    fast = records_to_batch(data, SCHEMA, queue_id=3, **args)  # type: ignore[arg-type]
    slow = rows_to_batch(data, SCHEMA, **args)  # type: ignore[arg-type]
    assert fast.schema.equals(SCHEMA) and slow.schema.equals(SCHEMA)
    assert fast.to_pylist() == slow.to_pylist()
    return fast


def test_columns_match_the_decoder() -> None:
    recs = [
        record(0, b"plain", encode_properties({"UNIQ_KEY": "U0", "TAGS": "A", "KEYS": "k1 k2"})),
        record(1, b"", encode_properties({})),  # no UNIQ_KEY: the offset msgId
        record(2, bytes(range(256)), encode_properties({"TAGS": "", "KEYS": "", "e": ""})),
        record(3, b"b", b"novalue\x02\x01noname\x02dup\x01a\x02dup\x01b\x02"),
        record(4, b"\xff\xfe", encode_properties({"k\u00e9": "v\u4e2d", "UNIQ_KEY": "U4"})),
    ]  # fmt: skip
    batch = both(b"".join(recs))
    rows = batch.to_pylist()
    assert [r["queueOffset"] for r in rows] == [0, 1, 2, 3, 4]
    assert rows[0]["msgId"] == "U0" and rows[0]["tags"] == "A" and rows[0]["keys"] == "k1 k2"
    assert rows[1]["msgId"] == (HOST + (4096 + 100).to_bytes(8, "big")).hex().upper()
    assert (
        rows[2]["tags"] is None and rows[2]["keys"] is None and rows[2]["body"] == bytes(range(256))
    )
    assert dict(rows[3]["properties"]) == {"dup": "b"}
    assert rows[4]["properties"] == [("k\u00e9", "v\u4e2d"), ("UNIQ_KEY", "U4")]
    assert rows[0]["storeTimestamp"].timestamp() == 1_700_000_000.456


def test_end_and_tags_filter() -> None:
    data = b"".join(
        record(i, b"m%d" % i, encode_properties({"TAGS": "AB"[i % 2]})) for i in range(10)
    )
    assert both(data, end=6).num_rows == 6
    assert [r["body"] for r in both(data, tags=frozenset({"B"})).to_pylist()] == [
        b"m1",
        b"m3",
        b"m5",
        b"m7",
        b"m9",
    ]
    assert both(data, end=0).num_rows == 0
    assert both(b"").num_rows == 0


def test_compressed_bodies_are_inflated() -> None:
    packed = zlib.compress(b"z" * 5000)
    data = record(0, b"raw", b"") + record(1, packed, b"", sys_flag=SysFlag.COMPRESSED)
    for i, codec in enumerate(CompressionType, start=2):  # and RocketMQ 5's codec bits
        flag = SysFlag.COMPRESSED | codec.flag
        data += record(i, compress(b"c%d" % i * 900, codec, 5), b"", sys_flag=flag)
    bodies = [r["body"] for r in both(data).to_pylist()]
    assert bodies == [b"raw", b"z" * 5000, *(b"c%d" % i * 900 for i in range(2, 5))]


def test_properties_that_are_not_utf8_are_replaced_not_refused() -> None:
    data = record(0, b"x", b"k\x01\xff\xfe\x02") + record(1, b"y", b"")
    assert both(data).to_pylist()[0]["properties"] == [("k", "\ufffd\ufffd")]


def test_body_crc_mismatch_is_corruption() -> None:
    data = record(0, b"good", b"") + record(1, b"evil", b"", crc=12345)
    with pytest.raises(CorruptRecordError, match="CRC"):
        records_to_batch(data, SCHEMA, topic="T", broker_name="b", queue_id=3, end=10)


def test_crc_checked_past_a_record_that_needs_the_decoder() -> None:
    # a compressed body or a property named twice sends the batch to the row decoder;
    # a later record's CRC mismatch is still found by the compiled pass
    bad = record(2, b"evil", b"", crc=12345)
    for odd in (
        record(1, zlib.compress(b"z" * 100), b"", sys_flag=SysFlag.COMPRESSED),
        record(1, b"d", b"dup\x01a\x02dup\x01b\x02"),
    ):
        data = record(0, b"good", b"") + odd + bad
        with pytest.raises(CorruptRecordError, match="CRC mismatch at byte"):
            records_to_batch(data, SCHEMA, topic="T", broker_name="b", queue_id=3, end=10)


def test_torn_answer_is_corruption() -> None:
    data = record(0, b"good", b"")
    with pytest.raises(CorruptRecordError):
        records_to_batch(data[:-3], SCHEMA, topic="T", broker_name="b", queue_id=3, end=10)


names = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=8,
)
values = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=64),
            st.dictionaries(
                names | st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY"]), values, max_size=5
            ),
        ),
        max_size=12,
    )
)
def test_any_records_agree(msgs: list[tuple[bytes, dict[str, str]]]) -> None:
    both(
        b"".join(record(i, body, encode_properties(props)) for i, (body, props) in enumerate(msgs))
    )


@pytest.mark.parametrize(
    "names",
    [["body"], ["storeTimestamp", "msgId", "topic", "body"], ["properties", "queueOffset"]],
)
def test_a_schema_naming_some_columns_gets_those_in_its_order(names: list[str]) -> None:
    """Both paths (plain records, and a compressed body: the row-by-row decoder) build the
    columns a schema given to the read names, equal to the whole batch's."""
    part = pa.schema([SCHEMA.field(n) for n in names])
    plain = record(0, b"p", encode_properties({"UNIQ_KEY": "U0", "TAGS": "A"}))
    zipped = record(
        1, zlib.compress(b"z" * 200), encode_properties({"TAGS": "B"}),
        sys_flag=SysFlag.COMPRESSED,
    )  # fmt: skip
    tags = frozenset({"A", "B"})
    for data in (plain, plain + zipped):
        args = {"topic": "T", "broker_name": "broker-a", "end": 1 << 62, "tags": tags}
        whole = records_to_batch(data, SCHEMA, queue_id=3, **args)  # type: ignore[arg-type]
        fast = records_to_batch(data, part, queue_id=3, **args)  # type: ignore[arg-type]
        slow = rows_to_batch(data, part, **args)  # type: ignore[arg-type]
        assert fast.schema.equals(part) and slow.schema.equals(part)
        assert fast.to_pylist() == slow.to_pylist() == whole.select(names).to_pylist()
    only_a = records_to_batch(
        plain + zipped, part, queue_id=3, topic="T", broker_name="b", end=1 << 62,
        tags=frozenset({"A"}),
    )  # fmt: skip
    assert only_a.num_rows == 1  # filtered by tag although the tags column is not asked for
