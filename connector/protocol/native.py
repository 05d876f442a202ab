"""Which kernels run: the C modules built with pymq, else their plain-Python twins.

The per-record loops of the client (``connector.protocol._kernels``) and of the store
(``broker.store._kernels``) are C extension modules compiled by ``pip install``
(setup.py); nothing is compiled at run time. Each has a twin in plain Python and numpy
(``_kernels_py`` next to it) with the same functions and results, used when the C module
was not built (no C compiler: setup.py declares them optional) and by the tests, which
compare the two on the same inputs. ``PYMQ_KERNELS=python`` in the environment picks the
twins even where the C modules exist: read once, here, because the choice must be made
before any kernel module loads (as ``PYTHONHASHSEED`` is).

CRC-32 of long pieces: a C ``crc32`` is faster than the kernels' own slice-by-8 table
loop, so each C module is handed the address of the fastest found (``configure``), first
of zlib-ng's ``zng_crc32`` (the ``zlib-ng`` package, a dependency: it folds with
carry-less multiplies, 16 KiB in ~0.4 us against ~8 us for the table loop) and the C
library zlib's ``crc32``; ``LONG_CRC`` says which ("table": neither, the loop does all).
Only speed, not the answer, depends on it.
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["KERNELS_ENV", "LONG_CRC", "LONG_CRC_BYTES", "load"]

KERNELS_ENV = "PYMQ_KERNELS"  # "python": the plain-Python twins, even where C was built


def _c_crc32() -> tuple[str, int] | None:
    """(name, address) of a C crc32 taking (crc, buf, len), fastest first; None if
    neither zlib-ng nor the C library zlib can be loaded."""
    try:
        from zlib_ng import zlib_ng  # noqa: PLC0415 - only its library's address is used
    except ImportError:
        candidates: list[tuple[str, str | None, str]] = []
    else:
        candidates = [("zlib-ng", zlib_ng.__file__, "zng_crc32")]
    candidates.append(("zlib", "libz.so.1", "crc32"))
    for label, path, symbol in candidates:
        try:
            fn = getattr(ctypes.CDLL(path), symbol)
        except (OSError, AttributeError):
            continue
        address = ctypes.cast(fn, ctypes.c_void_p).value
        if address:
            return label, int(address)
    from ctypes import util  # noqa: PLC0415 - find_library runs ldconfig: only when needed

    name = util.find_library("z")
    if name:
        try:
            address = ctypes.cast(ctypes.CDLL(name).crc32, ctypes.c_void_p).value
        except (OSError, AttributeError):
            address = None
        if address:
            return "zlib", int(address)
    return None


_FOUND = _c_crc32()
LONG_CRC = _FOUND[0] if _FOUND else "table"  # what CRCs of long pieces use in C
_ADDRESS = _FOUND[1] if _FOUND else 0
# pieces at least this long go to the C crc32 (measured crossovers with the table loop:
# zlib-ng ~48 bytes, 100 B in 24 against 41 ns; zlib ~600 bytes)
LONG_CRC_BYTES = 64 if LONG_CRC == "zlib-ng" else 768


def load(compiled: str, plain: str, *, configure: bool = True) -> ModuleType:
    """The module ``compiled`` (configured, unless ``configure`` is False: a module without
    CRCs), else ``plain`` (see the module's text)."""
    if os.environ.get(KERNELS_ENV, "").lower() != "python":
        try:
            module: Any = importlib.import_module(compiled)
        except ImportError:
            log.warning("%s was not built (no C compiler?): plain-Python kernels, slower", compiled)
        else:
            if configure:
                module.configure(_ADDRESS, LONG_CRC_BYTES)
            return module  # type: ignore[no-any-return]
    return importlib.import_module(plain)
