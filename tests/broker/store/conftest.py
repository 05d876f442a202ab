"""The store tests' fixture: started stores under tmp_path (helpers: tests.support.store)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.store.config import StoreConfig
from broker.store.store import MessageStore
from tests.support.store import SMALL, StoreFactory


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[StoreFactory]:
    """Build (and by default start) stores under ``tmp_path/store``; shut down at teardown.

    Keyword arguments are StoreConfig overrides, except ``clock``, ``disk_usage``,
    ``start`` and ``cls``.
    """
    made: list[MessageStore] = []

    def factory(
        *,
        start: bool = True,
        cls: type[MessageStore] = MessageStore,
        clock: Callable[[], float] | None = None,
        disk_usage: Callable[[Path], tuple[int, int, int]] | None = None,
        **overrides: Any,
    ) -> MessageStore:
        config = StoreConfig(store_dir=tmp_path / "store", **{**SMALL, **overrides})
        kwargs: dict[str, Any] = {}
        if clock is not None:
            kwargs["clock"] = clock
        if disk_usage is not None:
            kwargs["disk_usage"] = disk_usage
        store = cls(config, **kwargs)
        made.append(store)
        if start:
            store.start()
        return store

    yield factory
    for store in made:
        if store.running:
            store.shutdown()
