"""Fixtures: brokers built as the CLI builds them, a real store under tmp_path,
driven in-process through FastAPI's TestClient (its ``with`` runs the lifespan).

No NameServer is configured, so registration is skipped (with a warning).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.rest_app import ClientFactory, start_client


@pytest.fixture
def make_client(tmp_path: Path) -> Iterator[ClientFactory]:
    """Start brokers on stores under ``tmp_path/<name>``; all stopped at teardown.

    Keyword arguments are BrokerConfig fields; ``extra`` adds StoreConfig keys;
    ``raise_server_exceptions`` goes to the TestClient.
    """
    with ExitStack() as stack:

        def factory(name: str = "store", **kwargs: Any) -> TestClient:
            return start_client(stack, tmp_path / name, **kwargs)

        yield factory


@pytest.fixture
def client(make_client: ClientFactory) -> TestClient:
    """A fresh broker with its own store in ``tmp_path/store``."""
    return make_client()


@pytest.fixture(scope="module")
def shared_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One broker for a whole module (tests use their own topic names)."""
    base = tmp_path_factory.mktemp("broker")
    with ExitStack() as stack:
        yield start_client(stack, base / "store")
