"""How long pymq takes to start right after ``pip install``: a broker's ready line, a
client's first send.

Installs the checkout (or ``--source``) into a fresh venv the way
tests/spark/test_install.py does (offline, ``--no-build-isolation``, ``--no-deps``,
then a .pth to this interpreter's site-packages for the dependencies), then times,
with that venv's Python, from a folder outside the checkout:

* ``broker_first_s``: ``pymq broker`` from its start to its ready line, the first
  time after the install (anything compiled or cached on first use is paid here);
* ``broker_later_s``: the same, started again ``--later`` times (the median);
* ``client_first_send_s``: a new process's ``import connector`` through its first
  answered ``send``, against that broker and a name server; ``client_first_batch_s``
  through a 64-message ``send_batch`` after it (the compiled batch encoder);
  ``client_first_pull_s``: a new ``PullConsumer``'s first ``pull`` of those 64 in the
  same process (its decode kernels); the medians of ``--later`` processes.

Prints one JSON object. ``python benchmarks/first_start.py --help``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
PIP_TIMEOUT_S = 300.0
READY_TIMEOUT_S = 120.0

# Runs in the fresh venv: the time from before ``import connector`` to the first answer.
CLIENT = """
import sys, time
t0 = time.perf_counter()
from connector import Message, Producer, PullConsumer
p = Producer(group="first-start", namesrv=sys.argv[1]).start()
r = p.send(Message(topic=sys.argv[2], body=b"first"))
first = time.perf_counter() - t0
# 64 plain messages: the compiled batch encoder (connector.protocol.fastbatch)
p.send_batch([Message(topic=sys.argv[2], body=b"b%d" % i) for i in range(64)], queue=r.queue)
batch = time.perf_counter() - t0
p.shutdown()
t1 = time.perf_counter()
c = PullConsumer(group="first-start", namesrv=sys.argv[1])
got = c.pull(r.queue, r.queue_offset + 1, 64)
pull = time.perf_counter() - t1
c.shutdown()
assert len(got.messages) == 64, got.status
print("RESULT", first, batch, pull, r.status.name)
"""


def clean_env(**extra: str) -> dict[str, str]:
    drop = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYMQ_")}
    return env | extra


def run(cmd: list[str | Path], *, env: dict[str, str], cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(c) for c in cmd],
        capture_output=True,
        text=True,
        timeout=PIP_TIMEOUT_S,
        check=False,
        env=env,
        cwd=cwd,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{cmd} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def copy_source(src: Path, dest: Path) -> Path:
    """The distribution inputs of ``src`` (top-level files and packages), no build output."""
    dest.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", "*.so")
    for entry in src.iterdir():
        if entry.name.startswith("."):
            continue
        if entry.is_file():
            shutil.copy2(entry, dest / entry.name)
        elif (entry / "__init__.py").is_file():
            shutil.copytree(entry, dest / entry.name, ignore=skip)
    return dest


def backend_path(dest: Path) -> Path:
    """A folder with only setuptools in it (what pip's isolated build env would hold)."""
    dest.mkdir(parents=True)
    dist = importlib.metadata.distribution("setuptools")
    tops = {Path(f).parts[0] for f in dist.files or ()}
    for top in sorted(tops - {"..", "__pycache__"}):
        (dest / top).symlink_to(Path(str(dist.locate_file(top))))
    return dest


def install(source: Path, venv: Path, *, build_path: Path) -> tuple[Path, float]:
    """A fresh venv with ``source`` pip-installed into it (built with the setuptools of
    ``build_path``); (its Python, install seconds)."""
    run([sys.executable, "-m", "venv", "--without-pip", venv], env=clean_env())
    python = venv / "bin" / "python"
    env = clean_env(PYTHONPATH=str(build_path))
    t0 = time.perf_counter()
    run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         "--no-build-isolation", source],
        env=env,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    ask = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(run([python, "-c", ask], env=clean_env()).strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "zz_dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python, seconds


class Started:
    """A ``pymq`` server process of the venv, up to its ready line."""

    def __init__(self, python: Path, args: list[str], cwd: Path) -> None:
        pymq = python.parent / "pymq"
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [str(pymq), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            cwd=cwd,
            env=clean_env(),
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + READY_TIMEOUT_S
        line = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line or " ready: " in line:
                break
        self.seconds = time.perf_counter() - t0
        if " ready: " not in line:
            self.stop()
            raise RuntimeError(f"pymq {args[0]} printed no ready line: {line!r}")
        self.line = line

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)


def measure(python: Path, work: Path, *, later: int) -> dict[str, object]:
    """The start times of a broker and a client in the venv of ``python``."""
    work.mkdir(parents=True, exist_ok=True)
    ns_args = ["namesrv", "--port", "0", "--http-port", "0", "--data", str(work / "ns")]
    namesrv = Started(python, ns_args, work)
    try:
        ns_addr = namesrv.line.split("remoting ")[1].split(",")[0].split(" ")[0]
        broker_args = ["broker", "--port", "0", "--http-port", "0", "--ha-port", "0",
                       "--namesrv", ns_addr]  # fmt: skip
        starts = []
        for i in range(later + 1):
            broker = Started(python, [*broker_args, "--store", str(work / f"store{i}")], work)
            starts.append(broker.seconds)
            if i < later:
                broker.stop()
        try:
            sends, batches, pulls = [], [], []
            (work / "client.py").write_text(CLIENT)
            for _ in range(later):
                out = run([python, "client.py", ns_addr, "FirstStart"], env=clean_env(), cwd=work)
                first, batch, pull, status = out.split("RESULT ")[1].split()
                assert status == "SEND_OK", out
                sends.append(float(first))
                batches.append(float(batch))
                pulls.append(float(pull))
        finally:
            broker.stop()
    finally:
        namesrv.stop()
    return {
        "broker_first_s": round(starts[0], 2),
        "broker_later_s": round(statistics.median(starts[1:]), 2),
        "broker_later_all_s": [round(s, 2) for s in starts[1:]],
        "client_first_send_s": round(statistics.median(sends), 3),
        "client_first_send_all_s": [round(s, 3) for s in sends],
        "client_first_batch_s": round(statistics.median(batches), 3),
        "client_first_pull_s": round(statistics.median(pulls), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=CHECKOUT, help="a pymq checkout")
    parser.add_argument("--later", type=int, default=3, help="later starts and clients timed")
    parser.add_argument("--quick", action="store_true", help="one later start and client")
    parser.add_argument("--json-out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    later = 1 if args.quick else args.later
    with tempfile.TemporaryDirectory(prefix="pymq-first-start-") as tmp:
        source = copy_source(args.source, Path(tmp) / "src")
        build = backend_path(Path(tmp) / "backend")
        python, pip_s = install(source, Path(tmp) / "venv", build_path=build)
        result = measure(python, Path(tmp) / "work", later=later)
    out = {"source": str(args.source), "pip_install_s": round(pip_s, 1), **result}
    out["targets"] = targets(out)
    print(json.dumps(out))
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(out, indent=1))


# issue #42's targets: the first broker start after pip install, every later start, and a
# client process's first send from the start of its import
TARGETS = (
    ("first `pymq broker` ready after pip install", "broker_first_s", 5.0),
    ("a later `pymq broker` start", "broker_later_s", 2.0),
    ("a client process's first send, from its import", "client_first_send_s", 0.5),
)


def targets(result: dict[str, object]) -> list[dict[str, object]]:
    out = []
    for what, key, goal in TARGETS:
        value = result.get(key)
        met = isinstance(value, int | float) and value <= goal
        out.append({"what": what, "goal": f"<= {goal} s", "value": f"{value} s", "met": met})
    return out


if __name__ == "__main__":
    main()
