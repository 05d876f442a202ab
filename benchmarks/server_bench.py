"""Broker service benchmark over loopback HTTP: prints a table and JSON.

    python benchmarks/server_bench.py [--runs 3] [--quick] [--json-out FILE]

A real broker process (``pymq broker``, 100-byte bodies, one topic of 8
queues, tmp store) and one client process (this one), keep-alive HTTP/1.1
(``connector.remoting``):

* batch send, 1,000 messages a request (binary batch endpoint), one
  connection, and 2 and 4 connections from as many threads; batches are encoded before
  the clock starts (client-side encoding is the client's benchmark) — the
  encode cost per message is printed too;
* pull by offset, 10,000 per request, binary records, indexed in the client
  (``connector.protocol.scan``): every body addressable; also with every body
  copied out as ``bytes``;
* single-message send from one thread, one request per message: the JSON
  endpoint and the binary endpoint (a batch of one), p50/p99 latency and
  msgs/s;
* all of the above with ASYNC_FLUSH, and the sends again with SYNC_FLUSH.

Each figure is the median of ``--runs`` runs with min and max.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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

from connector.protocol.batch import encode_batch  # noqa: E402
from connector.protocol.msgid import UniqKeyGenerator  # noqa: E402
from connector.protocol.properties import encode_properties  # noqa: E402
from connector.protocol.scan import index_records  # noqa: E402
from connector.protocol.wire import RECORDS_CONTENT_TYPE  # noqa: E402
from connector.remoting import HttpConnection  # noqa: E402
from connector.server.local import ServerProcess  # noqa: E402

TOPIC = "BenchTopic"
QUEUES = 8
BODY = 100
OCTET = {"content-type": "application/octet-stream"}
JSON_CT = {"content-type": "application/json"}


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def start_broker(base: Path, flush: str) -> ServerProcess:
    store = base / f"store-{flush}-{time.monotonic_ns()}"
    env = dict(os.environ, PYMQ_LOG_LEVEL="warning")
    proc = ServerProcess(
        "broker",
        ["--port", "0", "--store", str(store), "--flush", flush],
        log_path=base / "broker.log",
        env=env,
    )
    proc.start(120)
    conn = HttpConnection(proc.http_addr)
    body = json.dumps({"read_queue_nums": QUEUES, "write_queue_nums": QUEUES, "perm": 6})
    resp = conn.request("PUT", f"/topics/{TOPIC}", body.encode(), JSON_CT)
    assert resp.status == 200, resp.body
    conn.close()
    return proc


def make_batches(count: int, per_batch: int) -> tuple[list[bytes], float]:
    """Distinct batches (unique bodies and UNIQ_KEYs); also the encode cost per message."""
    uniq = UniqKeyGenerator()
    batches = []
    t0 = time.perf_counter()
    for b in range(count):
        entries = []
        for i in range(per_batch):
            body = (b"%08d-%08d-" % (b, i)).ljust(BODY, b"x")
            props = encode_properties({"UNIQ_KEY": uniq.next_id()})
            entries.append((body, 0, props))
        batches.append(encode_batch(entries))
    per_msg = (time.perf_counter() - t0) / (count * per_batch)
    return batches, per_msg


def batch_send(addr: str, batches: list[bytes], threads: int) -> float:
    """msgs/s sending every batch once, spread over ``threads`` connections."""
    per_batch = int.from_bytes(batches[0][:4], "big")  # not needed: count from answers
    del per_batch
    counts = [0] * threads
    errors: list[str] = []

    def worker(k: int) -> None:
        conn = HttpConnection(addr)
        for j in range(k, len(batches), threads):
            resp = conn.request(
                "POST", f"/topics/{TOPIC}/messages/batch?queue_id={j % QUEUES}",
                batches[j], OCTET, timeout_s=30,
            )  # fmt: skip
            if resp.status != 200:
                errors.append(resp.body.decode()[:200])
                return
            counts[k] += json.loads(resp.body)["count"]
        conn.close()

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(errors[0])
    return sum(counts) / elapsed


def pull_all(addr: str, copy_bodies: bool) -> tuple[float, int]:
    """Pull every queue from offset 0 to the end; (msgs/s, messages)."""
    conn = HttpConnection(addr)
    headers = {"accept": RECORDS_CONTENT_TYPE}
    total = 0
    t0 = time.perf_counter()
    for q in range(QUEUES):
        offset = 0
        while True:
            resp = conn.request(
                "GET", f"/topics/{TOPIC}/queues/{q}/messages?offset={offset}&max=10000",
                None, headers, timeout_s=30,
            )  # fmt: skip
            if resp.headers.get("x-pymq-status") != "FOUND":
                break
            index = index_records(resp.body)
            if copy_bodies:
                index.bodies()
            total += len(index)
            offset = int(resp.headers["x-pymq-next-begin-offset"])
    elapsed = time.perf_counter() - t0
    conn.close()
    return total / elapsed, total


def single_sends(addr: str, count: int, binary: bool) -> dict[str, float]:
    conn = HttpConnection(addr)
    uniq = UniqKeyGenerator()
    lat = []
    t_all = time.perf_counter()
    for i in range(count):
        body = (b"%08d-" % i).ljust(BODY, b"s")
        if binary:
            data = encode_batch([(body, 0, encode_properties({"UNIQ_KEY": uniq.next_id()}))])
            t0 = time.perf_counter()
            resp = conn.request(
                "POST", f"/topics/{TOPIC}/messages/batch?queue_id={i % QUEUES}", data, OCTET
            )
        else:
            data = json.dumps({"body": body.decode(), "queue_id": i % QUEUES}).encode()
            t0 = time.perf_counter()
            resp = conn.request("POST", f"/topics/{TOPIC}/messages", data, JSON_CT)
        lat.append(time.perf_counter() - t0)
        if resp.status != 200:
            raise RuntimeError(resp.body.decode()[:200])
    elapsed = time.perf_counter() - t_all
    conn.close()
    lat.sort()
    return {
        "p50_ms": lat[len(lat) // 2] * 1000,
        "p99_ms": lat[int(len(lat) * 0.99)] * 1000,
        "msgs_per_s": count / elapsed,
    }


def run_flush_mode(base: Path, flush: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    n_batches = args.batches
    batch_rates: dict[int, list[float]] = {1: [], 2: [], 4: []}
    pull_rates: list[float] = []
    pull_copy_rates: list[float] = []
    singles: dict[str, list[dict[str, float]]] = {"json": [], "binary": []}
    for run in range(args.runs):
        print(f"  [{flush}] run {run + 1}/{args.runs}", file=sys.stderr, flush=True)
        batches, encode_s = make_batches(n_batches, 1000)
        out["client_encode_us_per_msg"] = encode_s * 1e6
        # earlier runs' stores are gone and their dirty pages written back, so an
        # fsync here measures this run, not the kernel flushing the last one
        for old in base.glob("store-*"):
            shutil.rmtree(old, ignore_errors=True)
        os.sync()
        proc = start_broker(base, flush)
        try:
            # single sends first, on a quiet store: after a million batched messages
            # the kernel is still writing back queue and index pages for a while
            for kind in ("json", "binary"):
                single_sends(proc.http_addr, 1000, kind == "binary")  # warm-up
                singles[kind].append(single_sends(proc.http_addr, args.singles, kind == "binary"))
            batch_send(proc.http_addr, batches[:20], 1)  # warm-up: page faults of fresh files
            for threads in (1, 2, 4):
                batch_rates[threads].append(batch_send(proc.http_addr, batches, threads))
            if flush == "async":
                rate, total = pull_all(proc.http_addr, copy_bodies=False)
                pull_rates.append(rate)
                out["pulled_messages"] = total
                pull_copy_rates.append(pull_all(proc.http_addr, copy_bodies=True)[0])
        finally:
            proc.terminate()
    out["batch_send_1conn"] = summary(batch_rates[1])
    out["batch_send_2conn"] = summary(batch_rates[2])
    out["batch_send_4conn"] = summary(batch_rates[4])
    if pull_rates:
        out["pull_indexed"] = summary(pull_rates)
        out["pull_bodies_copied"] = summary(pull_copy_rates)
    for kind, runs in singles.items():
        out[f"single_{kind}"] = {
            key: summary([r[key] for r in runs]) for key in ("p50_ms", "p99_ms", "msgs_per_s")
        }
    return out


def print_table(results: dict[str, Any]) -> None:
    def rate(label: str, fig: dict[str, float], target: str) -> None:
        print(
            f"{label:<52}{fig['median']:>12,.0f}  ({fig['min']:,.0f}-{fig['max']:,.0f})  {target}"
        )

    for flush in ("async", "sync"):
        r = results[flush]
        name = "ASYNC_FLUSH" if flush == "async" else "SYNC_FLUSH"
        print(f"\n{name}  (msgs/s, median of {results['runs']}; min-max)")
        rate("batch send 1,000/request, 1 connection", r["batch_send_1conn"], ">= 400,000")
        rate("batch send 1,000/request, 2 connections", r["batch_send_2conn"], "")
        rate("batch send 1,000/request, 4 connections", r["batch_send_4conn"], "")
        if "pull_indexed" in r:
            rate("pull 10,000/request, records indexed", r["pull_indexed"], ">= 1,000,000")
            rate("pull 10,000/request, bodies copied out", r["pull_bodies_copied"], "")
        for kind in ("json", "binary"):
            s = r[f"single_{kind}"]
            print(
                f"{'single send (' + kind + '), 1 thread':<52}"
                f"{s['msgs_per_s']['median']:>12,.0f}  p50 {s['p50_ms']['median']:.3f} ms "
                f"p99 {s['p99_ms']['median']:.3f} ms  (target p50 <= 0.5, p99 <= 2)"
            )
        print(f"{'client batch encoding (not in the figures above)':<52}"
              f"{r['client_encode_us_per_msg']:>10.2f} us/msg")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run (a smoke test)")
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    args.batches = 1000  # 1,000,000 messages
    args.singles = 5000
    if args.quick:
        args.runs, args.batches, args.singles = 1, 50, 500
    base = Path(args.dir or tempfile.mkdtemp(prefix="pymq-server-bench-"))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "python": platform.python_version(),
        "command": " ".join(["python", *sys.argv]),
        "runs": args.runs,
        "messages_per_batch_run": args.batches * 1000,
    }
    try:
        for flush in ("async", "sync"):
            results[flush] = run_flush_mode(base, flush, args)
    finally:
        if not args.dir:  # a temp dir of several GB: gone with the run
            shutil.rmtree(base, ignore_errors=True)
    print_table(results)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
