"""jobs/produce.py and jobs/etl.py as a user runs them: separate processes, real cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from test_batch import create_topic

from connector.server.local import LocalCluster

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
