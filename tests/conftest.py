"""What every test directory shares: the fixtures of ``tests.support.fixtures`` and the
kind marks.

Each test gets exactly one of the marks ``unit``, ``integration``, ``spark``, ``interop``
(registered in pyproject.toml, ``--strict-markers``), by this rule, first match wins:

1. under tests/spark/: ``spark`` (needs Java and pyspark; many start a cluster);
2. under tests/interop/: ``interop`` (unmodified RocketMQ clients against pymq);
3. ``integration`` for a test that starts processes: one marked so
   (``pytestmark = pytest.mark.integration``), one in a directory of
   INTEGRATION_DIRS, one that uses a fixture of PROCESS_FIXTURES, or one whose
   module names anything of PROCESS_NAMES (``subprocess``, ``LocalCluster``, ...:
   the module starts processes, so all its tests count as integration);
4. everything else: ``unit`` (in-process, no processes started, seconds at most).

So a new test is marked by where it lives and what it uses, not by remembering to;
a test that starts processes some other way marks itself ``integration``.
``make test-fast`` runs ``-m unit``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

pytest_plugins = ["tests.support.fixtures"]

KINDS = ("unit", "integration", "spark", "interop")
TESTS = Path(__file__).parent
# every test in these directories drives real server processes
INTEGRATION_DIRS = (
    TESTS / "broker" / "server",
    TESTS / "connector" / "e2e",
    TESTS / "connector" / "push",
)
# fixtures that start server processes: a test that uses one is an integration test
PROCESS_FIXTURES = frozenset({"cluster", "servers", "module_servers"})
# names (imported or used) by which a module starts processes
PROCESS_NAMES = frozenset(
    {"subprocess", "multiprocessing", "Popen", "LocalCluster", "ServerProcess", "Servers",
     "start_acl_cluster"}
)  # fmt: skip


@functools.cache
def starts_processes(path: Path) -> bool:
    """Does the module at ``path`` name anything of PROCESS_NAMES?"""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.name.split(".", maxsplit=1)[0] for a in node.names)
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.split(".", maxsplit=1)[0])
    return not PROCESS_NAMES.isdisjoint(names)


def kind_of(item: pytest.Item) -> str:
    """The kind mark ``item`` gets (the rule of this module's docstring)."""
    path = Path(item.path)
    if path.is_relative_to(TESTS / "spark"):
        return "spark"
    if path.is_relative_to(TESTS / "interop"):
        return "interop"
    if item.get_closest_marker("integration") is not None:
        return "integration"
    if any(path.is_relative_to(d) for d in INTEGRATION_DIRS):
        return "integration"
    if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
        return "integration"
    if path.suffix == ".py" and starts_processes(path):
        return "integration"
    return "unit"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        kind = kind_of(item)
        item.add_marker(getattr(pytest.mark, kind))
