"""Fixtures shared by several test directories, registered for all of tests/ by
tests/conftest.py (``pytest_plugins``).

``cluster``: 1 NameServer and 2 brokers per module, brokers registering every 0.5 s
(a directory that needs other settings defines its own ``cluster`` in its conftest.py,
which takes precedence there). ``servers`` / ``module_servers``: a ``Servers`` that
starts single processes and stops every one at teardown.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.local import LocalCluster
from tests.support.processes import Servers, clean_env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = clean_env(PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500")
    with LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=2, namesrvs=1, env=env) as c:
        yield c


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("servers"))
    try:
        yield s
    finally:
        s.stop_all()
