"""``pymq broker`` and ``pymq local`` as a user runs them: bad input, config layers, Ctrl-C."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from tests.support.processes import Servers, env_with, port_open
from tests.support.rest import clusters, health
from tests.support.waits import wait_until

PYMQ = [sys.executable, "-m", "connector.cli"]


def run_broker(
    args: Sequence[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``pymq broker ARGS`` expected to fail fast."""
    return subprocess.run(
        [*PYMQ, "broker", *args],
        env=env_with(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode != 0, res
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("pymq broker: "), lines
    assert "ready at" not in res.stdout
    return lines[0]


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (["--port", "notanumber"], {}, "port"),
        (
            ["--port", "0"],
            {"PYMQ_MAPPED_FILE_SIZE_COMMIT_LOG": "abc"},
            "PYMQ_MAPPED_FILE_SIZE_COMMIT_LOG",
        ),
        (["--port", "0", "--segment-size", "12"], {}, "mapped_file_size_commit_log"),
    ],
    ids=["port-not-a-number", "env-not-a-number", "segment-too-small"],
)
def test_bad_setting_is_one_line(
    tmp_path: Path, args: list[str], env: dict[str, str], expected: str
) -> None:
    res = run_broker([*args, "--store", str(tmp_path / "store")], env)
    line = one_line_error(res)
    assert expected in line
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "store").exists()  # failed before touching the store


def test_bad_choice_is_argparse_usage_and_exit_2(tmp_path: Path) -> None:
    res = run_broker(["--flush", "maybe", "--store", str(tmp_path / "store")])
    assert res.returncode == 2
    lines = res.stderr.splitlines()
    assert lines[0].startswith("usage: pymq broker")
    assert lines[-1].startswith("pymq broker: error: argument --flush: invalid choice: 'maybe'")
    assert "Traceback" not in res.stderr


def test_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        res = run_broker(["--port", str(port), "--store", str(tmp_path / "store")])
    line = one_line_error(res)
    assert "address already in use" in line
    assert str(port) in line


def test_unknown_key_in_config_file_is_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "conf-file.toml"
    conf.write_text('broker_name = "broker-x"\nbroker_colour = "blue"\n', encoding="utf-8")
    res = run_broker(["--config", str(conf), "--port", "0", "--store", str(tmp_path / "s")])
    line = one_line_error(res)
    assert "broker_colour" in line


def test_config_file_env_and_flag_layers(tmp_path: Path, servers: Servers) -> None:
    conf = tmp_path / "broker.toml"
    conf.write_text(
        'broker_name = "broker-x"\n\n[store]\nflush_disk_type = "SYNC_FLUSH"\n', encoding="utf-8"
    )
    file_arg = ["--config", str(conf)]
    env_layer = {"PYMQ_BROKER_NAME": "broker-env", "PYMQ_FLUSH_DISK_TYPE": "ASYNC_FLUSH"}
    cases = {
        # what runs -> (broker name, flush type) it must end up with
        "file": (
            servers.broker_process(name=None, store=tmp_path / "s1", args=file_arg),
            ("broker-x", "SYNC_FLUSH"),
        ),
        "file+flag": (
            servers.broker_process(
                name="broker-flag", store=tmp_path / "s2", args=[*file_arg, "--flush", "async"]
            ),
            ("broker-flag", "ASYNC_FLUSH"),
        ),
        "file+env": (
            servers.broker_process(name=None, store=tmp_path / "s3", args=file_arg, env=env_layer),
            ("broker-env", "ASYNC_FLUSH"),
        ),
        "file+env+flag": (
            servers.broker_process(
                name="broker-flag",
                store=tmp_path / "s4",
                args=[*file_arg, "--flush", "sync"],
                env=env_layer,
            ),
            ("broker-flag", "SYNC_FLUSH"),
        ),
    }
    servers.start_all([proc for proc, _ in cases.values()])
    for label, (proc, (name, flush)) in cases.items():
        assert re.match(
            rf"pymq broker {name} ready: remoting 127\.0\.0\.1:\d+, "
            rf"http http://127\.0\.0\.1:\d+ ",
            proc.ready_line,
        ), (
            label,
            proc.ready_line,
        )
        assert proc.ready_line.endswith(f"{flush})"), (label, proc.ready_line)
        h = health(proc.http_addr)
        assert (h["broker_name"], h["flush_disk_type"]) == (name, flush), label


# -- pymq local ----------------------------------------------------------------------------


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (Linux /proc; empty elsewhere)."""
    out = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = entry.read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces, so split after the last ")"
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:  # a zombie is dead, just not reaped yet
        return stat.read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


@pytest.fixture
def local_launcher(
    tmp_path: Path,
) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str], list[int]]]:
    """``pymq local`` in the foreground; its stdout lines arrive on a queue."""
    data = tmp_path / "local"
    stderr = open(tmp_path / "local.stderr", "w", encoding="utf-8")  # noqa: SIM115
    proc = subprocess.Popen(
        [*PYMQ, "local", "--brokers", "2", "--namesrvs", "1", "--data", str(data)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=env_with(),
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    children: list[int] = []  # filled by the test once the servers are up
    try:
        yield proc, lines, children
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for pid in children:  # servers a failed launcher left behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        stderr.close()


def test_local_cluster_runs_until_ctrl_c(
    tmp_path: Path, local_launcher: tuple[subprocess.Popen[str], queue.Queue[str], list[int]]
) -> None:
    proc, lines, children = local_launcher
    seen: list[str] = []

    def ready_line() -> str | None:
        while True:
            try:
                line = lines.get(timeout=0.05)
            except queue.Empty:
                assert proc.poll() is None, f"pymq local exited {proc.returncode}: {seen}"
                return None
            seen.append(line)
            if line.startswith("pymq local ready"):
                return line

    ready = wait_until(ready_line, 90.0, interval_s=0, what="pymq local ready line")
    children += child_pids(proc.pid)
    listed = re.findall(
        r"^\s+(\S+)\s+remoting (\S+), http http://(\S+)$", "\n".join(seen), re.MULTILINE
    )
    addrs = {name: remoting for name, remoting, _ in listed}
    https = {name: http for name, _, http in listed}
    assert set(addrs) == {"namesrv-0", "broker-a", "broker-b"}, seen
    ns = addrs["namesrv-0"]
    assert f"namesrv {ns}, 2 brokers" in ready
    if Path("/proc").is_dir():
        assert len(children) == 3, children

    def brokers_known() -> bool:
        live = {b["addr"] for b in clusters(https["namesrv-0"])["live"]}
        return live == {addrs["broker-a"], addrs["broker-b"]}

    wait_until(brokers_known, 5.0, what="namesrv knows both brokers")
    data = tmp_path / "local"
    for name in ("broker-a", "broker-b"):
        assert health(https[name])["broker_name"] == name
        assert (data / name / "abort").exists()  # running

    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(20) == 0
    for name in ("broker-a", "broker-b"):
        assert (data / name / "commitlog").is_dir()
        assert not (data / name / "abort").exists(), f"{name} did not stop cleanly"
    for addr in [*addrs.values(), *https.values()]:
        assert not port_open(addr), f"{addr} still accepts connections"
    wait_until(lambda: not any(alive(pid) for pid in children), 5.0, what="no server left")

    def said_stopped() -> bool:
        while not lines.empty():
            seen.append(lines.get())
        return "pymq local stopped" in seen

    wait_until(said_stopped, 5.0, what="pymq local stopped line")
