"""``pymq store inspect|verify --store DIR``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from broker.store.inspect import inspect_store, verify_store


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    p = sub.add_parser("inspect", help="segments, queues (min/max offset) and checkpoint")
    p.add_argument("--store", required=True, help="the broker's store directory")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_inspect)
    v = sub.add_parser("verify", help="check every record and queue entry; exit 1 on problems")
    v.add_argument("--store", required=True, help="the broker's store directory")
    v.add_argument("--json", action="store_true", help="print JSON instead of text")
    v.set_defaults(run=_verify)


def _store_dir(raw: str) -> Path | None:
    path = Path(raw)
    if not (path / "commitlog").is_dir():
        print(f"pymq store: {raw} is not a store directory (no commitlog/ inside)", file=sys.stderr)
        return None
    return path


def _inspect(args: argparse.Namespace) -> int:
    path = _store_dir(args.store)
    if path is None:
        return 2
    info = inspect_store(path)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"store {info['store_dir']}  abort file: {'yes' if info['running_or_crashed'] else 'no'}")
    print(f"{'segment':<22}{'bytes':>14}")
    for seg in info["segments"]:
        print(f"{seg['name']:<22}{seg['bytes']:>14,}")
    print(f"\n{'topic':<40}{'queue':>6}{'min':>12}{'max':>12}")
    for q in info["queues"]:
        print(f"{q['topic']:<40}{q['queue_id']:>6}{q['min_offset']:>12}{q['max_offset']:>12}")
    cp = info["checkpoint"]
    print("\ncheckpoint:", "none" if cp is None else ", ".join(f"{k}={v}" for k, v in cp.items()))
    return 0


def _verify(args: argparse.Namespace) -> int:
    path = _store_dir(args.store)
    if path is None:
        return 2
    report = verify_store(path)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": report.ok,
                    "records": report.records,
                    "end_offset": report.end_offset,
                    "problems": report.problems,
                },
                indent=1,
            )
        )
    else:
        print(f"{report.records} records, valid data ends at {report.end_offset}")
        for problem in report.problems:
            print(f"problem: {problem}")
        print("ok" if report.ok else f"{len(report.problems)} problem(s)")
    return 0 if report.ok else 1
