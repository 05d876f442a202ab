"""``pymq local``: a dev cluster in the foreground until Ctrl-C / SIGTERM."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from connector.errors import PyMQError
from connector.local.cluster import LocalCluster

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--brokers", type=int, default=2, help="number of brokers (default 2)")
    parser.add_argument("--namesrvs", type=int, default=1, help="number of NameServers (default 1)")
    parser.add_argument(
        "--slaves", type=int, default=0,
        help="slaves of each broker (default 0): broker-a-s1, ... replicate broker-a",
    )  # fmt: skip
    parser.add_argument(
        "--role", type=str.upper, choices=["ASYNC_MASTER", "SYNC_MASTER"],
        help="the masters' role (default ASYNC_MASTER; SYNC_MASTER needs --slaves)",
    )  # fmt: skip
    parser.add_argument("--data", type=Path, help="data folder (default: a new temp folder)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--flush", choices=["async", "sync"], help="brokers' flush mode")
    parser.add_argument(
        "--port", type=_port, default=0,
        help="the first NameServer's remoting port (default 0: a free one; README: 9876)",
    )  # fmt: skip
    parser.add_argument(
        "--http-port", type=_port, default=None,
        help="the first NameServer's REST port (default --port + 4, free with --port 0)",
    )  # fmt: skip
    parser.set_defaults(run=_run)


def _port(raw: str) -> int:
    if not raw.isdigit() or int(raw) > 65535:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a port (0..65535)")
    return int(raw)


def _run(args: argparse.Namespace) -> int:
    if not 1 <= args.brokers <= 26 or not 1 <= args.namesrvs <= 8 or not 0 <= args.slaves <= 8:
        print(
            "pymq local: --brokers must be 1..26, --namesrvs 1..8 and --slaves 0..8",
            file=sys.stderr,
        )
        return 2
    data = args.data or Path(tempfile.mkdtemp(prefix="pymq-local-"))
    broker_args = ["--flush", args.flush] if args.flush else []
    env = None
    if args.role:
        env = {**os.environ, "PYMQ_BROKER_ROLE": args.role}  # masters; slaves say --role SLAVE
    cluster = LocalCluster(
        data, brokers=args.brokers, namesrvs=args.namesrvs, slaves=args.slaves,
        host=args.host, broker_args=broker_args, env=env, port=args.port,
        http_port=args.http_port,
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
    slaves = f" ({args.slaves} slave(s) each)" if args.slaves else ""
    print(
        f"pymq local ready: namesrv {cluster.namesrv_addr}, {args.brokers} brokers{slaves}, "
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
