"""Compiled building blocks shared by the store's and the client's kernels.

Two things numba does slowly unless written out:

* a slice assignment (``dst[a:b] = src[c:d]``) builds two array views with
  reference counting, which for the 100-200 byte pieces of a record costs
  more than the copy, so ``copy_bytes`` is a loop;
* an array indexed with a signed integer pays a branch per access for
  Python's negative indices, which also keeps LLVM from vectorising a loop;
  the loops here index with ``uint64`` (and the CRC tables are ``uint32``).

Every function is ``inline="always"``: inlined into the caller's loop, it
pays no call or reference-counting cost per record. numba's on-disk cache
does not notice an edit here, only edits to the caller's own file: after
changing this module, delete ``__pycache__/*.nbi`` (or touch the callers).
"""

# numba needs explicit np casts that mypy types apart from int
# mypy: disable-error-code="return-value"

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.numpy_support import carray

log = logging.getLogger(__name__)

__all__ = [
    "CRC_TABLE",
    "LONG_CRC",
    "byte_at",
    "copy_bytes",
    "crc32",
    "crc32_masked",
    "get_i32",
    "get_u32",
    "put_i32",
    "put_i64",
]


def _crc_tables() -> np.ndarray:
    """Slice-by-8 tables of zlib's CRC-32 (reflected 0xEDB88320): row 0 is the
    byte-at-a-time table, row k advances a byte's CRC by k more zero bytes."""
    tables = np.empty((8, 256), dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        tables[0, i] = c
    for k in range(1, 8):
        for i in range(256):
            prev = int(tables[k - 1, i])
            tables[k, i] = (prev >> 8) ^ int(tables[0, prev & 0xFF])
    return tables


CRC_TABLE = _crc_tables()


@njit(cache=True, nogil=True, inline="always")
def _table_crc32(table: Any, buf: Any, start: int, end: int, crc: int) -> int:  # pragma: no cover
    """CRC-32 of ``buf[start:end]`` continued from ``crc``, eight bytes a step."""
    c = np.uint32(crc) ^ np.uint32(0xFFFFFFFF)
    j = np.uint64(start)
    stop = np.uint64(end) if end > start else j
    while j + np.uint64(8) <= stop:
        one = c ^ (
            np.uint32(buf[j])
            | (np.uint32(buf[j + np.uint64(1)]) << 8)
            | (np.uint32(buf[j + np.uint64(2)]) << 16)
            | (np.uint32(buf[j + np.uint64(3)]) << 24)
        )
        c = (
            table[7, one & 0xFF]
            ^ table[6, (one >> 8) & 0xFF]
            ^ table[5, (one >> 16) & 0xFF]
            ^ table[4, one >> 24]
            ^ table[3, buf[j + np.uint64(4)]]
            ^ table[2, buf[j + np.uint64(5)]]
            ^ table[1, buf[j + np.uint64(6)]]
            ^ table[0, buf[j + np.uint64(7)]]
        )
        j += np.uint64(8)
    while j < stop:
        c = table[0, (c ^ buf[j]) & 0xFF] ^ (c >> 8)
        j += np.uint64(1)
    return np.int64(c ^ np.uint32(0xFFFFFFFF))


# -- long pieces: a C crc32, called from compiled code ---------------------------------
#
# A C crc32 runs faster than the table loop above on long pieces. Compiled
# code calls it through the symbol ``pymq_crc32``, which this module registers
# with LLVM before any kernel is compiled or loaded from numba's cache, first
# found of:
#
# * zlib-ng's ``zng_crc32`` (the ``zlib-ng`` package, a dependency): folds
#   with carry-less multiplies (PCLMULQDQ / VPCLMULQDQ), 16 KiB in 0.4 us here
#   against 4-10 us for zlib's;
# * the C library zlib's ``crc32`` (its crossover with the table loop was
#   measured at ~600 bytes: 1 KiB 0.8 against 0.94 us);
# * a compiled table loop with the same C signature.
#
# Cached machine code names the symbol, not an address, so the cache stays
# valid whichever is found. ``zng_crc32`` returns a 32-bit value where zlib's
# returns an unsigned long: ``crc32`` keeps the low 32 bits of either.

_SYMBOL = "pymq_crc32"


def _c_crc32() -> tuple[str, int] | None:
    """(name, address) of a C crc32 taking (crc, buf, len), fastest first; None if
    neither zlib-ng nor the C library zlib can be loaded."""
    candidates: list[tuple[str, str | None, str]] = []
    try:
        from zlib_ng import zlib_ng  # noqa: PLC0415 - only its library's address is used
    except ImportError:
        pass
    else:
        candidates.append(("zlib-ng", zlib_ng.__file__, "zng_crc32"))
    candidates += [("zlib", name, "crc32") for name in ("libz.so.1", ctypes.util.find_library("z"))]
    for label, path, symbol in candidates:
        if not path:
            continue
        try:
            fn = getattr(ctypes.CDLL(path), symbol)
        except (OSError, AttributeError):
            continue
        address = ctypes.cast(fn, ctypes.c_void_p).value
        if address:
            return label, int(address)
    return None


_KEEP: list[Any] = []


def _register_long_crc() -> str:
    found = _c_crc32()
    if found is not None:
        label, address = found
        llvm.add_symbol(_SYMBOL, address)
        return label
    log.info(
        "neither zlib-ng nor zlib's C library found: CRC-32 of long pieces uses the table loop"
    )
    table = CRC_TABLE

    @cfunc(types.uint64(types.uint64, types.CPointer(types.uint8), types.uint32))  # type: ignore[no-untyped-call]
    def table_crc32(crc: int, data: Any, n: int) -> int:  # pragma: no cover - compiled
        return _table_crc32(table, carray(data, n), 0, n, crc)

    _KEEP.append(table_crc32)  # its machine code must outlive every kernel calling it
    llvm.add_symbol(_SYMBOL, table_crc32.address)
    return "table"


LONG_CRC = _register_long_crc()  # "zlib-ng", "zlib" or "table": what long pieces use

# From here on, the C crc32 (measured crossovers with the table loop: zlib-ng ~48
# bytes, 100 B in 24 against 41 ns, 16 KiB in 0.3 against 8.2 us; zlib ~600 bytes).
# A kernel keeps the value it was compiled with, from numba's cache too: only speed,
# not the answer, depends on it.
_LONG_CRC_BYTES = 64 if LONG_CRC == "zlib-ng" else 768


@intrinsic
def _long_crc32(typingctx: Any, crc: Any, address: Any, n: Any) -> Any:  # pragma: no cover
    """The C ``crc32(crc, buf, len)`` of the ``n`` bytes at ``address`` (see above)."""
    sig = types.uint64(types.uint64, types.uintp, types.uint32)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        u8p = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64), u8p, ir.IntType(32)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _SYMBOL)  # type: ignore[no-untyped-call]
        return builder.call(fn, [args[0], builder.inttoptr(args[1], u8p), args[2]])

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def crc32(table: Any, buf: Any, start: int, end: int, crc: int) -> int:  # pragma: no cover
    """``zlib.crc32(buf[start:end], crc)``: a CRC-32 continued from ``crc``
    (0 to start one); ``table`` is ``CRC_TABLE``. Long pieces of a contiguous
    ``buf`` go to a C crc32 (see above), in steps under 2**31 bytes."""
    if end - start < _LONG_CRC_BYTES or not buf.flags.c_contiguous:
        return _table_crc32(table, buf, start, end, crc)
    c = np.uint64(crc)
    at = np.uintp(buf.ctypes.data) + np.uintp(start)
    left = end - start
    while left > 0:
        step = min(left, 1 << 30)
        # the low 32 bits: zng_crc32 returns a uint32_t (the rest of the register is not its)
        c = _long_crc32(c, at, np.uint32(step)) & np.uint64(0xFFFFFFFF)  # type: ignore[call-arg]  # mypy misreads intrinsics
        at += np.uintp(step)  # type: ignore[unreachable]
        left -= step
    return np.int64(c)


@njit(cache=True, nogil=True, inline="always")
def crc32_masked(table: Any, buf: Any, start: int, end: int) -> int:  # pragma: no cover
    """``zlib.crc32(buf[start:end]) & 0x7FFFFFFF`` (RocketMQ's body CRC)."""
    return crc32(table, buf, start, end, 0) & 0x7FFFFFFF


@njit(cache=True, nogil=True, inline="always")
def copy_bytes(dst: Any, at: int, src: Any, start: int, n: int) -> None:  # pragma: no cover
    """``dst[at:at+n] = src[start:start+n]`` (``n`` may be 0) without array views.

    Unsigned indices: numba handles a negative signed index (counting from
    the end) with a branch per access, which keeps LLVM from vectorising the
    loop; indexed with ``uint64`` it becomes a plain copy, about ten times
    faster for 100-byte pieces.
    """
    d = np.uint64(at)
    s = np.uint64(start)
    for k in range(np.uint64(n) if n > 0 else np.uint64(0)):
        dst[d + k] = src[s + k]


@njit(cache=True, nogil=True, inline="always")
def byte_at(buf: Any, i: int) -> Any:  # pragma: no cover - compiled
    """``buf[i]`` for ``i >= 0``, without the negative-index branch (see above)."""
    return buf[np.uint64(i)]


# big-endian (Java order) fields; numba has no non-native byte order, so byte by byte


@njit(cache=True, nogil=True, inline="always")
def get_u32(buf: Any, p: int) -> int:  # pragma: no cover - compiled
    return (
        (np.int64(byte_at(buf, p)) << 24)
        | (np.int64(byte_at(buf, p + 1)) << 16)
        | (np.int64(byte_at(buf, p + 2)) << 8)
        | np.int64(byte_at(buf, p + 3))
    )


@njit(cache=True, nogil=True, inline="always")
def get_i32(buf: Any, p: int) -> int:  # pragma: no cover - compiled
    v = get_u32(buf, p)
    return v - (1 << 32) if v & 0x80000000 else v


@njit(cache=True, nogil=True, inline="always")
def put_i32(buf: Any, p: int, v: int) -> None:  # pragma: no cover - compiled
    at = np.uint64(p)
    buf[at] = (v >> 24) & 0xFF
    buf[at + np.uint64(1)] = (v >> 16) & 0xFF
    buf[at + np.uint64(2)] = (v >> 8) & 0xFF
    buf[at + np.uint64(3)] = v & 0xFF


@njit(cache=True, nogil=True, inline="always")
def put_i64(buf: Any, p: int, v: int) -> None:  # pragma: no cover - compiled
    for k in range(8):
        buf[np.uint64(p + k)] = (v >> (56 - 8 * k)) & 0xFF
