"""``pymq namesrv`` as a real process: ready line, HTTP, SIGTERM, bad flags, busy port, expiry."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.namesrv import register_json

REPO = Path(__file__).resolve().parents[2]
READY_RE = re.compile(
    r"^pymq namesrv ready: remoting ([^\s:]+):(\d+), http http://([^\s:]+):(\d+) \(data (.+)\)$"
)
DEADLINE_S = 20.0


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without any PYMQ_* setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(extra)
    return env


def namesrv_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "connector.cli", "namesrv", *args]


class Namesrv:
    """A running ``pymq namesrv`` process; its stdout is drained by a thread."""

    def __init__(self, data_dir: Path, env: dict[str, str], args: tuple[str, ...] = ()) -> None:
        self.stderr_path = data_dir / "namesrv.stderr"
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                namesrv_cmd("--port", "0", "--data", str(data_dir), *args),
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._drain, daemon=True).start()
        self.remoting_port = 0
        self.port = self._wait_ready(data_dir)
        self.url = f"http://127.0.0.1:{self.port}"

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _wait_ready(self, data_dir: Path) -> int:
        deadline = time.monotonic() + DEADLINE_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            if m := READY_RE.match(line):
                assert Path(m.group(5)) == data_dir
                self.remoting_port = int(m.group(2))
                return int(m.group(4))  # the REST API's: what these tests read
        self.stop()
        pytest.fail(f"namesrv never became ready; stderr: {self.stderr_path.read_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and return the exit code (killed after a bounded wait)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                return self.proc.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(DEADLINE_S)
                pytest.fail("namesrv did not stop within the deadline after SIGTERM")
        return self.proc.returncode


StartNamesrv = Callable[..., Namesrv]


@pytest.fixture
def start_namesrv(tmp_path: Path) -> Iterator[StartNamesrv]:
    started: list[Namesrv] = []

    def start(*args: str, **env: str) -> Namesrv:
        """Start on port 0 with ``args`` appended and ``env`` added to a clean environment."""
        srv = Namesrv(tmp_path, clean_env(**env), args)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait(DEADLINE_S)


def run_failing(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        namesrv_cmd(*args),
        cwd=REPO,
        env=env or clean_env(),
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )


def test_serve_register_route_and_sigterm(start_namesrv: StartNamesrv, tmp_path: Path) -> None:
    srv = start_namesrv()
    with httpx.Client(base_url=srv.url, timeout=5) as http:
        assert http.get("/health").json()["status"] == "ok"
        resp = http.post("/brokers/register", json=register_json())
        assert resp.json() == {"ok": True, "master_addr": "127.0.0.1:10911"}
        route = http.get("/routes/T").json()
        assert route["queues"][0]["write_queue_nums"] == 4
        assert route["brokers"][0]["addrs"] == {"0": "127.0.0.1:10911"}
        assert http.put("/kv/ns/k", json={"value": "v"}).status_code == 200
    assert srv.stop() == 0
    assert (tmp_path / "kvConfig.json").exists()


def test_sigint_stops_cleanly(start_namesrv: StartNamesrv) -> None:
    # Ctrl-C is a requested stop like SIGTERM: graceful shutdown, exit 0
    assert start_namesrv().stop(signal.SIGINT) == 0


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (("--port", "notanint"), {}, "port"),
        (("--port", "70000"), {}, "out of range"),
        ((), {"PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS": "abc"}, "PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS"),
        ((), {"PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": "0"}, "must be positive"),
        (("--config", "/nonexistent/namesrv.toml"), {}, "does not exist"),
    ],
    ids=["port-not-int", "port-range", "env-not-int", "env-zero", "missing-config"],
)
def test_bad_setting_is_one_line(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], needle: str
) -> None:
    done = run_failing(*args, "--data", str(tmp_path), env=clean_env(**env))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("pymq namesrv: ")
    assert needle in lines[0]
    assert done.stdout == ""


def test_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = run_failing("--port", str(port), "--data", str(tmp_path))
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "address already in use" in lines[0]


def test_config_file_env_and_flag_layers(start_namesrv: StartNamesrv, tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.toml"
    conf.write_text('host = "bogus.invalid"\nport = 1\nlog_level = "info"\n')
    # the environment beats the file's host, the flag beats its port; its log level stays
    srv = start_namesrv("--config", str(conf), PYMQ_HOST="127.0.0.1")
    with httpx.Client(base_url=srv.url, timeout=5) as http:
        http.post("/brokers/register", json=register_json()).raise_for_status()
    assert srv.stop() == 0
    log = srv.stderr_path.read_text()
    assert re.search(r"INFO nameserver\.routeinfo: broker broker-a id 0 .* registered", log), log


def test_bad_env_value_beats_a_good_file(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.toml"
    conf.write_text('log_level = "info"\n')
    done = run_failing("--config", str(conf), env=clean_env(PYMQ_LOG_LEVEL="loud"))
    assert done.returncode != 0
    (line,) = done.stderr.strip().splitlines()
    assert "log_level" in line


def test_silent_broker_expires_end_to_end(start_namesrv: StartNamesrv) -> None:
    srv = start_namesrv(
        PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS="200", PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS="1000"
    )
    with httpx.Client(base_url=srv.url, timeout=5) as http:
        http.post("/brokers/register", json=register_json()).raise_for_status()
        assert http.get("/routes/T").status_code == 200
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if http.get("/clusters").json() == {"clusters": {}, "brokers": [], "live": []}:
                break
            time.sleep(0.05)
        else:
            pytest.fail("the silent broker was never expired")
        resp = http.get("/routes/T")
        assert resp.status_code == 404
        assert resp.json()["code"] == "TOPIC_NOT_EXIST"
    assert srv.stop() == 0
