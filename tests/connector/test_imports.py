"""What importing pymq costs: the compiled kernels load on first use, not on import."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("module", ["connector", "nameserver.app", "pyspark_pymq"])
def test_import_loads_no_numba(module: str) -> None:
    code = f"import sys, {module}; print(sorted(m for m in ('numba',) if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
