"""``pymq``: the command line of pymq.

Subcommands live in the package that owns them and are imported only when
used, so ``pymq admin`` never loads server code and the servers never load
the client CLI.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from connector import __version__

# subcommand -> (module with register(subparsers), one-line help)
_COMMANDS: dict[str, tuple[str, str]] = {
    "broker": ("broker.cli", "run a broker (store; remoting data plane and REST admin API)"),
    "store": ("broker.store.cli", "inspect or verify a broker's store directory (read-only)"),
    "namesrv": ("nameserver.cli", "run a NameServer (route registry)"),
    "admin": ("connector.client.admin_cli", "cluster, topic, message and consumer admin (mqadmin)"),
    "spark-jar": (
        "connector.spark_jar",
        'print the path of the jar of format("pymq-jvm"), for spark.jars',
    ),
    "local": (
        "connector.server.local.cli",
        "run a dev cluster (NameServers + brokers) in the foreground",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pymq",
        description="pymq: a RocketMQ-style message broker whose first-class client is Spark.",
    )
    parser.add_argument("--version", action="version", version=f"pymq {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in _COMMANDS.items():
        mod = importlib.import_module(module)
        mod.register(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
