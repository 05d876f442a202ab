"""ASYNC_MASTER's loss window: what a master killed -9 under load had acknowledged and
its slave did not have yet.

    python benchmarks/ha_loss_window.py [--rounds 5] [--threads 8] [--role ASYNC_MASTER]

Each round starts a NameServer, a master (``--role``) and a slave, lets
``--threads`` producers (pymq's ``Producer``, synchronous sends of 200-byte
bodies over remoting) send for a random 1-3 s, kills the master with
SIGKILL and reads every queue back from the slave. A message is lost (for
readers of the slave, and for good if the master's disk goes with it) when
its send was answered SEND_OK and the slave does not have it. Printed per
round and as medians: the messages lost, and the window in ms: from the
earliest lost message's answer to the kill. With ``--role SYNC_MASTER`` the
same run checks that nothing answered SEND_OK is lost.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from connector import Message, Producer, SendStatus  # noqa: E402
from connector.local import ServerProcess  # noqa: E402

TOPIC = "LossWindow"
ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")},
    "PYMQ_REGISTER_NAME_SERVER_PERIOD_MS": "1000",
}


def start(role: str, args: list[str], root: Path, name: str) -> ServerProcess:
    proc = ServerProcess(role, args, log_path=root / "logs" / f"{name}.log", env=ENV, name=name)
    return proc.start(60)


def wait_until(pred: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.1)


def slave_messages(http: httpx.Client, addr: str, queues: int) -> set[tuple[int, int]]:
    """(queue, queue offset) of every message the slave serves."""
    out: set[tuple[int, int]] = set()
    for q in range(queues):
        offset = 0
        while True:
            r = http.get(
                f"http://{addr}/topics/{TOPIC}/queues/{q}/messages",
                params={"offset": offset, "max": 1000},
            ).json()
            if r["status"] != "FOUND":
                break
            out.update((q, m["queue_offset"]) for m in r["messages"])
            offset = r["next_begin_offset"]
    return out


def one_round(root: Path, role: str, threads: int, rng: random.Random) -> dict[str, Any]:
    ns = start("namesrv", ["--port", "0", "--data", str(root / "ns")], root, "namesrv")
    common = ["--port", "0", "--namesrv", ns.addr]
    master = start("broker", [*common, "--store", str(root / "m"), "--role", role], root, "master")
    slave = start(
        "broker", [*common, "--store", str(root / "s"), "--role", "SLAVE", "--id", "1"],
        root, "slave",
    )  # fmt: skip
    http = httpx.Client(timeout=30)
    try:
        queues = 4
        r = http.put(
            f"http://{master.http_addr}/topics/{TOPIC}",
            json={"read_queue_nums": queues, "write_queue_nums": queues, "perm": 6},
        )
        r.raise_for_status()
        acked: list[tuple[float, int, int]] = []  # (answered at, queue, offset)
        lock = threading.Lock()
        stop = threading.Event()
        body = b"x" * 200

        def produce() -> None:
            with Producer(group="loss", namesrv=ns.addr, retry_times_when_send_failed=0) as p:
                while not stop.is_set():
                    try:
                        res = p.send(Message(topic=TOPIC, body=body))
                    except Exception:  # noqa: BLE001 - the master is gone: this producer stops
                        return
                    if res.status is SendStatus.SEND_OK:
                        with lock:
                            acked.append((time.monotonic(), res.queue.queue_id, res.queue_offset))

        workers = [threading.Thread(target=produce, daemon=True) for _ in range(threads)]
        for w in workers:
            w.start()
        wait_until(lambda: len(acked) > 100, 30, "the producers started")
        time.sleep(rng.uniform(1.0, 3.0))
        killed_at = time.monotonic()
        master.kill()
        stop.set()
        for w in workers:
            w.join(30)
        have = slave_messages(http, slave.http_addr, queues)
        lost = [(t, q, o) for t, q, o in acked if (q, o) not in have]
        window_ms = (killed_at - min(t for t, _, _ in lost)) * 1000 if lost else 0.0
        return {
            "acked": len(acked),
            "lost": len(lost),
            "window_ms": round(window_ms, 2),
            "rate": round(len(acked) / (killed_at - acked[0][0])),
        }
    finally:
        http.close()
        for proc in (slave, master, ns):
            if proc.running:
                proc.terminate()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--role", default="ASYNC_MASTER", choices=["ASYNC_MASTER", "SYNC_MASTER"])
    ap.add_argument("--seed", type=int, default=23)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rounds = []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="pymq-loss-") as tmp:
            res = one_round(Path(tmp), args.role, args.threads, rng)
        rounds.append(res)
        print(f"round {i + 1}: {json.dumps(res)}", flush=True)
    summary = {
        "role": args.role,
        "threads": args.threads,
        "lost_median": statistics.median(r["lost"] for r in rounds),
        "lost_max": max(r["lost"] for r in rounds),
        "window_ms_median": statistics.median(r["window_ms"] for r in rounds),
        "window_ms_max": max(r["window_ms"] for r in rounds),
        "sends_per_s_median": statistics.median(r["rate"] for r in rounds),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
