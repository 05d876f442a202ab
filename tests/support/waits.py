"""Bounded waits: poll a condition until it holds or a deadline passes, never a bare sleep.

Every wait names what it waits for, and a missed deadline raises AssertionError saying
what did not happen and the last value seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    pred: Callable[[], T | None],
    timeout_s: float,
    interval_s: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll ``pred`` until it returns something truthy, and return that.

    AssertionError naming ``what`` if the deadline passes first.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = pred()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not met within {timeout_s:.1f} s (last: {result!r})")
        time.sleep(interval_s)


def holds_for(
    pred: Callable[[], object], duration_s: float, interval_s: float = 0.05, what: str = "it"
) -> None:
    """Assert ``pred`` stays truthy for ``duration_s`` (a bounded check of a negative)."""
    deadline = time.monotonic() + duration_s
    while True:
        result = pred()
        assert result, f"{what} stopped holding: {result!r}"
        if time.monotonic() >= deadline:
            return
        time.sleep(interval_s)
