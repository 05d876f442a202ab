"""A real cluster for push consumer tests (1 NameServer, 2 brokers, short delays and
lock expiry), and members: push consumers in processes of their own."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from connector.local import LocalCluster
from tests.support.push import Member

DELAYS = "100ms 100ms 100ms 100ms 100ms 100ms 100ms 100ms"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(
        PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500",
        PYMQ_MESSAGE_DELAY_LEVEL=DELAYS,
        PYMQ_REBALANCE_LOCK_MAX_LIVE_TIME_MS="5000",
    )
    with LocalCluster(tmp_path_factory.mktemp("push-cluster"), brokers=2, env=env) as c:
        yield c


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Callable[..., Member]]:
    started: list[Member] = []

    def start(**params: Any) -> Member:
        m = Member(params, tmp_path / f"member-{len(started)}.log")
        started.append(m)
        return m

    yield start
    for m in started:
        m.stop()
