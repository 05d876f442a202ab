"""The machine's physical limits, next to which pymq's figures are read: prints a table and JSON.

    python benchmarks/limits.py [--runs 3] [--quick] [--dir DIR] [--json-out FILE]

Measured on the machine it runs on, in ``--dir`` (the data disk: the temp
dir by default, where every benchmark puts its stores and servers' data):

* disk: sequential write bandwidth and fdatasync latency of 4 KiB appends,
  by ``store_bench.disk_limits`` (imported, not copied): fio (1 MiB blocks,
  512 MiB, psync, fsync at the end) when it is installed, else dd
  (``bs=1M count=512 conv=fdatasync``); then a Python loop of 300
  write + ``os.fdatasync`` of 4 KiB (p50 and p99);
* loopback TCP bandwidth: a Python sender thread and receiver thread on
  127.0.0.1 (socket calls release the GIL), ``sendall`` of 1 MiB buffers
  into ``recv_into`` a 1 MiB buffer, 4 GiB (quick: 1 GiB). Python sockets,
  not iperf3: what a Python process pushes through loopback is the ceiling
  of pymq's Python clients and brokers;
* loopback round trip: 128 bytes there and back between the two threads,
  10,000 times (p50 and p99): the floor under a synchronous request.

Also the machine itself (CPU model, cores, RAM, kernel, Python, the disk
under ``--dir``). Each figure is the median of ``--runs`` runs with min and
max.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store_bench import disk_limits

CHUNK = 1 << 20  # bytes per sendall / recv_into
PING = 128  # bytes of a round trip
PINGS = 10_000


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def log(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


# -- the machine -----------------------------------------------------------------------


def _command(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    res = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    return res.stdout.strip() if res.returncode == 0 else ""


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def ram_gib() -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    return 0.0


def disk_description(directory: Path) -> str:
    """Device, file system, size and kind of the disk holding ``directory``."""
    found = _command(["findmnt", "--target", str(directory), "-no", "SOURCE,FSTYPE"]).split()
    if len(found) < 2:
        return "unknown"
    source, fstype = found[0], found[1]
    parts = [f"{source} ({fstype})"]
    name = Path(source).name
    info = _command(["lsblk", "-dno", "SIZE,MODEL", source])
    if info:
        parts.append(" ".join(info.split()))
    rotational = Path(f"/sys/block/{name}/queue/rotational")
    if rotational.exists():
        # virtual disks (virtio) report 1 whatever is behind them
        kind = "rotational" if rotational.read_text().strip() == "1" else "non-rotational"
        virtual = name.startswith(("vd", "xvd"))
        parts.append(f"{kind} per the kernel{', a virtual disk' if virtual else ''}")
    return ", ".join(parts)


def machine(directory: Path) -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(ram_gib(), 1),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "disk": disk_description(directory),
        "data_dir": str(directory),
    }


# -- loopback --------------------------------------------------------------------------


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """A connected TCP pair on 127.0.0.1 (a real loopback connection, not socketpair())."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname(), timeout=30)
        accepted, _ = server.accept()
    accepted.settimeout(30)
    for s in (client, accepted):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client, accepted


def loopback_bandwidth(total_bytes: int) -> float:
    """Bytes/s from one thread's ``sendall`` to another's ``recv_into``."""
    sender, receiver = socket_pair()
    chunk = memoryview(b"\0" * CHUNK)
    errors: list[BaseException] = []

    def send() -> None:
        try:
            for _ in range(total_bytes // CHUNK):
                sender.sendall(chunk)
        except OSError as exc:
            errors.append(exc)

    buf = bytearray(CHUNK)
    view = memoryview(buf)
    got = 0
    try:
        thread = threading.Thread(target=send, daemon=True)
        t0 = time.perf_counter()
        thread.start()
        while got < total_bytes:
            n = receiver.recv_into(view)
            if n == 0:
                break
            got += n
        elapsed = time.perf_counter() - t0
        thread.join(30)
    finally:
        sender.close()
        receiver.close()
    if errors:
        raise errors[0]
    if got != total_bytes:
        raise RuntimeError(f"loopback: received {got} of {total_bytes} bytes")
    return got / elapsed


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("loopback peer closed")
        got += n


def loopback_round_trip(count: int) -> dict[str, float]:
    """``PING`` bytes to an echo thread and back, ``count`` times; p50/p99 in ms."""
    client, echo = socket_pair()
    message = b"p" * PING

    def serve() -> None:
        buf = memoryview(bytearray(PING))
        try:
            for _ in range(count):
                _recv_exactly(echo, buf)
                echo.sendall(buf)
        except OSError:
            return  # the client side fails too and says why

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    reply = memoryview(bytearray(PING))
    lat = []
    try:
        for _ in range(count):
            t0 = time.perf_counter()
            client.sendall(message)
            _recv_exactly(client, reply)
            lat.append(time.perf_counter() - t0)
        thread.join(30)
    finally:
        client.close()
        echo.close()
    lat.sort()
    return {
        "p50_ms": lat[len(lat) // 2] * 1000,
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
    }


# -- all of it -------------------------------------------------------------------------


def measure(directory: Path, runs: int, loop_bytes: int) -> dict[str, Any]:
    disks, bands, trips = [], [], []
    for r in range(runs):
        log(f"  run {r + 1}/{runs}: disk")
        disks.append(disk_limits(directory))
        log(f"  run {r + 1}/{runs}: loopback")
        bands.append(loopback_bandwidth(loop_bytes))
        trips.append(loopback_round_trip(PINGS))
    return {
        "disk": {
            "tool": disks[0]["tool"] + "; fdatasync: Python loop of 300 x 4 KiB",
            "seq_write_mb_s": summary([d["seq_write_mb_s"] for d in disks]),
            "fdatasync_ms_p50": summary([d["fdatasync_ms_p50"] for d in disks]),
            "fdatasync_ms_p99": summary([d["fdatasync_ms_p99"] for d in disks]),
        },
        "loopback": {
            "tool": (
                f"Python threads on 127.0.0.1, sendall/recv_into of {CHUNK >> 20} MiB, "
                f"{loop_bytes >> 30} GiB a run; round trip of {PING} bytes x {PINGS:,}"
            ),
            "mb_s": summary([b / 1e6 for b in bands]),
            "round_trip_ms_p50": summary([t["p50_ms"] for t in trips]),
            "round_trip_ms_p99": summary([t["p99_ms"] for t in trips]),
        },
    }


def print_table(results: dict[str, Any]) -> None:
    m, d, lo = results["machine"], results["disk"], results["loopback"]
    print(
        f"\n{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM, {m['kernel']}, "
        f"Python {m['python']}\ndisk: {m['disk']}\n"
        f"median of {results['runs']} (min-max)"
    )
    rows = [
        ("disk sequential write", d["seq_write_mb_s"], "MB/s", d["tool"]),
        ("disk fdatasync 4 KiB, p50", d["fdatasync_ms_p50"], "ms", ""),
        ("disk fdatasync 4 KiB, p99", d["fdatasync_ms_p99"], "ms", ""),
        ("loopback TCP bandwidth", lo["mb_s"], "MB/s", lo["tool"]),
        ("loopback round trip, p50", lo["round_trip_ms_p50"], "ms", ""),
        ("loopback round trip, p99", lo["round_trip_ms_p99"], "ms", ""),
    ]
    for label, fig, unit, note in rows:
        fmt = "{:,.0f}" if unit == "MB/s" else "{:.3f}"
        value = f"{fmt.format(fig['median'])} ({fmt.format(fig['min'])}-{fmt.format(fig['max'])})"
        print(f"{label:<28}{value:>26} {unit:<5} {note}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="one run, 1 GiB through loopback")
    ap.add_argument("--dir", default=None, help="a dir on the data disk (default: the temp dir)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    runs = 1 if args.quick else args.runs
    loop_bytes = (1 if args.quick else 4) << 30
    base = Path(tempfile.mkdtemp(prefix="pymq-limits-", dir=args.dir))
    try:
        results: dict[str, Any] = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "command": " ".join(["python", *sys.argv]),
            "machine": machine(base.parent),
            "runs": runs,
            **measure(base, runs, loop_bytes),
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_table(results)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
