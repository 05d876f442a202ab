"""A real cluster for client tests: 2 NameServers and 2 brokers, started once per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.local import LocalCluster
from tests.support.processes import clean_env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data: Path = tmp_path_factory.mktemp("cluster")
    env = clean_env(
        PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500",
        PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS="200",
        PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS="3000",
    )
    with LocalCluster(data, brokers=2, namesrvs=2, env=env) as c:
        yield c
