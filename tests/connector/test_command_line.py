"""``pymq`` as a user types it: options anywhere, the typed command's usage on an
argparse error, and every bad value a one-line error (no traceback), exit non-zero.

Each case runs the real console entry point in a subprocess; none needs a server
(the ones that do live in ``tests/connector/e2e/test_admin_cli.py``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PYMQ = [sys.executable, "-m", "connector.cli"]


def run(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    return subprocess.run(
        [*PYMQ, *args], capture_output=True, text=True, timeout=timeout_s, env=env,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture(scope="module")
def busy_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


# (args, what the one line must name); "{tmp}" is a fresh folder, "{busy}" a busy port
ONE_LINE_ERRORS = [
    (["broker", "--namesrv", "nohost", "--port", "0"], "NameServer address 'nohost'"),
    (["broker", "--namesrv", "127.0.0.1:99999", "--port", "0"], "127.0.0.1:99999"),
    (["broker", "--namesrv", "h:1;bad", "--port", "0"], "'bad'"),
    (["broker", "--port", "abc"], "port"),
    (["broker", "--port", "70000"], "70000"),
    (["broker", "--port", "0", "--http-port", "-1"], "http_port"),
    (["broker", "--port", "0", "--ha-port", "99999"], "ha_listen_port"),
    (["broker", "--port", "0", "--id", "x"], "broker_id"),
    (["broker", "--port", "0", "--host", "nohost.invalid"], "nohost.invalid"),
    (["broker", "--port", "{busy}"], "address already in use"),
    (["namesrv", "--port", "abc"], "port"),
    (["namesrv", "--port", "0", "--http-port", "70000"], "70000"),
    (["namesrv", "--port", "0", "--host", "nohost.invalid"], "nohost.invalid"),
    (["namesrv", "--port", "{busy}"], "address already in use"),
    (["local", "--brokers", "0"], "--brokers"),
    (["admin", "topic", "list"], "no NameServer address"),
    (["admin", "topic", "list", "--namesrv", "nohost"], "'nohost' is not host:port"),
    (["admin", "--namesrv", "127.0.0.1:abc", "topic", "list"], "127.0.0.1:abc"),
    (["admin", "topic", "list", "--namesrv", "127.0.0.1:1"], "cannot connect"),
    (["admin", "broker", "status", "nohost", "--namesrv", "127.0.0.1:1"], "127.0.0.1:1"),
    (["store", "inspect", "--store", "{tmp}"], "not a store directory"),
]


@pytest.mark.parametrize(
    ("args", "named"), ONE_LINE_ERRORS, ids=[" ".join(a) for a, _ in ONE_LINE_ERRORS]
)
def test_a_bad_value_is_one_line(
    args: list[str], named: str, tmp_path: Path, busy_port: int
) -> None:
    store = ["--store", str(tmp_path / "store")] if args[0] == "broker" else []
    typed = [a.replace("{tmp}", str(tmp_path)).replace("{busy}", str(busy_port)) for a in args]
    res = run(*typed, *store)
    assert res.returncode != 0
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"pymq {args[0]}: "), lines
    assert named in lines[0]
    assert "ready" not in res.stdout
    assert not (tmp_path / "store").exists()  # nothing was created


@pytest.mark.parametrize(
    ("args", "usage", "error"),
    [
        (["admin", "topic", "create"], "pymq admin topic create", "required: name"),
        (["admin", "topic", "list", "--bogus"], "pymq admin topic list", "--bogus"),
        (["admin", "topic", "create", "T", "--queues", "x"], "pymq admin topic create", "--queues"),
        (["admin", "topic"], "pymq admin topic", "ACTION"),
        (["broker", "--flush", "maybe"], "pymq broker", "--flush"),
        (["local", "--port", "x"], "pymq local", "--port"),
        (["namesrv", "--bogus"], "pymq namesrv", "--bogus"),
    ],
)
def test_an_argparse_error_shows_the_typed_commands_usage(
    args: list[str], usage: str, error: str
) -> None:
    res = run(*args)
    assert res.returncode == 2
    lines = res.stderr.splitlines()
    assert len(lines) == 2, res.stderr
    assert lines[0].startswith(f"usage: {usage} ")
    assert lines[1].startswith(f"{usage}: error: ") and error in lines[1]


@pytest.mark.parametrize(
    "args",
    [
        ["admin", "--namesrv", "127.0.0.1:1", "--json", "topic", "list"],
        ["admin", "topic", "--namesrv", "127.0.0.1:1", "list", "--json"],
        ["admin", "topic", "list", "--namesrv", "127.0.0.1:1", "--json"],
    ],
)
def test_admin_options_stand_anywhere(args: list[str]) -> None:
    res = run(*args)
    # accepted everywhere: the command ran and failed on the (closed) NameServer
    assert res.returncode == 1 and "cannot connect to 127.0.0.1:1" in res.stderr, res.stderr
