"""Unmodified RocketMQ clients against pymq: the client (the cluster of 2 brokers per module
is the shared ``cluster`` fixture of ``tests.support.fixtures``).

The client is PyPI ``rocketmq`` 0.4.4 (Apache's C++ core), from the ``test`` extra. A
missing or broken client fails these tests; it never skips them.
"""

from __future__ import annotations

import sys

import pytest

from tests.support.rocketmq_cpp import CppClient, client_import_error


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
