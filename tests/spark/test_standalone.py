"""jobs/produce.py and jobs/etl.py through spark-submit on a real standalone cluster.

A Spark Master and a Worker run as daemons, started by Spark's own
``sbin/spark-daemon.sh`` (what start-master.sh and start-worker.sh call; the
pip package of pyspark ships only that script), bound to loopback, with
logs, pid files, configuration and the worker's work dir under tmp_path. The
jobs' tasks then run in an executor JVM the worker launched, not in the
driver, and what they wrote is read back with the pymq client.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pyspark
import pytest

from connector import MessageExt, MessageQueue, PullConsumer, PullStatus
from connector.local import LocalCluster
from tests.support.cluster import create_topic

JOBS = Path(__file__).resolve().parents[2] / "jobs"
SPARK_HOME = Path(pyspark.__file__).resolve().parent
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
IDENT = "pymq-test"  # part of the daemons' pid and log file names
DAEMON_TIMEOUT_S = 120.0  # a JVM daemon up and listening, on a busy 2-core machine
SUBMIT_TIMEOUT_S = 300.0  # one spark-submit, driver start to exit
ROWS = 20_000

log = logging.getLogger(__name__)


def _ps(*fields: str) -> list[list[str]]:
    out = subprocess.run(
        ["ps", "-A", "-o", ",".join(f"{f}=" for f in fields)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return [line.split(None, len(fields) - 1) for line in out.splitlines() if line.strip()]


def _alive(pid: int) -> bool:
    """Running, not a zombie nobody reaped (the daemons are not our children)."""
    return any(int(p) == pid and not s.startswith("Z") for p, s in _ps("pid", "stat"))


def _descendants(pids: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in _ps("pid", "ppid"):
        children.setdefault(int(ppid), []).append(int(pid))
    found: set[int] = set()
    todo = list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@dataclass
class Standalone:
    url: str  # spark://127.0.0.1:<port>
    ui: str  # the master's web UI, whose /json shows workers and applications
    work_dir: Path  # the worker's: one app-* directory per application
    log_dir: Path
    pid_dir: Path
    env: dict[str, str]

    def daemon(self, action: str, cls: str, *args: str, check: bool = True) -> str:
        script = SPARK_HOME / "sbin" / "spark-daemon.sh"
        out = subprocess.run(
            ["bash", str(script), action, cls, "1", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=DAEMON_TIMEOUT_S,
            check=False,
            start_new_session=True,  # the daemon outlives the script; keep it off our signals
        )
        if check:
            assert out.returncode == 0, f"spark-daemon.sh {action} {cls}: {out.stdout}{out.stderr}"
        return out.stdout

    def pid(self, cls: str) -> int:
        return int((self.pid_dir / f"spark-{IDENT}-{cls}-1.pid").read_text())

    def log(self, cls: str) -> str:
        logs = list(self.log_dir.glob(f"spark-{IDENT}-{cls}-1-*.out"))
        return logs[0].read_text(errors="replace") if logs else ""

    def wait_log(self, cls: str, pattern: str) -> re.Match[str]:
        """Wait for a line of the daemon's log, failing early if the daemon died."""
        pid = self.pid(cls)
        deadline = time.monotonic() + DAEMON_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(pattern, self.log(cls))
            if found:
                return found
            assert _alive(pid), f"{cls} exited:\n{self.log(cls)[-3000:]}"
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} in the {cls} log:\n{self.log(cls)[-3000:]}")

    def state(self) -> dict[str, Any]:
        r = httpx.get(f"{self.ui}/json/", timeout=10, follow_redirects=True)
        r.raise_for_status()
        out: dict[str, Any] = r.json()
        return out

    def wait_state(self, ready: Any, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + DAEMON_TIMEOUT_S
        while True:
            state = self.state()
            if ready(state):
                return state
            if time.monotonic() > deadline:
                raise AssertionError(f"master never showed {what}: {state}")
            time.sleep(0.2)

    def submit(self, *args: str) -> tuple[subprocess.CompletedProcess[str], int]:
        """spark-submit in client mode; the result and the driver JVM's pid."""
        cmd = [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--master", self.url,
            "--driver-memory", "512m",
            "--executor-memory", "512m",
            "--conf", "spark.ui.enabled=false",
            *args,
        ]  # fmt: skip
        # spark-submit execs the driver JVM, which starts the Python driver: one process group
        proc = subprocess.Popen(
            cmd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        t0 = time.monotonic()
        try:
            out, err = proc.communicate(timeout=SUBMIT_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            msg = f"{args[0]} still running after {exc.timeout} s:\n{err[-3000:]}"
            raise AssertionError(msg) from exc
        except BaseException:  # pytest-timeout, ^C: no driver left behind
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        job = Path(args[0]).stem
        log.info("spark-submit %s: %.1f s", job, time.monotonic() - t0)
        (self.log_dir / f"driver-{job}.out").write_text(out + err)  # next to the daemons' logs
        done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        assert done.returncode == 0, f"{args[0]} failed:\n{err[-3000:]}"
        return done, proc.pid

    def stop(self) -> None:
        """stop-worker.sh / stop-master.sh, then SIGKILL whatever of ours is still running."""
        ours = {int(p.read_text()) for p in self.pid_dir.glob("*.pid")}
        ours |= _descendants(ours)  # executors and their Python workers, if any were left
        for cls in (WORKER, MASTER):
            self.daemon("stop", cls, check=False)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in ours) and time.monotonic() < deadline:
            time.sleep(0.2)
        for pid in ours:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def spark_env(base: Path) -> dict[str, str]:
    # nothing of the caller's Spark or pymq settings: a clean machine with pymq installed
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYMQ_", "SPARK_", "PYSPARK_", "_SPARK"))
    }
    for d in ("conf", "logs", "pids", "work"):
        (base / d).mkdir(parents=True)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_CONF_DIR=str(base / "conf"),  # empty: no spark-env.sh, no spark-defaults.conf
        SPARK_LOG_DIR=str(base / "logs"),
        SPARK_PID_DIR=str(base / "pids"),
        SPARK_IDENT_STRING=IDENT,
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="512m",
        # the REST submission server would take the shared port 6066
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        # drivers and executors run this interpreter, the one pymq is installed in
        PYSPARK_PYTHON=sys.executable,
        # short-lived JVMs (daemons, drivers, executors) on two cores: the C1 JIT alone and
        # the serial GC start them faster (each says "Picked up JAVA_TOOL_OPTIONS" on stderr)
        JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    )
    return env


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[Standalone]:
    base = tmp_path / "spark"
    env = spark_env(base)
    sa = Standalone("", "", base / "work", base / "logs", base / "pids", env)
    t0 = time.monotonic()
    try:
        # ports 0: the daemons pick free ones and log them, so nothing races for a port
        sa.daemon("start", MASTER, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0")
        sa.url = sa.wait_log(MASTER, r"Starting Spark master at (spark://\S+)")[1]
        ui_port = sa.wait_log(MASTER, r"'MasterUI' on port (\d+)")[1]
        sa.ui = f"http://127.0.0.1:{ui_port}"
        sa.wait_log(MASTER, r"New state: ALIVE")
        sa.daemon(
            "start", WORKER,
            "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
            "--cores", "2", "--memory", "1g", "--work-dir", str(sa.work_dir),
            sa.url,
        )  # fmt: skip
        sa.wait_state(lambda s: any(w["state"] == "ALIVE" for w in s["workers"]), "an ALIVE worker")
        log.info("master and worker up: %.1f s", time.monotonic() - t0)
        yield sa
    finally:
        sa.stop()


def read_topic(namesrv: str, topic: str) -> dict[MessageQueue, list[MessageExt]]:
    """Every message of every queue of ``topic``, by queue."""
    out: dict[MessageQueue, list[MessageExt]] = {}
    with PullConsumer(group="standalone-check", namesrv=namesrv) as consumer:
        for mq in consumer.fetch_queues(topic):
            offset, end = consumer.min_offset(mq), consumer.max_offset(mq)
            out[mq] = []
            while offset < end:
                res = consumer.pull(mq, offset, 1000)
                assert res.status is PullStatus.FOUND, (mq, offset, res)
                out[mq] += res.messages
                offset = res.next_begin_offset
    return out


def executor_stderrs(sa: Standalone, app_id: str) -> list[str]:
    return [p.read_text(errors="replace") for p in sorted(sa.work_dir.glob(f"{app_id}/*/stderr"))]


@pytest.mark.timeout(900)  # two JVM daemons and two spark-submits: minutes on a busy machine
def test_jobs_on_standalone_cluster(
    standalone: Standalone, cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "StandaloneIn")
    create_topic(cluster, "StandaloneOut")

    produced, produce_pid = standalone.submit(
        str(JOBS / "produce.py"), "--namesrv", ns, "--topic", "StandaloneIn", "--rows", str(ROWS)
    )
    assert f"produced {ROWS:,} rows into StandaloneIn" in produced.stdout, produced.stdout
    copied, etl_pid = standalone.submit(
        str(JOBS / "etl.py"),
        "--namesrv", ns,
        "--source-topic", "StandaloneIn",
        "--sink-topic", "StandaloneOut",
        "--checkpoint", str(tmp_path / "etl-checkpoint"),
        "--available-now",
    )  # fmt: skip
    assert f"etl stopped after {ROWS:,} rows" in copied.stdout, copied.stdout

    # both ran as applications of this master, their tasks in executors the worker launched
    state = standalone.wait_state(
        lambda s: len(s["completedapps"]) == 2 and not s["activeapps"], "two completed apps"
    )
    apps = {a["name"]: a for a in state["completedapps"]}
    assert set(apps) == {"pymq-produce", "pymq-etl"}, state["completedapps"]
    for name, driver_pid in (("pymq-produce", produce_pid), ("pymq-etl", etl_pid)):
        assert apps[name]["state"] == "FINISHED", apps[name]
        stderrs = executor_stderrs(standalone, apps[name]["id"])
        assert stderrs, f"no executor of {name} under {standalone.work_dir}"
        started = [re.search(r"Started daemon with process name: (\d+)@", e) for e in stderrs]
        executor_pids = {int(m[1]) for m in started if m}
        assert executor_pids and driver_pid not in executor_pids, (driver_pid, executor_pids)
        assert all("CoarseGrainedExecutorBackend" in e for e in stderrs)
        assert sum(e.count("Finished task") for e in stderrs) >= 2, stderrs[0][-3000:]

    # what they wrote, as the pymq client sees it
    source = read_topic(ns, "StandaloneIn")
    sink = read_topic(ns, "StandaloneOut")
    expected = Counter(b"event-%d" % i for i in range(ROWS))
    for topic in (source, sink):
        # (no spread check: a batch request fills one queue, and 20,000 rows make about
        # a few requests of the default 10,000, which may all land on one broker)
        assert Counter(m.body for msgs in topic.values() for m in msgs) == expected
    by_id = {m.msg_id: m for msgs in source.values() for m in msgs}
    assert len(by_id) == ROWS
    for msgs in sink.values():
        for m in msgs:
            origin = by_id[m.properties["etl_source_msg_id"]]
            assert (m.body, m.tags, m.keys) == (origin.body, origin.tags, origin.keys)
            assert m.properties["seq"] == origin.properties["seq"] == m.body[6:].decode()
            assert m.tags == ("even" if int(m.properties["seq"]) % 2 == 0 else "odd")
