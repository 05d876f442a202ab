"""Injectable clocks that only move when a test moves them.

``FakeClock`` reads in seconds, like ``time.time`` (the store, the ACL reloader);
``FakeMsClock`` in milliseconds (the NameServer's route table, the client's latency
and read routing).
"""

from __future__ import annotations

START_MS = 1_700_000_000_000


class FakeClock:
    """An injectable clock (seconds, like ``time.time``) that only moves when told."""

    def __init__(self, now: float = START_MS / 1000) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def set_ms(self, ms: int) -> None:
        self.now = ms / 1000


class FakeMsClock:
    """An injectable clock in ms that only moves when told."""

    def __init__(self, now_ms: float = START_MS) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms

    def advance(self, ms: float) -> None:
        self.now_ms += ms
