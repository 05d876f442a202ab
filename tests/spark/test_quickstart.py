"""jobs/quickstart.py as `make run` runs it: own cluster, own Spark, counts checked end to end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

JOB = Path(__file__).resolve().parents[2] / "jobs" / "quickstart.py"
TIMEOUT_S = 420  # a quiet machine needs about a minute; a busy one starts Python slowly


def run_quickstart(*args: str, **env_overrides: str) -> tuple[int, str, str]:
    # no PYMQ_* settings, and no gateway of a Spark this process may run: the job makes its own
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYMQ_", "PYSPARK_GATEWAY"))}
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(env_overrides)
    proc = subprocess.Popen(
        [sys.executable, str(JOB), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.terminate()  # the job stops its queries, Spark and its cluster on SIGTERM
        try:
            out, err = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate(timeout=30)
        pytest.fail(f"quickstart ran over {TIMEOUT_S} s:\n{out[-3000:]}\n{err[-3000:]}")
    return proc.returncode, out, err


def count(pattern: str, text: str) -> int:
    m = re.search(pattern, text, re.MULTILINE)
    assert m, f"no line matching {pattern!r} in:\n{text}"
    return int(m.group(1).replace(",", ""))


def test_quickstart_counts_add_up(tmp_path: Path) -> None:
    data = tmp_path / "data"
    code, out, err = run_quickstart("--seconds", "8", "--rate", "500", "--data-dir", str(data))
    assert code == 0, f"{out[-3000:]}\n{err[-3000:]}"
    produced = count(r"^  produced +([\d,]+) events into quickstart-events", out)
    consumed = count(r"^  consumed +([\d,]+) events by the aggregation", out)
    assert produced == consumed > 0
    # the results table, read back from quickstart-results: windows, then the totals
    assert re.search(r"^  window +view +click +cart +purchase +events +amount$", out, re.M)
    assert re.search(r"^  \d\d:\d\d:\d\d-\d\d:\d\d:\d\d( +[\d,]+){5} +[\d,.]+$", out, re.M)
    kinds = r"(?: +[\d,]+){4}"  # view, click, cart, purchase
    assert count(rf"^  total{kinds} +([\d,]+) +[\d,.]+$", out) == produced
    assert "quickstart OK: produced == consumed" in out
    assert re.search(r"^  group lag +[\d,-]+ \(quickstart-agg on quickstart-events\)$", out, re.M)
    per_broker = re.findall(r"^  (broker-\w) +([\d,]+) events of quickstart-events", out, re.M)
    assert len(per_broker) == 2
    assert sum(int(n.replace(",", "")) for _, n in per_broker) == produced
    # an explicit --data-dir is kept, with the servers' logs; no server outlives the job
    assert (data / "logs" / "broker-a.log").exists()
    assert not servers_using(data)


def test_quickstart_refuses_a_used_data_dir(tmp_path: Path) -> None:
    (tmp_path / "old").write_text("from an earlier run")
    code, _, err = run_quickstart("--data-dir", str(tmp_path))
    assert code == 2
    assert "is not empty" in err


def test_quickstart_says_java_is_missing(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "JAVA_HOME": ""}  # no java anywhere
    code, _, err = run_quickstart("--data-dir", str(tmp_path / "data"), **env)
    assert code == 1
    assert err.strip() == (
        "error: java not found (set JAVA_HOME or put java on PATH); Spark needs Java 17+"
    )
    assert not (tmp_path / "data").exists()  # nothing was started


def servers_using(data: Path) -> list[str]:
    """Command lines of live processes that name ``data`` (Linux; elsewhere: none known)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().decode(errors="replace").split("\0")
        except OSError:  # the process ended meanwhile
            continue
        if any(str(data) in a for a in args):
            found.append(" ".join(args))
    return found
