"""The compiled kernels' CRC-32: the table loop for short pieces, a C crc32 (zlib-ng's,
else zlib's) for long ones; in both C modules and their plain-Python twins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zlib
from ctypes import util
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.store import _kernels_py as store_py
from broker.store import kernels as store_kernels
from connector.protocol import _kernels_py as client_py
from connector.protocol.native import LONG_CRC, LONG_CRC_BYTES
from connector.protocol.scan import kernels as client_kernels

MODULES = [
    pytest.param(client_kernels, id="client"),
    pytest.param(store_kernels._kernels, id="store"),
    pytest.param(client_py, id="client-python"),
    pytest.param(store_py, id="store-python"),
]


def test_the_c_modules_were_built() -> None:
    # this machine has a C compiler: `pip install -e .` built both
    assert client_kernels.__name__ == "connector.protocol._kernels"
    assert store_kernels.COMPILED


@pytest.mark.parametrize("module", MODULES)
@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=3 * LONG_CRC_BYTES),
    start=st.integers(min_value=0, max_value=40),
    seed=st.integers(min_value=0, max_value=0xFFFFFFFF),
)
def test_crc_is_zlibs_on_both_sides_of_the_threshold(
    module: ModuleType, data: bytes, start: int, seed: int
) -> None:
    piece = memoryview(data)[min(start, len(data)) :]  # read-only, as request bodies
    assert module.crc32(piece, seed) == zlib.crc32(piece, seed)


@pytest.mark.parametrize("module", MODULES)
@pytest.mark.parametrize("n", [LONG_CRC_BYTES - 1, LONG_CRC_BYTES, 16384, 1 << 20])
def test_long_pieces(module: ModuleType, n: int) -> None:
    data = os.urandom(n + 16)
    assert module.crc32(data[5 : 5 + n], 7) == zlib.crc32(data[5 : 5 + n], 7)


def test_long_pieces_use_zlib_ng() -> None:
    assert LONG_CRC == "zlib-ng"  # a dependency: its crc32 folds with carry-less multiplies


@pytest.mark.parametrize(
    ("missing", "expected"),
    [
        pytest.param(
            ("zlib-ng",),
            "zlib",
            marks=pytest.mark.skipif(util.find_library("z") is None, reason="no zlib C library"),
        ),
        (("zlib-ng", "zlib"), "table"),
    ],
)
def test_without_zlib_ng_the_next_crc_answers(missing: tuple[str, ...], expected: str) -> None:
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
        from connector.protocol.native import LONG_CRC
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
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
