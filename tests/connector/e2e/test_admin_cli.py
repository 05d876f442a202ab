"""``pymq admin`` as an operator types it, against a live cluster: options before and
after the subcommand, tables and ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from connector.server.local import LocalCluster

PYMQ = [sys.executable, "-m", "connector.cli"]


def pymq(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    return subprocess.run(
        [*PYMQ, *args], capture_output=True, text=True, timeout=timeout_s, env=env,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def ok(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_options_before_and_after_the_subcommand(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliAnywhere", "--namesrv", ns, "--queues", "2"))
    before = json.loads(ok(pymq("admin", "--namesrv", ns, "--json", "topic", "list")))
    after = json.loads(ok(pymq("admin", "topic", "list", "--namesrv", ns, "--json")))
    middle = json.loads(ok(pymq("admin", "topic", "--json", "list", "--namesrv", ns)))
    assert {"topic": "CliAnywhere"} in before
    assert before == after == middle
    table = ok(pymq("admin", "topic", "list", "--namesrv", ns)).splitlines()
    assert table[0].split() == ["TOPIC"] and "CliAnywhere" in [r.strip() for r in table]


def test_a_remoting_command_at_an_http_port_says_so(cluster: LocalCluster) -> None:
    http = cluster.namesrvs[0].http_addr
    res = pymq("admin", "topic", "list", "--namesrv", http)
    assert res.returncode == 1
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert f"{http} is an HTTP (REST) port, not a remoting port" in lines[0]
