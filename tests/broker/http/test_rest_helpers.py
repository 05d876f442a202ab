"""Small pieces of the broker's REST edge (``broker.rest``)."""

from __future__ import annotations

import pytest

from broker.rest import born_host, compression_param
from connector.errors import ClientError
from connector.protocol.compression import CompressionType


def test_born_host_is_the_peer_or_localhost() -> None:
    assert born_host(("10.1.2.3", 4567)) == bytes([10, 1, 2, 3]) + (4567).to_bytes(4, "big")
    localhost = bytes([127, 0, 0, 1, 0, 0, 0, 0])
    assert born_host(("::1", 80)) == born_host(None) == localhost
    assert born_host(("x", "not a port")) == localhost  # type: ignore[arg-type]


def test_compression_param() -> None:
    assert compression_param("false") is None
    assert compression_param("true") is CompressionType.ZLIB
    assert compression_param("ZSTD") is CompressionType.ZSTD
    with pytest.raises(ClientError, match="compressed"):
        compression_param("gzip")
