"""docs/ says what the code does: the request codes served, the settings and their
defaults, and the code's pointers to the docs lead somewhere."""

from __future__ import annotations

import ast
import dataclasses
import enum
import re
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.store.config import StoreConfig
from connector.protocol.remoting import RequestCode, ResponseCode
from nameserver.config import NamesrvConfig

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
CONTRACT = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of its level or above."""
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n")
    rest = text[start + len(heading) + 1 :]
    ends = [m.start() for m in re.finditer(rf"^#{{1,{len(level)}}} ", rest, re.M)]
    return rest[: ends[0]] if ends else rest


def table_rows(text: str) -> list[list[str]]:
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
    return rows[1:] if rows else rows  # without the header


def documented_codes(heading: str) -> dict[str, int]:
    """Request names -> codes of a table: its first column holds the codes, the second
    the names, comma-separated alike."""
    out: dict[str, int] = {}
    for row in table_rows(section(PROTOCOL, heading)):
        codes = [int(c) for c in row[0].split(",")]
        names = [n.strip() for n in re.sub(r"\(.*?\)", "", row[1]).split(",")]
        assert len(codes) == len(names), row
        out.update(zip(names, codes, strict=True))
    return out


def served_codes(module: Path) -> dict[str, int]:
    """The RequestCode members a server module names: its registrations."""
    names = {
        node.attr
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in ("C", "RequestCode")
    }
    return {name: RequestCode[name].value for name in names}


@pytest.mark.parametrize(
    ("heading", "module"),
    [
        ("## NameServer requests", "nameserver/remoting.py"),
        ("## Broker requests", "broker/remoting/__init__.py"),
    ],
)
def test_the_request_codes_served_are_the_ones_documented(heading: str, module: str) -> None:
    assert documented_codes(heading) == served_codes(ROOT / module)


def test_every_response_code_is_documented() -> None:
    rows = table_rows(section(PROTOCOL, "## Response codes"))
    documented = {
        name.strip(): int(code)
        for row in rows
        for code, name in zip(row[0].split(","), row[1].split(","), strict=True)
    }
    assert documented == {c.name: c.value for c in ResponseCode}


def _default(f: dataclasses.Field[object]) -> str:
    if f.default is not dataclasses.MISSING:
        value: object = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        value = None
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else str(value)


@pytest.mark.parametrize(
    ("heading", "config"),
    [
        ("### NameServer", NamesrvConfig),
        ("### Broker (", BrokerConfig),
        ("### Broker store", StoreConfig),
    ],
)
def test_every_setting_is_documented_with_its_default(heading: str, config: type) -> None:
    title = next(line for line in CONTRACT.splitlines() if line.startswith(heading))
    rows = table_rows(section(CONTRACT, title))
    documented = {row[0].strip("`"): row[1].strip("`") for row in rows}
    fields = {f.name: _default(f) for f in dataclasses.fields(config) if f.name != "extra"}
    assert documented == fields


def test_code_points_at_the_docs_in_the_repository() -> None:
    # the design notes outside the repository are not a reader's reference
    stale = re.compile(r"\b(REMOTING|CONTRACT|ARCHITECTURE)\.md\b")
    hits = [
        f"{path.relative_to(ROOT)}:{n}"
        for pattern in ("*.py", "*.java")
        for path in ROOT.rglob(pattern)
        if ".venv" not in path.parts and "build" not in path.parts
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if stale.search(line)
    ]
    assert hits == []
    for link in re.findall(r"docs/(\w+\.md)", "\n".join(_pointers())):
        assert (ROOT / "docs" / link).is_file(), link


def _pointers() -> list[str]:
    return [
        line
        for pattern in ("*.py", "*.java")
        for path in ROOT.rglob(pattern)
        if ".venv" not in path.parts and "build" not in path.parts
        for line in path.read_text(encoding="utf-8").splitlines()
        if "docs/" in line
    ]
