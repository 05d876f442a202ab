"""Storage-engine benchmark: prints a table and JSON.

    python benchmarks/store_bench.py [--quick] [--runs 5] [--dir DIR] [--json-out FILE]

Measured in-process on the machine it runs on, 100-byte bodies unless said:

* disk: sequential write bandwidth (fio if installed, else dd with
  conv=fdatasync) and fdatasync latency of 4 KiB appends, in the same dir;
* batch append, 1,000 messages per call, ASYNC_FLUSH (encode, CRC, CommitLog,
  ConsumeQueue and index entries for KEYS + UNIQ_KEY);
* read by logical offset, 1,000 per call, decoded to bodies;
* SYNC_FLUSH, 64 writers each appending single messages (group commit), as
  asyncio tasks on uvloop (the broker's model: ``GroupAppender`` appends what
  one loop step gathered as one group; also each task appending alone) and as
  threads, next to one writer alone (one fsync per message);
* recovery after a clean stop and after kill -9, for growing log sizes; the
  killed writer had made everything durable and checkpointed, then appended a
  fixed tail of 20,000 records: abnormal recovery should take as long for
  every log size (it follows the unflushed tail, not the log).

Each throughput figure is the median of ``--runs`` runs (min and max shown).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import uvloop  # noqa: E402

from broker.store.aio import FlushWaiter, GroupAppender  # noqa: E402
from broker.store.config import FlushDiskType, StoreConfig  # noqa: E402
from broker.store.inner import BatchInner, MessageInner  # noqa: E402
from broker.store.store import MessageStore  # noqa: E402
from connector.protocol.message import Message  # noqa: E402
from connector.protocol.msgid import UniqKeyGenerator  # noqa: E402

TOPIC = "BenchTopic"


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def disk_limits(directory: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    target = directory / "disk-probe"
    if shutil.which("fio"):
        res = subprocess.run(
            [
                "fio",
                "--name=seqwrite",
                f"--filename={target}",
                "--rw=write",
                "--bs=1M",
                "--size=512M",
                "--ioengine=psync",
                "--end_fsync=1",
                "--output-format=json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        job = json.loads(res.stdout)["jobs"][0]["write"]
        out["tool"] = "fio seq write 1M blocks, end_fsync"
        out["seq_write_mb_s"] = job["bw_bytes"] / 1e6
    else:
        res = subprocess.run(
            ["dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=512", "conv=fdatasync"],
            capture_output=True,
            text=True,
            check=True,
        )
        line = res.stderr.strip().splitlines()[-1]
        secs = float(line.split(",")[-2].split()[0])
        out["tool"] = "dd bs=1M count=512 conv=fdatasync"
        out["seq_write_mb_s"] = 512 * 1024 * 1024 / secs / 1e6
    target.unlink(missing_ok=True)
    lat = []
    fd = os.open(directory / "fsync-probe", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        block = b"x" * 4096
        for _ in range(300):
            os.write(fd, block)
            t = time.perf_counter()
            os.fdatasync(fd)
            lat.append((time.perf_counter() - t) * 1000)
    finally:
        os.close(fd)
        (directory / "fsync-probe").unlink(missing_ok=True)
    lat.sort()
    out["fdatasync_ms_p50"] = lat[len(lat) // 2]
    out["fdatasync_ms_p99"] = lat[int(len(lat) * 0.99)]
    return out


def make_store(path: Path, flush: FlushDiskType, **kw: Any) -> MessageStore:
    cfg = StoreConfig(
        store_dir=path,
        flush_disk_type=flush,
        mapped_file_size_commit_log=256 << 20,
        max_hash_slot_num=1 << 20,
        max_index_num=4 << 20,
        **kw,
    )
    store = MessageStore(cfg)
    store.start()
    return store


def make_batches(count: int, per_batch: int, body_size: int) -> list[BatchInner]:
    ids = UniqKeyGenerator()
    body = b"x" * body_size
    batches = []
    for b in range(count // per_batch):
        msgs = [
            Message(topic=TOPIC, body=body, tags="TagA", keys=[f"k{b}-{i}"])
            for i in range(per_batch)
        ]
        batches.append(
            BatchInner.from_messages(
                msgs,
                queue_id=b % 4,
                born_timestamp=int(time.time() * 1000),
                uniq_keys=[ids.next_id() for _ in range(per_batch)],
            )
        )
    return batches


def bench_batch_append(base: Path, runs: int, total: int) -> tuple[dict[str, float], Path]:
    rates = []
    batches = make_batches(total, 1000, 100)
    keep = base / "append-last"
    for r in range(runs):
        d = base / f"append-{r}"
        store = make_store(d, FlushDiskType.ASYNC_FLUSH)
        t = time.perf_counter()
        for batch in batches:
            res = store.put_messages(batch)
            assert res.ok, res
        rates.append(total / (time.perf_counter() - t))
        store.shutdown()
        if r == runs - 1:
            d.rename(keep)
        else:
            shutil.rmtree(d)
    return summary(rates), keep


def bench_read(store_dir: Path, runs: int) -> dict[str, float]:
    store = MessageStore(
        StoreConfig(
            store_dir=store_dir,
            mapped_file_size_commit_log=256 << 20,
            max_hash_slot_num=1 << 20,
            max_index_num=4 << 20,
        )
    )
    store.start()
    rates = []
    for _ in range(runs):
        n = 0
        t = time.perf_counter()
        for q in range(4):
            offset = 0
            while True:
                res = store.get_message(TOPIC, q, offset, 1000)
                if not res.found:
                    break
                n += len(res.bodies())
                offset = res.next_begin_offset
        rates.append(n / (time.perf_counter() - t))
    store.shutdown()
    return summary(rates)


def _sync_messages(writers: int, per_writer: int) -> list[list[MessageInner]]:
    ids = UniqKeyGenerator()
    body = b"y" * 100
    return [
        [
            MessageInner.from_message(
                Message(topic=TOPIC, body=body),
                queue_id=w % 4,
                born_timestamp=0,
                uniq_key=ids.next_id(),
            )
            for _ in range(per_writer)
        ]
        for w in range(writers)
    ]


def _thread_writer(
    store: MessageStore, msgs: list[MessageInner], barrier: threading.Barrier, errors: list[Any]
) -> None:
    barrier.wait()
    for m in msgs:
        res = store.put_message(m)
        if res.status.value != "PUT_OK":
            errors.append(res)


async def _async_writer(
    store: MessageStore, waiter: FlushWaiter, msgs: list[MessageInner], errors: list[Any]
) -> None:
    for m in msgs:
        res, flushed = store.put_message_nowait(m)
        if flushed is None or not await waiter.wait(flushed):
            errors.append(res)


async def _run_async_writers(
    store: MessageStore, batches: list[list[MessageInner]], errors: list[Any]
) -> None:
    waiter = FlushWaiter()
    await asyncio.gather(*(_async_writer(store, waiter, msgs, errors) for msgs in batches))


async def _group_writer(
    appender: GroupAppender, msgs: list[MessageInner], errors: list[Any]
) -> None:
    for m in msgs:
        res = await appender.put(m)
        if res.status.value != "PUT_OK":
            errors.append(res)


async def _run_group_writers(
    store: MessageStore, batches: list[list[MessageInner]], errors: list[Any]
) -> None:
    appender = GroupAppender(store)
    await asyncio.gather(*(_group_writer(appender, msgs, errors) for msgs in batches))


def bench_sync(base: Path, runs: int, writers: int, per_writer: int, mode: str) -> dict[str, float]:
    """SYNC_FLUSH single-message appends from ``writers`` threads or asyncio tasks.

    ``asyncio``: the broker's model (uvloop, ``GroupAppender``: the appends of one loop
    step go in as one group); ``asyncio-unbatched``: each task appends alone and waits
    on the shared group commit; ``threads``: blocking ``put_message`` per thread.
    """
    rates = []
    for r in range(runs):
        d = base / f"sync-{mode}-{writers}-{r}"
        store = make_store(d, FlushDiskType.SYNC_FLUSH)
        batches = _sync_messages(writers, per_writer)
        errors: list[Any] = []
        if mode == "threads":
            barrier = threading.Barrier(writers + 1)
            threads = [
                threading.Thread(target=_thread_writer, args=(store, msgs, barrier, errors))
                for msgs in batches
            ]
            for th in threads:
                th.start()
            barrier.wait()
            t = time.perf_counter()
            for th in threads:
                th.join()
        elif mode == "asyncio":
            t = time.perf_counter()
            uvloop.run(_run_group_writers(store, batches, errors))
        else:
            t = time.perf_counter()
            uvloop.run(_run_async_writers(store, batches, errors))
        rates.append(writers * per_writer / (time.perf_counter() - t))
        assert not errors, errors[:3]
        store.shutdown()
        shutil.rmtree(d)
    return summary(rates)


_FILLER = """
import sys, threading
sys.path.insert(0, {root!r})
from broker.store.config import StoreConfig
from broker.store.inner import BatchInner
from broker.store.store import MessageStore
from connector.protocol.message import Message
store = MessageStore(StoreConfig(store_dir={d!r}, mapped_file_size_commit_log=1 << 30,
                                 max_hash_slot_num=1 << 20, max_index_num=4 << 20))
store.start()
target = {size}
msgs = [Message(topic="BenchTopic", body=b"z" * 1000, keys=["k%d" % i]) for i in range(1000)]
batch = BatchInner.from_messages(msgs, queue_id=0, born_timestamp=0)
while store.commit_log.max_offset() < target:
    batch.queue_id = (batch.queue_id + 1) % 4
    store.put_messages(batch)
print("filled", flush=True)
if {clean}:
    store.shutdown()
    print("stopped", flush=True)
else:
    # everything so far durable and checkpointed, then a fixed tail that is not:
    # the parent kill -9s us, and abnormal recovery has exactly that tail to rescan
    store.commit_log.flush(0)
    store.flush_queues_and_checkpoint()
    for _ in range({tail_batches}):
        batch.queue_id = (batch.queue_id + 1) % 4
        store.put_messages(batch)
    print("tail", flush=True)
    threading.Event().wait()
"""
TAIL_BATCHES = 20  # 20,000 records of ~1.1 KB past the checkpoint


def bench_recovery(base: Path, sizes_mb: list[int]) -> list[dict[str, Any]]:
    rows = []
    for size_mb in sizes_mb:
        for clean in (True, False):
            d = base / f"recovery-{size_mb}-{int(clean)}"
            code = _FILLER.format(
                root=str(ROOT), d=str(d), size=size_mb << 20, clean=clean, tail_batches=TAIL_BATCHES
            )
            proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "filled"
            if clean:
                proc.wait(timeout=600)
            else:
                assert proc.stdout.readline().strip() == "tail"
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
            cfg = StoreConfig(
                store_dir=d,
                mapped_file_size_commit_log=1 << 30,
                max_hash_slot_num=1 << 20,
                max_index_num=4 << 20,
            )
            store = MessageStore(cfg)
            t = time.perf_counter()
            report = store.start()
            secs = time.perf_counter() - t
            log_bytes = store.commit_log.max_offset()
            store.shutdown()
            rows.append(
                {
                    "log_mb": round(log_bytes / 1e6),
                    "mode": "normal" if clean else "abnormal",
                    "seconds": secs,
                    "scanned_records": report.records_scanned,
                    "scanned_bytes": report.scanned_bytes,
                }
            )
            shutil.rmtree(d)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default=None, help="where to put stores (default: a temp dir in /tmp)")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--skip", default="", help="comma list of: disk,append,read,sync,recovery")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    base = Path(tempfile.mkdtemp(prefix="pymq-bench-", dir=args.dir))
    total = 100_000 if args.quick else 1_000_000
    runs = 2 if args.quick else args.runs
    results: dict[str, Any] = {
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
    }
    try:
        if "disk" not in skip:
            results["disk"] = disk_limits(base)
        if "append" not in skip:
            results["batch_append"], store_dir = bench_batch_append(base, runs, total)
            results["batch_append"]["messages"] = total
            if "read" not in skip:
                results["read_bodies"] = bench_read(store_dir, runs)
        if "sync" not in skip:
            per = 100 if args.quick else 1500  # ~2-4 s a run: short runs were noisy
            results["sync_64_tasks"] = bench_sync(base, runs, 64, per, "asyncio")
            results["sync_64_tasks_unbatched"] = bench_sync(
                base, runs, 64, per, "asyncio-unbatched"
            )
            per = 100 if args.quick else 500  # threads and one writer are slower
            results["sync_64_threads"] = bench_sync(base, runs, 64, per, "threads")
            results["sync_1_writer"] = bench_sync(base, runs, 1, per * 4, "threads")
        if "recovery" not in skip:
            sizes_mb = [64, 256] if args.quick else [256, 1024, 2048]
            results["recovery"] = bench_recovery(base, sizes_mb)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(results)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


def print_table(r: dict[str, Any]) -> None:
    rows = []
    if "disk" in r:
        d = r["disk"]
        rows.append(("disk sequential write", f"{d['seq_write_mb_s']:.0f} MB/s", "-", d["tool"]))
        rows.append(
            (
                "disk fdatasync 4 KiB",
                f"p50 {d['fdatasync_ms_p50']:.2f} ms",
                f"p99 {d['fdatasync_ms_p99']:.2f} ms",
                "one fsync per message caps here",
            )
        )

    def rate(name: str, key: str, target: str) -> None:
        if key in r:
            x = r[key]
            rows.append(
                (name, f"{x['median']:,.0f} msgs/s", f"{x['min']:,.0f}-{x['max']:,.0f}", target)
            )

    rate("batch append 1000/call ASYNC", "batch_append", "target >= 1,000,000")
    if "batch_append" in r and "disk" in r:
        mb = r["batch_append"]["median"] * 235 / 1e6
        rows.append(
            (
                "  as bytes (~235 B/record)",
                f"{mb:.0f} MB/s",
                f"{100 * mb / r['disk']['seq_write_mb_s']:.0f}% of disk",
                "",
            )
        )
    rate("read 1000/call -> bodies", "read_bodies", "target >= 2,000,000")
    rate("SYNC_FLUSH 64 asyncio writers", "sync_64_tasks", "target >= 50,000")
    rate("  each appending alone", "sync_64_tasks_unbatched", "(before GroupAppender)")
    rate("SYNC_FLUSH 64 thread writers", "sync_64_threads", "target >= 50,000")
    rate("SYNC_FLUSH 1 writer", "sync_1_writer", "one fsync per message")
    for row in r.get("recovery", []):
        rows.append(
            (
                f"recovery {row['mode']} {row['log_mb']} MB log",
                f"{row['seconds'] * 1000:.0f} ms",
                f"{row['scanned_records']} records scanned",
                "",
            )
        )
    w = [max(len(str(x[i])) for x in rows) for i in range(4)] if rows else [0] * 4
    print()
    for row in rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(row)))
    print()


if __name__ == "__main__":
    raise SystemExit(main())
