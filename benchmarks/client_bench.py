"""Producer benchmark: the full client send path against a real local cluster.

    python benchmarks/client_bench.py [--runs 3] [--quick] [--json-out FILE]

One NameServer and one broker (ASYNC_FLUSH) as processes, this process as
the client (RocketMQ's remoting protocol: one connection to the broker, many
requests in flight on it), 100-byte bodies, a topic of 8 queues. Measured:

* ``Producer.send`` from 1 thread and from 8 threads (sync, one message per
  request, each with its own UNIQ_KEY, route lookup, queue selection,
  fault-strategy bookkeeping and hooks);
* ``Producer.send_async`` from 1 thread, one call per message, then every
  future's result (no thread waits for an answer; async sends of a topic
  gather into batch requests while two are on the wire);
* ``Producer.send_batch`` of 1,000 messages (building the ``Message``
  objects and encoding included);
* where the time goes, for a sync send and for ``send_async``: client CPU
  per message (this process's CPU time / messages) vs the broker's (its
  process CPU time / messages, from /proc), next to wall time per message.

Each figure is the median of ``--runs`` runs (min and max shown).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from connector import Message, Producer  # noqa: E402
from connector.local import LocalCluster  # noqa: E402

TOPIC = "ClientBench"
BODY = b"x" * 100


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def self_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sync_sends(producer: Producer, threads: int, per_thread: int) -> float:
    def work() -> None:
        for _ in range(per_thread):
            producer.send(Message(topic=TOPIC, body=BODY))

    pool = [threading.Thread(target=work) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return threads * per_thread / (time.perf_counter() - t0)


def async_sends(producer: Producer, count: int) -> float:
    t0 = time.perf_counter()
    futures = [producer.send_async(Message(topic=TOPIC, body=BODY)) for _ in range(count)]
    for f in futures:
        f.result(60)
    return count / (time.perf_counter() - t0)


def batch_sends(producer: Producer, batches: int) -> float:
    t0 = time.perf_counter()
    for _ in range(batches):
        producer.send_batch([Message(topic=TOPIC, body=BODY) for _ in range(1000)])
    return batches * 1000 / (time.perf_counter() - t0)


def cpu_split(
    producer: Producer, broker_pid: int, count: int, *, asynchronous: bool = False
) -> dict[str, float]:
    c0, b0, t0 = self_cpu_s(), proc_cpu_s(broker_pid), time.perf_counter()
    if asynchronous:
        futures = [producer.send_async(Message(topic=TOPIC, body=BODY)) for _ in range(count)]
        for f in futures:
            f.result(60)
    else:
        for _ in range(count):
            producer.send(Message(topic=TOPIC, body=BODY))
    wall = time.perf_counter() - t0
    client = self_cpu_s() - c0
    broker = proc_cpu_s(broker_pid) - b0
    return {
        "wall_us_per_msg": wall / count * 1e6,
        "client_cpu_us_per_msg": client / count * 1e6,
        "broker_cpu_us_per_msg": broker / count * 1e6,
        "client_share": client / (client + broker),
    }


def run(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    figures: dict[str, list[float]] = {k: [] for k in ("sync_1", "sync_8", "async", "batch")}
    splits: list[dict[str, float]] = []
    async_splits: list[dict[str, float]] = []
    for r in range(args.runs):
        print(f"  run {r + 1}/{args.runs}", file=sys.stderr, flush=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
        with LocalCluster(base / f"run-{r}", brokers=1, namesrvs=1, env=env) as cluster:
            broker = cluster.brokers[0]
            resp = httpx.put(
                f"http://{broker.http_addr}/topics/{TOPIC}",
                json={"read_queue_nums": 8, "write_queue_nums": 8, "perm": 6},
                timeout=30,
            )
            resp.raise_for_status()
            with Producer(group="bench", namesrv=cluster.namesrv_addr) as producer:
                sync_sends(producer, 1, 500)  # warm-up: route, connections, caches
                async_sends(producer, 500)  # and the connection's reader thread
                batch_sends(producer, 3)  # and the batch encoder, compiled on first use
                figures["sync_1"].append(sync_sends(producer, 1, args.n))
                figures["sync_8"].append(sync_sends(producer, 8, args.n // 8))
                figures["async"].append(async_sends(producer, args.n_async))
                figures["batch"].append(batch_sends(producer, args.batches))
                splits.append(cpu_split(producer, broker.pid, args.n))
                async_splits.append(
                    cpu_split(producer, broker.pid, args.n_async, asynchronous=True)
                )
    out: dict[str, Any] = {k: summary(v) for k, v in figures.items()}
    out["cpu_split"] = {k: statistics.median(s[k] for s in splits) for k in splits[0]}
    out["cpu_split_async"] = {
        k: statistics.median(s[k] for s in async_splits) for k in async_splits[0]
    }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    args.n, args.n_async, args.batches = (1000, 10_000, 20) if args.quick else (5000, 100_000, 300)
    if args.quick:
        args.runs = 1
    base = Path(tempfile.mkdtemp(prefix="pymq-client-bench-"))
    try:
        figures = run(base, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "command": " ".join(["python", *sys.argv]),
        "runs": args.runs,
        **figures,
    }
    print(f"\nProducer, 100-byte bodies, ASYNC_FLUSH broker (msgs/s, median of {args.runs})")
    for key, label in (
        ("sync_1", "send, 1 thread"),
        ("sync_8", "send, 8 threads"),
        ("async", "send_async, 1 thread"),
        ("batch", "send_batch of 1,000"),
    ):
        f = results[key]
        print(f"{label:<32}{f['median']:>12,.0f}  ({f['min']:,.0f}-{f['max']:,.0f})")
    for key, what in (("cpu_split", "sync send"), ("cpu_split_async", "send_async")):
        s = results[key]
        print(
            f"{what}, per message: {s['wall_us_per_msg']:.1f} us wall, client CPU "
            f"{s['client_cpu_us_per_msg']:.1f} us, broker CPU "
            f"{s['broker_cpu_us_per_msg']:.1f} us (client {s['client_share']:.0%} of the CPU)"
        )
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
