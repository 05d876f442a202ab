"""Unmodified RocketMQ clients against pymq: the client, and a cluster of 2 brokers per module.

The client is PyPI ``rocketmq`` 0.4.4 (Apache's C++ core), from the ``test`` extra. A
missing or broken client fails these tests; it never skips them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from rocketmq_cpp import CppClient, client_import_error

from connector.local import LocalCluster


@pytest.fixture(scope="session")
def cpp_client(tmp_path_factory: pytest.TempPathFactory) -> CppClient:
    reason = client_import_error(sys.executable)
    if reason is not None:
        pytest.fail(
            "the RocketMQ C++ client (PyPI rocketmq==0.4.4, pyproject's test extra) is not "
            f"usable, so unmodified RocketMQ clients are not proven to work: {reason}\n"
            "Install it with `make .venv/.installed-test`; its only wheel is for Linux x86_64.",
            pytrace=False,
        )
    return CppClient(python=sys.executable, home_root=tmp_path_factory.mktemp("rocketmq-cpp"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["PYMQ_REGISTER_NAME_SERVER_PERIOD_MS"] = "500"
    with LocalCluster(tmp_path_factory.mktemp("interop-cluster"), brokers=2, env=env) as c:
        yield c
