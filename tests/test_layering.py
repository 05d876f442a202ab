"""The layering holds at run time too: a server process never loads the client API.

(``make lint`` checks the import graph with import-linter; this checks what a
server actually loads, package ``__init__`` files included.)
"""

from __future__ import annotations

import subprocess
import sys

SERVER_MODULES = (
    "broker.cli", "broker.app", "broker.controller", "broker.remoting",
    "nameserver.cli", "nameserver.app", "nameserver.remoting",
    "connector.server.serve", "connector.server.remoting",
)  # fmt: skip
CLIENT_PREFIXES = ("connector.client", "connector.spark", "connector.remoting")


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
