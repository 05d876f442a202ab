"""Body codecs: round trips, RocketMQ's SYSFLAG bits, and bounded, checked inflating."""

from __future__ import annotations

import zlib

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import ConfigError
from connector.protocol.compression import TYPE_BITS, CompressionType, compress, decompress
from connector.protocol.message import SysFlag

TEXT = b"".join(b"row %d: a line of a log file, repeated\n" % i for i in range(400))


def flag(codec: CompressionType) -> int:
    return SysFlag.COMPRESSED | codec.flag


@settings(max_examples=60, deadline=None)
@given(body=st.binary(max_size=20_000), codec=st.sampled_from(list(CompressionType)))
def test_every_codec_round_trips(body: bytes, codec: CompressionType) -> None:
    packed = compress(body, codec, 3)
    assert decompress(packed, flag(codec), limit=len(body)) == body


def test_rocketmq_flag_bits() -> None:
    assert [c.flag for c in CompressionType] == [0x100, 0x200, 0x300]
    assert TYPE_BITS == 0x700
    assert CompressionType.of_sys_flag(SysFlag.COMPRESSED) is CompressionType.ZLIB  # no bits
    assert CompressionType.of_sys_flag(0x201 | SysFlag.MULTI_TAGS) is CompressionType.ZSTD
    with pytest.raises(ValueError, match="unknown compression type 4"):
        CompressionType.of_sys_flag(0x401)
    # a record of old, with only the COMPRESSED bit, is zlib data
    assert decompress(zlib.compress(TEXT), SysFlag.COMPRESSED, limit=len(TEXT)) == TEXT


@pytest.mark.parametrize("codec", list(CompressionType))
def test_damaged_truncated_and_oversized_bodies_are_refused(codec: CompressionType) -> None:
    packed = compress(TEXT, codec, 5)
    assert len(packed) < len(TEXT) / 3
    with pytest.raises(ValueError, match="inflates past"):
        decompress(packed, flag(codec), limit=len(TEXT) - 1)
    with pytest.raises(ValueError):
        decompress(packed[: len(packed) // 2], flag(codec), limit=1 << 20)
    with pytest.raises(ValueError, match="not valid"):
        decompress(b"certainly not compressed" * 3, flag(codec), limit=1 << 20)


def test_a_zstd_frame_that_hides_its_size_is_still_bounded() -> None:
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(TEXT)
    assert decompress(packed, flag(CompressionType.ZSTD), limit=len(TEXT)) == TEXT
    with pytest.raises(ValueError):
        decompress(packed, flag(CompressionType.ZSTD), limit=100)


def test_names_and_levels_are_checked() -> None:
    assert CompressionType.parse(" zstd ") is CompressionType.ZSTD
    with pytest.raises(ConfigError, match="one of LZ4, ZSTD, ZLIB"):
        CompressionType.parse("snappy")
    CompressionType.ZLIB.check_level(9)
    CompressionType.ZSTD.check_level(22)
    CompressionType.LZ4.check_level(99)  # LZ4 takes no level, as in RocketMQ
    with pytest.raises(ConfigError, match=r"0\.\.9"):
        CompressionType.ZLIB.check_level(10)
    with pytest.raises(ConfigError, match=r"1\.\.22"):
        CompressionType.ZSTD.check_level(0)
