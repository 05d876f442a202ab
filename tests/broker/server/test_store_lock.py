"""A broker owns its store: a second broker process on the same store directory exits
with one line naming the holder, changes nothing, and the first keeps serving."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.processes import Servers, env_with
from tests.support.rest import create_topic, health, pull_all, send

PYMQ = [sys.executable, "-m", "connector.cli"]


def snapshot(store: Path) -> dict[str, tuple[int, int]]:
    """The store's files (but the checkpoints the live broker rewrites every second):
    (inode, mtime in ns) of each."""
    return {
        str(p.relative_to(store)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in sorted(store.rglob("*"))
        if p.is_file() and not p.name.startswith("checkpoint")
    }


def test_a_second_broker_on_a_live_store_exits_and_changes_nothing(
    tmp_path: Path, servers: Servers
) -> None:
    store = tmp_path / "store"
    first = servers.broker(store=store)
    create_topic(first.http_addr, "Locked")
    send(first.http_addr, "Locked", "before")
    assert (store / "abort").exists()
    before = snapshot(store)

    second = subprocess.run(
        [*PYMQ, "broker", "--name", "broker-a", "--port", "0", "--store", str(store)],
        env=env_with(None), capture_output=True, text=True, timeout=60, check=False,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert second.returncode != 0
    lines = second.stderr.splitlines()
    assert len(lines) == 1, second.stderr
    assert lines[0].startswith("pymq broker: store ") and f"process {first.pid}" in lines[0]
    assert "ready" not in second.stdout

    # the live broker's files are as they were (its abort file included), and it serves
    assert snapshot(store) == before
    assert (store / "lock").read_text().strip() == str(first.pid)
    assert health(first.http_addr)["status"] == "ok"
    send(first.http_addr, "Locked", "after")
    bodies = [m["body_base64"] for q in range(4) for m in pull_all(first.http_addr, "Locked", q)]
    assert sorted(bodies) == ["YWZ0ZXI=", "YmVmb3Jl"]

    # stopped cleanly, it lets go: the same store starts again
    assert first.terminate() == 0
    assert not (store / "abort").exists()
    again = servers.broker(store=store)
    assert health(again.http_addr)["status"] == "ok"
