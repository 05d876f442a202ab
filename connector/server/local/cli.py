"""``pymq local``: a dev cluster in the foreground until Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from connector.errors import PyMQError
from connector.server.local.cluster import LocalCluster

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=int, default=2, help="number of brokers (default 2)")
    parser.add_argument("--namesrvs", type=int, default=1, help="number of NameServers (default 1)")
    parser.add_argument("--data", type=Path, help="data folder (default: a new temp folder)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--flush", choices=["async", "sync"], help="brokers' flush mode")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    if not 1 <= args.brokers <= 26 or not 1 <= args.namesrvs <= 8:
        print("pymq local: --brokers must be 1..26 and --namesrvs 1..8", file=sys.stderr)
        return 2
    data = args.data or Path(tempfile.mkdtemp(prefix="pymq-local-"))
    broker_args = ["--flush", args.flush] if args.flush else []
    cluster = LocalCluster(
        data, brokers=args.brokers, namesrvs=args.namesrvs, host=args.host,
        broker_args=broker_args,
    )  # fmt: skip
    stop = threading.Event()

    def on_signal(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start()
    except PyMQError as exc:
        print(f"pymq local: {exc.message} (logs in {data / 'logs'})", file=sys.stderr)
        return 1
    for proc in [*cluster.namesrvs, *cluster.brokers]:
        print(f"  {proc.name:<12} remoting {proc.addr}, http http://{proc.http_addr}", flush=True)
    print(
        f"pymq local ready: namesrv {cluster.namesrv_addr}, {len(cluster.brokers)} brokers, "
        f"data {data} (Ctrl-C stops)",
        flush=True,
    )
    code = 0
    while not stop.wait(0.5):
        dead = [p for p in [*cluster.namesrvs, *cluster.brokers] if not p.running]
        if dead:
            print(f"pymq local: {dead[0].name} exited; stopping the cluster", file=sys.stderr)
            code = 1
            break
    cluster.stop()
    print("pymq local stopped", flush=True)
    return code
