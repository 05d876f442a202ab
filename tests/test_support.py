"""The test tree's own rules: helpers come from tests.support only, and every test has
exactly one kind mark (tests/conftest.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
SUPPORT = TESTS / "support"
KINDS = ("unit", "integration", "spark", "interop")


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, nested ones too; relative ones as
    ``.name`` (one dot a level)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, "." * node.level + (node.module or "")))
    return out


def test_modules_import_helpers_only_from_tests_support() -> None:
    """No test module, conftest or helper imports a conftest or another module of the
    test tree (``from conftest import``, ``from test_batch import``, a sibling helper by
    its bare name, ``tests.broker.server.conftest``): one copy of each helper, in
    tests/support/, and an import that means the same in any collection order."""
    # bare names that are modules of the test tree outside tests.support
    local = {p.stem for p in python_files() if SUPPORT not in p.parents} - {"__init__"}

    def allowed(module: str) -> bool:
        top = module.split(".", maxsplit=1)[0]
        if top == "tests":
            return module == "tests.support" or module.startswith("tests.support.")
        return not module.startswith(".") and top != "conftest" and top not in local

    wrong = [
        f"{path.relative_to(TESTS.parent)}:{line}: {module}"
        for path in python_files()
        for line, module in imported_modules(path)
        if not allowed(module)
    ]
    assert not wrong, "import helpers from tests.support instead:\n" + "\n".join(wrong)


def test_the_scan_sees_the_imports_it_forbids(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import conftest\n"
        "from tests.broker.server.conftest import wait_until\n"
        "def f():\n"
        "    from .helpers import x\n"
        "from tests.support.waits import wait_until\n"
    )
    assert sorted(imported_modules(sample)) == [
        (1, "conftest"),
        (2, "tests.broker.server.conftest"),
        (4, ".helpers"),
        (5, "tests.support.waits"),
    ]


def test_every_collected_test_has_exactly_one_kind(request: pytest.FixtureRequest) -> None:
    """Whatever this run collected (``-m unit`` included): one kind mark each."""
    items = request.session.items
    assert items
    wrong = [
        f"{item.nodeid}: {kinds}"
        for item in items
        if len(kinds := [m.name for m in item.iter_markers() if m.name in KINDS]) != 1
    ]
    assert not wrong, "\n".join(wrong)
