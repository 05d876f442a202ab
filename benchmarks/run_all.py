"""Every benchmark in one go, then one report: what ``make bench`` runs.

    python benchmarks/run_all.py [--quick] [--only limits,store,...] [--results DIR] [--doc FILE]

Runs, one after the other (each starts and stops its own servers):

    limits  benchmarks/limits.py       disk and loopback limits, the machine
    store   benchmarks/store_bench.py  storage engine in-process
    server  benchmarks/server_bench.py the broker's edges side by side: remoting, REST
    client  benchmarks/client_bench.py Producer's whole send path (sync, async, batch)
    spark   benchmarks/spark_bench.py  Spark connector vs Spark's Python ceilings
    peers   benchmarks/peers_bench.py  pymq vs Redis Streams vs NATS JetStream
    push    benchmarks/push_bench.py   push consumer vs Redis / JetStream consumer groups
    ha      benchmarks/ha_bench.py     SYNC_MASTER vs ASYNC_MASTER vs no slave, slave catch-up
    tx      benchmarks/tx_bench.py     exactly-once sink vs at-least-once, batch commits, tx sends
    security benchmarks/security_bench.py  ACL on and TLS on vs neither: sends, batches

Each writes its JSON to ``DIR/<step>.json`` (``--json-out``) and its stdout
(its table and JSON) to ``DIR/<step>.log``; its progress lines (stderr) are
shown as they come, prefixed with the step and the elapsed time. A step that
fails is reported and the others still run. At the end ``run.json`` records
the steps (command, exit code, seconds) and ``report.py`` prints the combined
table and writes the Markdown report.

Full run: several runs per figure (limits 3, store 5, the others 3), results
in ``benchmarks/results/``, report ``docs/benchmarks.md``; 28-40 minutes on
2 cores (ha: ~3-4 of them, tx: ~3-4). ``--quick``: each script's smoke sizes
(mostly one run), results in ``benchmarks/results/quick/`` and the report next
to them (docs/ keeps the last full run); a few minutes. Ctrl-C or SIGTERM
stops the running step (its servers stop with it) and writes no report.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import IO, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import report  # noqa: E402

# (step, script, arguments of a full run)
STEPS: list[tuple[str, str, list[str]]] = [
    ("start", "first_start.py", ["--later", "3"]),
    ("limits", "limits.py", ["--runs", "3"]),
    ("store", "store_bench.py", ["--runs", "5"]),
    ("server", "server_bench.py", ["--runs", "3"]),
    ("client", "client_bench.py", ["--runs", "3"]),
    ("spark", "spark_bench.py", ["--runs", "3"]),
    ("peers", "peers_bench.py", ["--runs", "3"]),
    ("push", "push_bench.py", ["--runs", "3"]),
    ("ha", "ha_bench.py", ["--runs", "3"]),
    ("tx", "tx_bench.py", ["--runs", "3"]),
    ("security", "security_bench.py", ["--runs", "3"]),
]
STOP_GRACE_S = 60  # a step stopped by Ctrl-C / SIGTERM gets this long to stop its servers


class Clock:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def stamp(self) -> str:
        elapsed = int(time.monotonic() - self.t0)
        return f"{time.strftime('%H:%M:%S')} +{elapsed // 60:02d}:{elapsed % 60:02d}"

    def say(self, text: str) -> None:
        print(f"[{self.stamp()}] {text}", flush=True)


def relay(stream: IO[bytes], step: str, clock: Clock) -> None:
    """A step's progress lines, as they come, with the step's name and the time."""
    for raw in stream:
        line = raw.decode(errors="replace").rstrip()
        if line:
            print(f"[{clock.stamp()}]   {step} | {line}", flush=True)


def stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # handled like Ctrl-C: the running step is stopped


def run_step(
    step: str, argv: list[str], log_path: Path, clock: Clock, timeout_s: float
) -> tuple[int, float]:
    t0 = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        reader = threading.Thread(target=relay, args=(proc.stderr, step, clock), daemon=True)
        reader.start()
        try:
            rc = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            clock.say(f"{step}: still running after {timeout_s:.0f} s; stopping it")
            stop(proc)
            rc = proc.returncode if proc.returncode is not None else -1
        except KeyboardInterrupt:
            stop(proc)
            raise
        finally:
            reader.join(10)
    return rc, time.monotonic() - t0


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a step so that it stops its servers: a terminal's Ctrl-C has reached it
    already (same process group), so first give it a moment on its own; then SIGINT
    (every script stops its servers in ``finally`` on KeyboardInterrupt, while SIGTERM
    would end some of them without it); SIGTERM and SIGKILL only if that hangs."""
    ladder = ((0, 5.0), (signal.SIGINT, STOP_GRACE_S), (signal.SIGTERM, 15.0), (None, 15.0))
    for sig, wait_s in ladder:
        if proc.poll() is not None:
            return
        if sig is None:
            proc.kill()
        elif sig:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(wait_s)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke sizes: a few minutes")
    ap.add_argument("--only", default="", help="comma list of steps (default: all)")
    ap.add_argument("--results", type=Path, default=None, help="where the JSON and logs go")
    ap.add_argument("--doc", type=Path, default=None, help="the Markdown report to write")
    ap.add_argument(
        "--step-timeout-s", type=float, default=3600, help="a step still running is stopped"
    )
    args = ap.parse_args()
    names = [s[0] for s in STEPS]
    only = [s for s in args.only.split(",") if s] or names
    if not set(only) <= set(names):
        ap.error(f"--only: a comma list of {', '.join(names)}")
    results = (args.results or HERE / "results" / ("quick" if args.quick else "")).resolve()
    doc = args.doc or (results / "benchmarks.md" if args.quick else ROOT / "docs" / "benchmarks.md")
    results.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    # started in the background (``make bench &``), SIGINT is ignored and the steps would
    # inherit that; a handled signal is reset to the default on exec, so they get Ctrl-C back
    signal.signal(signal.SIGINT, signal.default_int_handler)
    clock = Clock()
    steps = [s for s in STEPS if s[0] in only]
    run: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "quick": args.quick,
        "command": " ".join(["python", *sys.argv]),
        "steps": [],
    }
    clock.say(f"{len(steps)} steps, {'quick' if args.quick else 'full'} run; results in {results}")
    try:
        for i, (step, script, full_args) in enumerate(steps, 1):
            json_path = results / f"{step}.json"
            json_path.unlink(missing_ok=True)  # a failed step must not leave an old file behind
            shown_json = (
                json_path.relative_to(ROOT) if json_path.is_relative_to(ROOT) else json_path
            )
            argv = [
                sys.executable, f"benchmarks/{script}", *(["--quick"] if args.quick else full_args),
                "--json-out", str(shown_json),  # the steps run in ROOT
            ]  # fmt: skip
            shown = " ".join(["python", *argv[1:]])
            clock.say(f"step {i}/{len(steps)} {step}: {shown}")
            rc, seconds = run_step(step, argv, results / f"{step}.log", clock, args.step_timeout_s)
            ok = rc == 0 and json_path.exists()
            verdict = "done" if ok else f"FAILED (exit {rc}; see {results / (step + '.log')})"
            clock.say(f"step {i}/{len(steps)} {step}: {verdict} in {seconds:.0f} s")
            run["steps"].append(
                {"step": step, "command": shown, "exit_code": rc, "seconds": round(seconds, 1)}
            )
    except KeyboardInterrupt:
        clock.say("interrupted: the running step was stopped; no report written")
        return 130
    run["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    (results / "run.json").write_text(json.dumps(run, indent=1))
    clock.say(f"report: {doc}")
    report.write(results, doc)
    failed = [s["step"] for s in run["steps"] if s["exit_code"] != 0]
    if failed:
        clock.say(f"failed steps: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
