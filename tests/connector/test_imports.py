"""What importing pymq costs: the kernels load on first use, not on import, and nothing
compiles at run time (no numba, no llvmlite: the kernels are C built by pip)."""

from __future__ import annotations

import subprocess
import sys

import pytest

KERNELS = ("connector.protocol._kernels", "connector.protocol._kernels_py")
COMPILERS = ("numba", "llvmlite")


def loaded(code: str, names: tuple[str, ...]) -> str:
    check = f"{code}; import sys; print(sorted(m for m in {names!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=True
    )
    return out.stdout.strip()


@pytest.mark.parametrize("module", ["connector", "nameserver.app", "pyspark_pymq"])
def test_import_loads_no_kernels(module: str) -> None:
    assert loaded(f"import {module}", KERNELS + COMPILERS) == "[]"


def test_the_broker_and_the_read_path_load_no_compiler() -> None:
    code = (
        "import broker.app, broker.controller, connector.spark.columnar, "
        "connector.protocol.fastbatch, connector.protocol.pulled"
    )
    assert loaded(code, COMPILERS + KERNELS[:1]) == "['connector.protocol._kernels']"
