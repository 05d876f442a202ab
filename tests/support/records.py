"""Encoded CommitLog records for the decoder tests: one record with every field set
from its index, and a sample of records of every kind (tags, keys, empty bodies,
non-ASCII topics, each compression codec)."""

from __future__ import annotations

import zlib

from connector.protocol.compression import CompressionType, compress
from connector.protocol.message import SysFlag
from connector.protocol.properties import encode_properties
from connector.protocol.record import encode_record

HOST_A = b"\x7f\x00\x00\x01\x00\x00\x27\x0f"
HOST_B = b"\x0a\x00\x00\x00\x00\x00\x27\x00"  # trailing zero bytes must survive


def record(i: int, body: bytes, *, topic: bytes = b"T", props: dict[str, str] | None = None,
           sys_flag: int = 0, crc: int | None = None) -> bytes:  # fmt: skip
    return encode_record(
        topic=topic, body=body, properties=encode_properties(props if props is not None else {}),
        queue_id=i % 4, queue_offset=1000 + i, physical_offset=(1 << 40) + i * 7, flag=i,
        sys_flag=sys_flag, born_timestamp=1_700_000_000_000 + i, born_host=HOST_A,
        store_timestamp=1_700_000_000_500 + i, store_host=HOST_B, reconsume_times=i % 3,
        prepared_transaction_offset=-i, crc=crc,
    )  # fmt: skip


def sample() -> bytes:
    inflated = b"z" * 5000
    return b"".join(
        [
            record(0, b"plain", props={"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}),
            record(1, b"", topic="Tópico".encode()),
            record(2, zlib.compress(inflated), sys_flag=SysFlag.COMPRESSED, props={"a": "b"}),
            record(3, bytes(range(256)) * 3, topic=b"Other"),
            *(
                record(4 + i, compress(inflated, codec, 3), sys_flag=1 | codec.flag)
                for i, codec in enumerate(CompressionType)
            ),
        ]
    )
