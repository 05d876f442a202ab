"""``pymq``: the command line of pymq.

Subcommands live in the package that owns them and are imported only when
used, so ``pymq admin`` never loads server code and the servers never load
the client CLI. A subcommand that needs one of pymq's extras (the servers:
``pymq[server]``) checks it before its module loads, and without it exits with
one line naming the extra to install.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from connector import __version__
from connector.extras import install_hint, missing

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
        "connector.local.cli",
        "run a dev cluster (NameServers + brokers) in the foreground",
    ),
}


# subcommand -> the extra of pymq it needs (pyproject.toml says what each holds)
_EXTRAS: dict[str, str] = {"broker": "server", "namesrv": "server", "local": "server"}

_PARSER_ATTR = "_pymq_parser"  # the namespace's note of the innermost parser that ran
_MAX_USAGE_CHARS = 160


class Parser(argparse.ArgumentParser):
    """argparse with the errors of a command line tool: the usage of the command that
    was typed (``pymq admin topic create``, not ``pymq``) on one line, then the error.

    Every subcommand's parser is of this class (argparse makes subparsers of their
    parent's class), so each notes itself on the namespace it fills; the innermost
    one is the command that was typed.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = super().parse_known_args(args, namespace)
        if not hasattr(ns, _PARSER_ATTR):
            setattr(ns, _PARSER_ATTR, self)
        return ns, extras

    def short_usage(self) -> str:
        """The usage on one line; a long one points at ``--help``."""
        usage = " ".join(self.format_usage().split())
        if len(usage) <= _MAX_USAGE_CHARS:
            return usage
        return f"usage: {self.prog} [options] ({self.prog} --help lists them)"

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.short_usage()}\n{self.prog}: error: {message}\n")


def _typed_command(argv: Sequence[str]) -> str | None:
    """The subcommand on the command line: its first argument that is not an option
    (``pymq``'s own options take no value)."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``pymq``; only the subcommand on ``argv`` imports its module (the
    others are listed by name and help), so ``pymq admin`` loads no server code and
    ``pymq broker`` no client code. ``argv=None`` builds every subcommand in full."""
    typed = None if argv is None else _typed_command(argv)
    parser = Parser(
        prog="pymq",
        description="pymq: a RocketMQ-style message broker whose first-class client is Spark.",
    )
    parser.add_argument("--version", action="version", version=f"pymq {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in _COMMANDS.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        if argv is None or name == typed:
            importlib.import_module(module).register(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    typed_command = _typed_command(argv)
    extra = _EXTRAS.get(typed_command or "")
    if extra and (absent := missing(extra)):
        print(f"pymq {typed_command}: {install_hint(extra, absent)}", file=sys.stderr)
        return 1
    parser = build_parser(argv)
    args, extras = parser.parse_known_args(argv)
    typed: argparse.ArgumentParser = getattr(args, _PARSER_ATTR, parser)
    delattr(args, _PARSER_ATTR)
    if extras:  # the command that was typed refuses them, with its own usage
        typed.error(f"unrecognized arguments: {' '.join(extras)}")
    if not getattr(args, "run", None):
        parser.print_help()
        return 2
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (| head): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit would fail again
        return 141
    return code


if __name__ == "__main__":
    sys.exit(main())
