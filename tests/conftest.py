"""What every test directory shares: the fixtures of ``tests.support.fixtures``."""

from __future__ import annotations

pytest_plugins = ["tests.support.fixtures"]
