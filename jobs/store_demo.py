"""The best end-to-end demo until the Spark job lands: the store surviving kill -9.

Starts the durability probe (a real process appending with SYNC_FLUSH),
kills it with SIGKILL three times at random moments, restarts it on the same
store each time, then opens the store and checks that every acknowledged
message is there, byte for byte, and can be found by key and by time.

    python jobs/store_demo.py [--data DIR] [--rounds 3]
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from broker.store.config import StoreConfig
from broker.store.store import MessageStore

ROOT = Path(__file__).resolve().parents[1]


def run_round(store_dir: Path, seconds: float) -> list[tuple[str, int, int, str, str]]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "broker.store.probe", "--store", str(store_dir), "--flush", "sync"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    if not ready.startswith("ready"):
        proc.kill()
        raise SystemExit(f"probe did not start: {ready!r}")
    deadline = time.monotonic() + seconds
    acks = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("ack "):
            _, topic, q, off, sha, key = line.split()
            acks.append((topic, int(q), int(off), sha, key))
    os.kill(proc.pid, signal.SIGKILL)
    rest, _ = proc.communicate(timeout=30)
    for line in rest.splitlines():  # acknowledged before the kill landed
        parts = line.split()
        if len(parts) == 6 and parts[0] == "ack":
            acks.append((parts[1], int(parts[2]), int(parts[3]), parts[4], parts[5]))
    return acks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", default=None, help="store directory (default: a new temp dir)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    store_dir = Path(args.data or tempfile.mkdtemp(prefix="pymq-demo-"))
    print(f"pymq store demo: data under {store_dir}")
    acked: dict[tuple[int, int], tuple[str, str]] = {}
    rng = random.Random()
    for r in range(1, args.rounds + 1):
        seconds = rng.uniform(1.0, 3.0)
        acks = run_round(store_dir, seconds)
        for _topic, q, off, sha, key in acks:
            acked[(q, off)] = (sha, key)
        print(f"round {r}: probe acknowledged {len(acks)} SYNC_FLUSH messages, then got kill -9")
    store = MessageStore(
        StoreConfig(
            store_dir=store_dir,
            mapped_file_size_commit_log=256 * 1024,
            consume_queue_entries_per_file=500,
            max_hash_slot_num=1024,
            max_index_num=20_000,
        )
    )
    t0 = time.monotonic()
    report = store.start()
    print(
        f"recovery: {'abnormal' if report.abnormal else 'normal'}, scanned "
        f"{report.records_scanned} records from offset {report.scanned_from} "
        f"in {(time.monotonic() - t0) * 1000:.1f} ms"
    )
    missing = 0
    for (q, off), (sha, _key) in acked.items():
        got = store.get_message("ProbeTopic", q, off, 1)
        bodies = got.bodies()
        if not bodies or hashlib.sha1(bodies[0]).hexdigest() != sha:
            missing += 1
    sample = rng.sample(sorted(acked), min(20, len(acked)))
    by_key = sum(
        1 for q, off in sample if store.query_message("ProbeTopic", acked[(q, off)][1], max_num=1)
    )
    first_q = min(acked)[0] if acked else 0
    ts_off = store.get_offset_in_queue_by_time(
        "ProbeTopic", first_q, int(time.time() * 1000) - 3_600_000
    )
    store.shutdown()
    intact = len(acked) - missing
    print(f"checked {len(acked)} acknowledged messages: {intact} intact, {missing} missing")
    print(f"lookup by key: {by_key}/{len(sample)} found")
    print(f"offset by time (1 h ago) in queue {first_q}: {ts_off}")
    return 1 if missing or by_key != len(sample) else 0


if __name__ == "__main__":
    raise SystemExit(main())
