"""What replication costs: SYNC_MASTER vs ASYNC_MASTER vs no slave, on loopback.

    python benchmarks/ha_bench.py [--runs 3] [--quick] [--json-out FILE]

Three setups, each a ``LocalCluster`` of one NameServer and one master broker
started fresh (data in a temp dir, stopped at the end, also on Ctrl-C or
SIGTERM), every process on 127.0.0.1 and this process as the client
(pymq's ``Producer``, 100-byte bodies, topics of 8 queues):

* ``none``: the master alone (ASYNC_MASTER, no slave): the baseline;
* ``async``: ASYNC_MASTER and one slave (answers once the master has the
  message; the slave follows);
* ``sync``: SYNC_MASTER and one slave (answers SEND_OK once the in-sync slave
  has the bytes).

A slave is a broker of the same name with ``--id 1 --role SLAVE`` and its
own store; it finds its master through the NameServer (brokers register
every second, ``PYMQ_REGISTER_NAME_SERVER_PERIOD_MS=1000``). Before any
clock starts, a setup with a slave waits (bounded) until the master's
``/health`` lists the slave in sync and a probe send answers SEND_OK: right
after start a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its slave caught
up. Every send measured must answer SEND_OK (else the run fails): a
SYNC_MASTER whose slave dropped out answers SLAVE_NOT_AVAILABLE without
waiting, which would flatter it.

Measured, the shapes of ``peers_bench.py`` (imported, not copied) so the
figures read next to its:

1. single send: ``Producer.send`` one at a time from one thread, p50 and p99
   latency and msgs/s (ASYNC_FLUSH brokers);
2. batched produce: ``Producer.send_batch`` of 1,000 from one thread,
   building the ``Message`` objects included (ASYNC_FLUSH); for the setups
   with a slave also the slave's lag (master ``/health``) when the clock
   stopped: how far an ASYNC_MASTER's slave trails a burst;
3. durable produce: a second cluster per setup with SYNC_FLUSH brokers
   (``PYMQ_FLUSH_DISK_TYPE``), 64 threads sharing one ``Producer`` calling
   ``send`` (``peers_bench``'s workload 3): ``none`` is SYNC_FLUSH alone,
   ``sync`` is SYNC_MASTER + SYNC_FLUSH (a send waits for the master's fsync
   and for the slave's copy). Next to it, in the same minutes, redis-server
   with ``--appendonly yes --appendfsync always``, 64 threads each with its
   own connection calling XADD (``peers_bench.redis_server``); when
   redis-server or redis-py is missing that figure is None and the table
   says why;
4. slave catch-up: a master alone (ASYNC_MASTER) is filled with ~400 MB
   (quick: ~40 MB) of 16 KiB messages by ``send_batch`` of 200, then
   ``os.sync()`` (the master's dirty pages written: the slave reads a log at
   rest, as after a slave's outage); then a slave with an empty store starts.
   Its ``/health`` is polled every 20 ms (bounded): from the first reading
   where it is connected to its master to the first where it has the
   master's whole log (``max_offset``) with no lag, bytes replicated in that
   window / seconds = MB/s (MB = 10^6 bytes). Also shown: seconds from the
   slave's process start to caught up (Python start, registration and
   handshake included).

Setups alternate within each run (workloads 1-2 for the three, then 3 for
the three and Redis, then 4), their order rotating from run to run, so that
the figures compared are measured in the same minutes; each figure is the
median of ``--runs`` runs (min-max). Prints one table with the issue's
targets (their goals are defined here; ``report.py`` reads them) and the
JSON (date, machine, load, command).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import httpx  # noqa: E402
from peers_bench import (  # noqa: E402
    BATCH,
    BODY,
    DURABLE_TOPIC,
    PRODUCERS,
    WARM_TOPIC,
    load,
    log,
    pymq_env,
    pymq_topics,
    pymq_warm,
    redis_server,
    run_threads,
    server_binary,
    stop_on_sigterm,
    stop_stray_children,
    summary,
    timed_singles,
)

import connector  # noqa: E402
from connector import Message, Producer, SendResult, SendStatus  # noqa: E402
from connector.local import LocalCluster, ServerProcess  # noqa: E402

SETUPS = ("none", "async", "sync")
LABELS = {
    "none": "no slave",
    "async": "ASYNC_MASTER + 1 slave",
    "sync": "SYNC_MASTER + 1 slave",
    "redis": "Redis appendfsync always",
}
ROLES = {"none": "ASYNC_MASTER", "async": "ASYNC_MASTER", "sync": "SYNC_MASTER"}
SLAVES = {"none": 0, "async": 1, "sync": 1}
SINGLE_TOPIC = "HaSingle"
BATCH_TOPIC = "HaBatch"
CATCHUP_TOPIC = "HaCatchUp"
CATCHUP_BODY_BYTES = 16384
CATCHUP_BATCH = 200  # 200 x 16 KiB is ~3.3 MB a request, under the 4 MiB limit
CATCHUP_MB = 400  # quick: a tenth
MB = 1_000_000
REGISTER_PERIOD_MS = 1000
POLL_S = 0.02  # the slave's /health during catch-up
READY_TIMEOUT_S = 60.0  # a slave in sync and a probe answered SEND_OK
CATCHUP_TIMEOUT_S = 300.0
SIZES = ("singles", "messages", "durable_per_producer", "catchup_mb")

# the targets; report.py reads them from here
SYNC_P99_MAX_X_ASYNC = 2.0  # SYNC_MASTER single-send p99 <= 2x ASYNC_MASTER's
SYNC_BATCH_MIN_X_NONE = 0.7  # SYNC_MASTER batched throughput >= 0.7x no slave
SYNC_DURABLE_MIN_X_REDIS = 2.0  # SYNC_MASTER + SYNC_FLUSH, 64 threads >= 2x Redis always
CATCHUP_MIN_MB_S = 200.0  # a new slave catches up at >= 200 MB/s


def ha_env(setup: str, flush: str) -> dict[str, str]:
    """The brokers' environment: peers_bench's (no inherited PYMQ_*), the master's
    role (slaves are told ``--role SLAVE`` by LocalCluster) and a 1 s registration."""
    return {
        **pymq_env(flush),
        "PYMQ_BROKER_ROLE": ROLES[setup],
        "PYMQ_REGISTER_NAME_SERVER_PERIOD_MS": str(REGISTER_PERIOD_MS),
    }


def health_ha(http: httpx.Client, proc: ServerProcess) -> dict[str, Any]:
    ha: dict[str, Any] = http.get(f"http://{proc.http_addr}/health").json()["ha"]
    return ha


class Statuses:
    """Answers other than SEND_OK, counted across threads; any of them fails the run."""

    def __init__(self) -> None:
        self.not_ok: Counter[str] = Counter()
        self._lock = threading.Lock()

    def check(self, result: SendResult) -> None:
        if result.status is not SendStatus.SEND_OK:
            with self._lock:
                self.not_ok[result.status.value] += 1

    def raise_if_any(self, what: str) -> None:
        if self.not_ok:
            raise RuntimeError(f"{what}: answers not SEND_OK: {dict(self.not_ok)}")


def wait_replicating(cluster: LocalCluster, producer: Producer, setup: str) -> float:
    """Bounded wait until the master lists its slave in sync and a probe send answers
    SEND_OK (a SYNC_MASTER answers SLAVE_NOT_AVAILABLE until then); seconds waited."""
    if not SLAVES[setup]:
        return 0.0
    master = cluster.brokers[0]
    t0 = time.monotonic()
    deadline = t0 + READY_TIMEOUT_S
    with httpx.Client(timeout=10) as http:
        while True:
            slaves = health_ha(http, master).get("slaves", [])
            probe = producer.send(Message(topic=WARM_TOPIC, body=BODY))
            if any(s["in_sync"] for s in slaves) and probe.status is SendStatus.SEND_OK:
                return time.monotonic() - t0
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{setup}: no slave in sync within {READY_TIMEOUT_S:.0f} s "
                    f"(slaves {slaves}, probe {probe.status.value})"
                )
            time.sleep(0.1)


def slave_lag_bytes(cluster: LocalCluster) -> int:
    with httpx.Client(timeout=10) as http:
        slaves = health_ha(http, cluster.brokers[0]).get("slaves", [])
    return max((int(s["lag_bytes"]) for s in slaves), default=0)


# -- workloads 1 and 2: single sends and batches (ASYNC_FLUSH) --------------------------


def checked_batches(producer: Producer, count: int) -> float:
    """``count`` messages as ``send_batch`` of ``BATCH`` (building the Messages included);
    msgs/s. As peers_bench's ``pymq_batches``, each answer checked."""
    statuses = Statuses()
    t0 = time.perf_counter()
    for _ in range(count // BATCH):
        batch = [Message(topic=BATCH_TOPIC, body=BODY) for _ in range(BATCH)]
        statuses.check(producer.send_batch(batch))
    rate = count // BATCH * BATCH / (time.perf_counter() - t0)
    statuses.raise_if_any("send_batch")
    return rate


def produce(base: Path, setup: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    env = ha_env(setup, "ASYNC_FLUSH")
    with LocalCluster(base, brokers=1, slaves=SLAVES[setup], env=env) as c:
        pymq_topics(c.namesrv_addr, {SINGLE_TOPIC: 8, BATCH_TOPIC: 8, WARM_TOPIC: 8})
        with Producer(group="ha-bench", namesrv=c.namesrv_addr) as producer:
            waited = wait_replicating(c, producer, setup)
            if waited:
                log(f"    {setup}: slave in sync after {waited:.1f} s")
            pymq_warm(producer)
            statuses = Statuses()
            out["single"] = timed_singles(
                args.singles,
                lambda: statuses.check(producer.send(Message(topic=SINGLE_TOPIC, body=BODY))),
            )
            statuses.raise_if_any("send")
            out["batch"] = checked_batches(producer, args.messages)
            if SLAVES[setup]:
                out["lag_after_batch_bytes"] = slave_lag_bytes(c)
    shutil.rmtree(base, ignore_errors=True)
    return out


# -- workload 3: 64 threads, SYNC_FLUSH --------------------------------------------------


def durable(base: Path, setup: str, args: argparse.Namespace) -> float:
    """peers_bench's workload 3 (``pymq_durable``), each answer checked; msgs/s."""
    env = ha_env(setup, "SYNC_FLUSH")
    with LocalCluster(base, brokers=1, slaves=SLAVES[setup], env=env) as c:
        pymq_topics(c.namesrv_addr, {DURABLE_TOPIC: 8, WARM_TOPIC: 8})
        with Producer(group="ha-bench", namesrv=c.namesrv_addr) as producer:
            wait_replicating(c, producer, setup)
            for _ in range(200):
                producer.send(Message(topic=DURABLE_TOPIC, body=BODY))
            statuses = Statuses()

            def work(_: int) -> None:
                for _ in range(args.durable_per_producer):
                    statuses.check(producer.send(Message(topic=DURABLE_TOPIC, body=BODY)))

            rate: float = PRODUCERS * args.durable_per_producer / run_threads(PRODUCERS, work)
            statuses.raise_if_any("durable send")
    shutil.rmtree(base, ignore_errors=True)
    return rate


def redis_missing() -> str | None:
    """Why the Redis figure cannot be measured here, or None."""
    if server_binary("redis-server") is None:
        return "redis-server not found (apt-get install redis-server)"
    try:
        import redis  # noqa: F401
    except ImportError:
        return "redis-py not installed (pip install -e '.[bench]')"
    return None


def redis_durable(base: Path, args: argparse.Namespace) -> float:
    """appendfsync always, ``PRODUCERS`` threads each with its own connection calling
    XADD (peers_bench's workload 3 for Redis); msgs/s."""
    import redis

    with redis_server(base, durable=True) as port:
        clients = [redis.Redis(port=port) for _ in range(PRODUCERS)]
        for client in clients:  # one connection each, opened before the clock
            client.xadd(WARM_TOPIC, {b"d": BODY})

        def work(i: int) -> None:
            for _ in range(args.durable_per_producer):
                clients[i].xadd(DURABLE_TOPIC, {b"d": BODY})

        rate: float = PRODUCERS * args.durable_per_producer / run_threads(PRODUCERS, work)
        for client in clients:
            client.close()
    shutil.rmtree(base, ignore_errors=True)
    return rate


# -- workload 4: a new slave catches up ---------------------------------------------------


def fill(producer: Producer, target_bytes: int) -> None:
    body = os.urandom(CATCHUP_BODY_BYTES // 2).hex().encode()
    batches = max(1, target_bytes // (CATCHUP_BODY_BYTES * CATCHUP_BATCH))
    statuses = Statuses()
    for _ in range(batches):
        batch = [Message(topic=CATCHUP_TOPIC, body=body) for _ in range(CATCHUP_BATCH)]
        statuses.check(producer.send_batch(batch))
    statuses.raise_if_any("fill")


def catch_up(base: Path, args: argparse.Namespace) -> dict[str, float]:
    """Fill a master alone, start a slave with an empty store, time it to lag 0."""
    env = ha_env("async", "ASYNC_FLUSH")
    with LocalCluster(base, brokers=1, slaves=0, env=env) as c, httpx.Client(timeout=10) as http:
        pymq_topics(c.namesrv_addr, {CATCHUP_TOPIC: 8})
        with Producer(group="ha-bench", namesrv=c.namesrv_addr) as producer:
            fill(producer, args.catchup_mb * MB)
        master = c.brokers[0]
        end = int(health_ha(http, master)["max_offset"])
        os.sync()  # the slave reads a log at rest: not racing the master's writeback
        slave = ServerProcess(
            "broker",
            [
                "--name", master.name, "--host", c.host, "--port", "0",
                "--namesrv", c.namesrv_addr, "--store", str(base / "slave"),
                "--role", "SLAVE", "--id", "1",
            ],
            log_path=base / "logs" / "slave.log",
            env=env,
            name=f"{master.name}-s1",
        )  # fmt: skip
        c.brokers.append(slave)  # stopped with the cluster, also if start() is interrupted
        t_start = time.perf_counter()
        slave.start(READY_TIMEOUT_S)
        first: tuple[float, int] | None = None  # (when, slave's end) when first connected
        deadline = time.monotonic() + CATCHUP_TIMEOUT_S
        while True:
            now = time.perf_counter()
            ha = health_ha(http, slave)
            have = int(ha["max_offset"])
            if first is None and ha.get("master_connected"):
                first = (now, have)
            if first is not None and have >= end and ha.get("lag_bytes") == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"slave not caught up in {CATCHUP_TIMEOUT_S:.0f} s: {ha}")
            time.sleep(POLL_S)
        t0, had = first
        if had > end // 2:
            raise RuntimeError(
                f"the slave had {had:,} of {end:,} bytes when first seen connected: "
                "too little data to time (raise --catchup-mb)"
            )
        seconds = now - t0
    shutil.rmtree(base, ignore_errors=True)
    return {
        "mb_per_s": (end - had) / MB / seconds,
        "seconds": seconds,
        "from_start_s": now - t_start,
        "mb": end / MB,
    }


# -- the runs ----------------------------------------------------------------------------


def one_run(base: Path, r: int, args: argparse.Namespace) -> dict[str, Any]:
    """Workloads 1-2 for every setup, then 3 (and Redis), then 4; orders rotate with r."""
    run: dict[str, Any] = {s: {} for s in SETUPS}
    order = SETUPS[r % 3 :] + SETUPS[: r % 3]
    for setup in order:
        log(f"  run {r + 1}/{args.runs}: {setup}: single sends, batches (load {load()})")
        run[setup].update(produce(base / f"produce-{setup}", setup, args))
    durables = (*SETUPS, "redis") if args.redis_missing is None else SETUPS
    shift = r % len(durables)
    for setup in durables[shift:] + durables[:shift]:
        os.sync()  # each measures its own fsyncs, not the writeback of the one before
        log(f"  run {r + 1}/{args.runs}: {setup}: durable, {PRODUCERS} threads (load {load()})")
        if setup == "redis":
            run["redis"] = {"durable": redis_durable(base / "redis", args)}
        else:
            run[setup]["durable"] = durable(base / f"durable-{setup}", setup, args)
    os.sync()
    log(f"  run {r + 1}/{args.runs}: catch-up of {args.catchup_mb} MB (load {load()})")
    run["catchup"] = catch_up(base / "catchup", args)
    log(f"    catch-up {run['catchup']['mb_per_s']:,.0f} MB/s")
    return run


def figures(per_run: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median (min-max) over the runs, in the shape of one run."""

    def merge(nodes: list[Any]) -> Any:
        if isinstance(nodes[0], dict):
            return {k: merge([n[k] for n in nodes]) for k in nodes[0]}
        return summary([float(n) for n in nodes])

    return dict(merge(per_run))


def ratio(fig: dict[str, float], by: dict[str, float]) -> float:
    return fig["median"] / by["median"]


def checks(figs: dict[str, Any]) -> list[tuple[str, float | None, str, bool | None]]:
    """The issue's targets on the medians: (what, value, goal, met); value None when
    not measured."""
    sync, asyn, none = figs["sync"], figs["async"], figs["none"]
    redis = figs.get("redis", {}).get("durable")
    p99 = ratio(sync["single"]["p99_ms"], asyn["single"]["p99_ms"])
    batch = ratio(sync["batch"], none["batch"])
    dur = None if redis is None else ratio(sync["durable"], redis)
    catch = figs["catchup"]["mb_per_s"]["median"]
    return [
        ("SYNC_MASTER single-send p99 / ASYNC_MASTER's", p99,
         f"<= {SYNC_P99_MAX_X_ASYNC:g}x", p99 <= SYNC_P99_MAX_X_ASYNC),
        ("SYNC_MASTER batched throughput / no slave's", batch,
         f">= {SYNC_BATCH_MIN_X_NONE:g}x", batch >= SYNC_BATCH_MIN_X_NONE),
        ("SYNC_MASTER + SYNC_FLUSH, 64 threads / Redis appendfsync always", dur,
         f">= {SYNC_DURABLE_MIN_X_REDIS:g}x", None if dur is None else
         dur >= SYNC_DURABLE_MIN_X_REDIS),
        ("slave catch-up, MB/s", catch, f">= {CATCHUP_MIN_MB_S:g}", catch >= CATCHUP_MIN_MB_S),
    ]  # fmt: skip


def print_table(results: dict[str, Any]) -> None:
    figs, a = results["figures"], results["sizes"]

    def cell(fig: dict[str, float] | None, unit: str) -> str:
        if fig is None:
            return "-"
        f = "{:,.2f}" if unit == "ms" else "{:,.0f}"
        return f"{f.format(fig['median'])} ({f.format(fig['min'])}-{f.format(fig['max'])})"

    def pick(setup: str, key: str, field: str = "") -> dict[str, float] | None:
        fig = figs.get(setup, {}).get(key)
        return None if fig is None else fig[field] if field else fig

    print(
        f"\nReplication on loopback, 100-byte bodies, median of {results['runs']} (min-max): "
        f"{a['singles']:,} single sends, {a['messages']:,} batched, "
        f"{PRODUCERS}x{a['durable_per_producer']:,} durable; catch-up of "
        f"{figs['catchup']['mb']['median']:,.0f} MB; {results['date']}, load "
        f"{results['load_at_start']} -> {results['load_at_end']}"
    )
    columns = (*SETUPS, "redis")
    print(f"{'figure':<44}{'unit':<8}" + "".join(f"{LABELS[s]:>26}" for s in columns))
    rows = (
        ("single send, 1 thread: p50", "single", "p50_ms", "ms"),
        ("single send, 1 thread: p99", "single", "p99_ms", "ms"),
        ("single send, 1 thread", "single", "msgs_per_s", "msgs/s"),
        (f"send_batch of {BATCH:,}, 1 thread", "batch", "", "msgs/s"),
        ("slave lag when the batch clock stopped", "lag_after_batch_bytes", "", "bytes"),
        (f"durable (SYNC_FLUSH), {PRODUCERS} threads", "durable", "", "msgs/s"),
    )
    for label, key, field, unit in rows:
        cells = "".join(f"{cell(pick(s, key, field), unit):>26}" for s in columns)
        print(f"{label:<44}{unit:<8}{cells}")
    catchup = figs["catchup"]
    print(f"{'new slave catch-up (connected -> lag 0)':<44}{'MB/s':<8}"
          f"{cell(catchup['mb_per_s'], ''):>26}")  # fmt: skip
    print(f"{'... seconds from the slave process start':<44}{'s':<8}"
          f"{cell(catchup['from_start_s'], 'ms'):>26}")  # fmt: skip
    if results["redis_missing"]:
        print(f"Redis appendfsync always: not measured: {results['redis_missing']}")
    print("\ntargets (on the medians):")
    for what, value, goal, met in checks(figs):
        shown = "-" if value is None else f"{value:,.2f}"
        verdict = "not measured" if met is None else "met" if met else "MISSED"
        print(f"  {what:<66}{shown:>10}  {goal:<8}{verdict}")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "pymq": connector.__version__}
    binary = server_binary("redis-server")
    if binary is not None:
        text = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, check=True
        ).stdout
        out["redis-server"] = text.split(" v=")[1].split()[0] if " v=" in text else text.strip()
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        out["redis"] = importlib.metadata.version("redis")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run (a smoke test)")
    ap.add_argument("--catchup-mb", type=int, default=None, help="workload 4 (400; quick 40)")
    ap.add_argument("--dir", default=None, help="where the data goes (default: a temp dir)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    args.singles, args.messages, args.durable_per_producer = 5_000, 1_000_000, 300
    if args.quick:
        args.runs, args.singles, args.messages, args.durable_per_producer = 1, 500, 100_000, 20
    args.catchup_mb = args.catchup_mb or (CATCHUP_MB // 10 if args.quick else CATCHUP_MB)
    args.redis_missing = redis_missing()
    if args.redis_missing:
        log(f"Redis not measured: {args.redis_missing}")
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    base = Path(args.dir or tempfile.mkdtemp(prefix="pymq-ha-bench-"))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "command": " ".join(["python", *sys.argv]),
        "load_at_start": load(),
        "versions": versions(),
        "runs": args.runs,
        "sizes": {k: getattr(args, k) for k in SIZES},
        "redis_missing": args.redis_missing,
    }
    per_run: list[dict[str, Any]] = []
    try:
        for r in range(args.runs):
            per_run.append(one_run(base / f"run-{r}", r, args))
    except KeyboardInterrupt:
        log("interrupted: servers stopped")
        return 130
    finally:
        stop_stray_children()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    results["load_at_end"] = load()
    results["figures"] = figures(per_run)
    results["targets"] = [
        {"what": what, "value": value, "goal": goal, "met": met}
        for what, value, goal, met in checks(results["figures"])
    ]
    results["per_run"] = per_run
    print_table(results)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
