"""connector.extras reads pymq's extras back from the installed metadata (the test venv
has pymq[test], which takes every extra)."""

from __future__ import annotations

import sys

from connector.extras import install_hint, missing, requirements

SERVER = ["fastapi", "uvicorn", "prometheus-client", "pyyaml"]
if sys.version_info < (3, 11):
    SERVER.insert(3, "tomli")  # only where tomllib is missing


def test_an_extra_is_its_requirements_on_this_python() -> None:
    assert requirements("server") == SERVER
    assert requirements("spark") == ["pyspark", "pyarrow"]


def test_pymq_all_expands_the_extras_it_names() -> None:
    assert requirements("all") == [*SERVER, "pyspark", "pyarrow"]


def test_an_unknown_extra_requires_nothing() -> None:
    assert requirements("no-such-extra") == []
    assert missing("no-such-extra") == []


def test_the_test_install_misses_nothing_of_the_servers_and_spark() -> None:
    assert missing("server") == []
    assert missing("spark") == []


def test_the_hint_names_the_extra_and_what_is_missing() -> None:
    assert install_hint("server", ["fastapi", "uvicorn"]) == (
        "needs pymq's server extra (fastapi, uvicorn not installed): pip install 'pymq[server]'"
    )
