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


def test_times_are_readable_and_json_keeps_epoch_ms(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliTimes", "--queues", "1", "--namesrv", ns))
    ok(pymq("admin", "message", "send", "CliTimes", "tick", "--namesrv", ns))
    lines = ok(pymq("admin", "topic", "status", "CliTimes", "--namesrv", ns)).splitlines()
    assert "LAST_UPDATE_TIMESTAMP" in lines[0]
    assert any(" ago)" in line for line in lines[1:]) and any("never" in x for x in lines[1:])
    rows = json.loads(ok(pymq("admin", "topic", "status", "CliTimes", "--namesrv", ns, "--json")))
    assert all(isinstance(r["last_update_timestamp"], int) for r in rows)
    assert max(r["last_update_timestamp"] for r in rows) > 1_700_000_000_000
    lines = ok(pymq("admin", "cluster", "list", "--namesrv", ns)).splitlines()
    assert "LAST_HEARTBEAT" in lines[0] and all(" ago)" in line for line in lines[1:])


def test_consumer_reset_takes_now_an_iso_time_or_epoch_ms(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    ok(pymq("admin", "topic", "create", "CliReset", "--queues", "1", "--namesrv", ns))
    for i in range(3):
        ok(pymq("admin", "message", "send", "CliReset", f"m{i}", "--namesrv", ns))

    def reset(when: str) -> int:
        out = pymq("admin", "consumer", "reset", "cli-reset", "CliReset", "--timestamp", when,
                   "--namesrv", ns, "--json")  # fmt: skip
        return sum(r["offset"] for r in json.loads(ok(out)))

    assert reset("now") == 3  # past the last message
    assert reset("2000-01-01T00:00:00") == 0
    assert reset("2000-01-01T00:00:00Z") == 0
    assert reset("0") == 0
    assert reset("4102444800000") == 3  # 2100-01-01
    bad = pymq("admin", "consumer", "reset", "g", "CliReset", "--timestamp", "soon")
    assert bad.returncode == 2 and "ISO date-time" in bad.stderr.splitlines()[-1]
