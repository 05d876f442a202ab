"""The compiled CRC-32: the table loop for short pieces, a C crc32 (zlib-ng's, else
zlib's) for long ones."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from connector.protocol.jit import _LONG_CRC_BYTES, CRC_TABLE, LONG_CRC, crc32


@njit(cache=False)
def _crc(buf: Any, start: int, end: int, crc: int) -> int:
    return crc32(CRC_TABLE, buf, start, end, crc)


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=3 * _LONG_CRC_BYTES),
    start=st.integers(min_value=0, max_value=40),
    seed=st.integers(min_value=0, max_value=0xFFFFFFFF),
)
def test_crc_is_zlibs_on_both_sides_of_the_threshold(data: bytes, start: int, seed: int) -> None:
    start = min(start, len(data))
    buf = np.frombuffer(data, dtype=np.uint8)  # read-only, as the broker's request bodies
    assert _crc(buf, start, len(data), seed) == zlib.crc32(data[start:], seed)


@pytest.mark.parametrize("n", [_LONG_CRC_BYTES - 1, _LONG_CRC_BYTES, 16384, 1 << 20])
def test_long_pieces_of_any_array(n: int) -> None:
    rng = np.random.default_rng(n)
    wide = rng.integers(0, 256, 2 * n + 16, dtype=np.uint8)
    assert _crc(wide, 5, 5 + n, 0) == zlib.crc32(wide[5 : 5 + n].tobytes())
    strided = wide[::2]  # not contiguous: the table loop, same answer
    assert _crc(strided, 0, n, 7) == zlib.crc32(strided[:n].tobytes(), 7)


def test_long_pieces_use_zlib_ng() -> None:
    assert LONG_CRC == "zlib-ng"  # a dependency: its crc32 folds with carry-less multiplies


@pytest.mark.parametrize(
    ("missing", "expected"),
    [
        pytest.param(
            ("zlib-ng",),
            "zlib",
            marks=pytest.mark.skipif(
                ctypes.util.find_library("z") is None, reason="no zlib C library here"
            ),
        ),
        (("zlib-ng", "zlib"), "table"),
    ],
)
def test_without_zlib_ng_the_next_crc_answers(
    tmp_path: Path, missing: tuple[str, ...], expected: str
) -> None:
    # zlib-ng not importable (no wheel for the platform), and zlib's C library not
    # loadable through ctypes (a Python with zlib built in): the same CRCs come out
    code = textwrap.dedent(
        f"""
        import ctypes, ctypes.util, sys
        missing = {missing!r}
        if "zlib-ng" in missing:
            sys.modules["zlib_ng"] = None  # import zlib_ng raises ImportError
        real, zlib_name = ctypes.CDLL, ctypes.util.find_library("z")
        def no_zlib(name, *a, **k):
            if "zlib" in missing and name in ("libz.so.1", zlib_name):
                raise OSError(f"cannot load {{name}}")
            return real(name, *a, **k)
        ctypes.CDLL = no_zlib
        import numpy as np
        from connector.protocol.jit import LONG_CRC
        from connector.protocol.fastbatch import encode_plain
        from connector.protocol.batch import decode_batch
        assert LONG_CRC == {expected!r}, LONG_CRC
        bodies = [bytes([i]) * (5000 + i) for i in range(3)]
        body = np.frombuffer(b"".join(bodies), dtype=np.uint8)
        off = np.cumsum([0] + [len(b) for b in bodies]).astype(np.int64)
        batch = encode_plain("T", body, off, None, None, None, ["A" * 32] * 3, 1 << 20)
        decoded = decode_batch(batch.data, max_message_size=1 << 20)  # checks every CRC
        assert decoded.bodies == bodies
        print("ok")
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
