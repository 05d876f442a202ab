"""The layering holds at run time too: a server process never loads the client API.

(``make lint`` checks the import graph with import-linter; this checks what a
server actually loads, package ``__init__`` files included.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from connector.local import ServerProcess

SERVER_MODULES = (
    "broker.cli", "broker.app", "broker.controller", "broker.remoting",
    "nameserver.cli", "nameserver.app", "nameserver.remoting",
    "connector.server.serve", "connector.server.remoting",
)  # fmt: skip
CLIENT_PREFIXES = ("connector.client", "connector.spark", "connector.local")


def test_servers_do_not_load_the_client() -> None:
    code = (
        "import importlib, sys\n"
        f"for m in {SERVER_MODULES!r}: importlib.import_module(m)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({CLIENT_PREFIXES!r})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_the_client_does_not_load_server_code() -> None:
    code = (
        "import sys\n"
        "from connector import Producer, PullConsumer, Admin, Message\n"
        "import connector.spark\n"
        "print(sorted(m for m in sys.modules if m.startswith(('broker', 'nameserver', "
        "'connector.server'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def _imported(log: Path) -> set[str]:
    """Module names from ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    names = set()
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


class _ConsoleScript(ServerProcess):
    """A server started as ``pymq namesrv`` / ``pymq broker``: the installed console
    script (or ``python -m connector.cli``, as ``pymq local`` runs them)."""

    script: Path | None = None

    @property
    def command(self) -> list[str]:
        if self.script is None:
            return super().command
        return [str(self.script), self.role, *self.args]


@pytest.mark.parametrize("entry", ["console-script", "python-m"])
def test_servers_started_through_the_cli_do_not_load_the_client(tmp_path: Path, entry: str) -> None:
    """What each server process imported up to its ready line and a stop."""
    script = Path(sys.executable).parent / "pymq"
    if entry == "console-script":
        assert script.exists(), f"no console script next to {sys.executable}"
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}

    def server(role: str, args: list[str]) -> ServerProcess:
        proc = _ConsoleScript(role, args, log_path=tmp_path / f"{role}.log", env=env)
        proc.script = script if entry == "console-script" else None
        return proc.start()

    namesrv = server("namesrv", ["--port", "0", "--http-port", "0", "--data", str(tmp_path / "ns")])
    try:
        broker = server(
            "broker",
            [
                *("--port", "0", "--http-port", "0", "--store", str(tmp_path / "store")),
                *("--namesrv", namesrv.addr),
            ],
        )
        broker.terminate()
    finally:
        namesrv.terminate()
    for log in (tmp_path / "namesrv.log", tmp_path / "broker.log"):
        loaded = _imported(log)
        assert "connector.server.serve" in loaded, log  # the log is what the server imported
        assert sorted(m for m in loaded if m.startswith(CLIENT_PREFIXES)) == [], log


def test_the_admin_cli_does_not_load_server_code() -> None:
    code = (
        "import sys\n"
        "from connector.cli import build_parser\n"
        "build_parser(['admin', 'topic', 'list'])\n"
        "print(sorted(m for m in sys.modules if m.startswith(('broker', 'nameserver', "
        "'connector.server', 'uvicorn', 'fastapi', 'starlette'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout
