"""jobs/produce.py and jobs/etl.py as a user runs them: separate processes, real cluster."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from connector.local import LocalCluster
from tests.support.cluster import create_topic

JOBS = Path(__file__).resolve().parents[2] / "jobs"


def run_job(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["PYSPARK_PYTHON"] = sys.executable
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )


def test_produce_then_etl(spark: Any, cluster: LocalCluster, tmp_path: Path) -> None:
    ns = cluster.namesrv_addr
    create_topic(cluster, "JobIn")
    create_topic(cluster, "JobOut")
    out = run_job(str(JOBS / "produce.py"), "--namesrv", ns, "--topic", "JobIn", "--rows", "4000")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "produced 4,000 rows" in out.stdout
    args = [
        str(JOBS / "etl.py"),
        "--namesrv",
        ns,
        "--source-topic",
        "JobIn",
        "--sink-topic",
        "JobOut",
        "--checkpoint",
        str(tmp_path / "ck"),
        "--available-now",
        "--max-per-trigger",
        "1500",
    ]
    out = run_job(*args)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "etl stopped after 4,000 rows" in out.stdout
    # run again from the checkpoint: nothing new, nothing copied twice
    out = run_job(*args)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "etl stopped after 0 rows" in out.stdout
    copied = spark.read.format("pymq").option("namesrv", ns).option("topic", "JobOut").load()
    rows = copied.select("body", "properties").collect()
    assert Counter(bytes(r.body) for r in rows) == Counter(b"event-%d" % i for i in range(4000))
    assert all(r.properties["etl_source_msg_id"] and r.properties["seq"] for r in rows)


def test_etl_exactly_once_killed_at_random_points_copies_each_message_once(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    """jobs/etl.py --exactly-once as a user runs it, killed -9 (the whole process group:
    the Python driver and Spark's JVM) at random moments, restarted each time on the same
    checkpoint, then drained: the sink holds every source message once."""
    ns = cluster.namesrv_addr
    create_topic(cluster, "EoJobIn")
    create_topic(cluster, "EoJobOut")
    out = run_job(str(JOBS / "produce.py"), "--namesrv", ns, "--topic", "EoJobIn", "--rows", "6000")
    assert out.returncode == 0, out.stderr[-2000:]
    ck = tmp_path / "ck"
    args = [
        str(JOBS / "etl.py"), "--namesrv", ns, "--source-topic", "EoJobIn",
        "--sink-topic", "EoJobOut", "--checkpoint", str(ck), "--max-per-trigger", "400",
        "--exactly-once",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["PYSPARK_PYTHON"] = sys.executable
    rng = random.Random(38)
    kills = 0
    for _ in range(3):
        proc = subprocess.Popen(
            [sys.executable, *args], env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            # a moment once the query has committed its first batch: while it reads,
            # writes or commits a later one. (Spark 4.2 will not restart a checkpoint
            # killed inside its first batch: a start at batch 0 wants the offsets and
            # commits directories empty, STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY,
            # whatever the sink; seen once on a slow machine.)
            deadline = time.monotonic() + 120
            while not (ck / "commits" / "0").exists() and time.monotonic() < deadline:
                assert proc.poll() is None, "the job ended by itself"
                time.sleep(0.1)
            time.sleep(rng.uniform(0.5, 6.0))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        kills += 1
    out = run_job(*args, "--available-now")
    assert out.returncode == 0, out.stderr[-2000:]
    copied = spark.read.format("pymq").option("namesrv", ns).option("topic", "EoJobOut").load()
    got = Counter(bytes(r.body) for r in copied.select("body").collect())
    assert kills == 3
    assert got == Counter(b"event-%d" % i for i in range(6000))  # 0 missing, 0 twice
