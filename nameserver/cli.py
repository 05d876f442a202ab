"""``pymq namesrv``: run a NameServer in the foreground until SIGTERM/SIGINT.

Settings: flags > ``PYMQ_*`` environment > ``--config`` TOML file > defaults
(see ``nameserver.config.NamesrvConfig``). A bad setting or a busy port is
one line on stderr and exit code 2; the ready line goes to stdout.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from connector.errors import ConfigError
from connector.server.settings import load_settings
from nameserver.config import NamesrvConfig

__all__ = ["register"]

log = logging.getLogger(__name__)

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def register(parser: argparse.ArgumentParser) -> None:
    """Add the ``namesrv`` flags to ``parser`` (every default None: unset flags never win)."""
    parser.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    # no type=int: a bad value becomes a one-line ConfigError from load_settings
    parser.add_argument(
        "--port", default=None, help="remoting (RocketMQ protocol) port, 0 for any (default 9876)"
    )
    parser.add_argument(
        "--http-port", default=None, help="REST API port, 0 for any (default --port + 4)"
    )
    parser.add_argument("--config", default=None, metavar="FILE", help="a TOML settings file")
    parser.add_argument(
        "--data", default=None, metavar="DIR", help="data directory (default ~/.pymq/namesrv)"
    )
    parser.set_defaults(run=_run)


def _fail(message: str) -> int:
    print(f"pymq namesrv: {message}", file=sys.stderr)
    return 2


def _run(args: argparse.Namespace) -> int:
    try:
        config = load_settings(
            NamesrvConfig,
            config_file=Path(args.config) if args.config else None,
            environ=os.environ,
            flags={
                "host": args.host,
                "port": args.port,
                "http_port": args.http_port,
                "data_dir": args.data,
            },
        )
    except ConfigError as exc:
        return _fail(exc.message)
    logging.basicConfig(
        level=logging.DEBUG if config.log_level == "trace" else config.log_level.upper(),
        format=_LOG_FORMAT,
        stream=sys.stderr,
    )
    # the server stack loads only when a server is about to start: `pymq --help`,
    # the other subcommands (the CLI imports every register()) and bad flags stay fast
    from connector.protocol.tls import server_context  # noqa: PLC0415
    from connector.server.serve import bind_socket, serve  # noqa: PLC0415
    from nameserver.app import create_app  # noqa: PLC0415
    from nameserver.remoting import remoting_server  # noqa: PLC0415

    data_dir = config.resolved_data_dir
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"cannot create data directory {data_dir}: {exc.strerror or exc}")
    app = create_app(config)
    try:
        rsock = bind_socket(config.host, config.port)
        hsock = bind_socket(config.host, config.resolved_http_port)
    except ConfigError as exc:
        return _fail(exc.message)
    host = config.host
    port, http_port = rsock.getsockname()[1], hsock.getsockname()[1]
    tls = _tls(config)
    try:
        context = server_context(*tls) if tls else None
    except ConfigError as exc:
        return _fail(exc.message)
    remoting = remoting_server(
        app.state.routes, app.state.kv, app.state.acl, tls=context,
        max_frame_bytes=config.max_frame_bytes,
        max_connections_per_address=config.max_connections_per_address,
    )  # fmt: skip
    scheme = "https" if tls else "http"
    return serve(
        app,
        hsock,
        ready_line=(
            f"pymq namesrv ready: remoting {host}:{port}, http {scheme}://{host}:{http_port}"
            f" (data {data_dir}{', TLS' if tls else ''})"
        ),
        log_level=config.log_level,
        remoting=(remoting, rsock),
        tls=tls,
        max_connections_per_address=config.max_connections_per_address,
    )


def _tls(config: NamesrvConfig) -> tuple[str, str] | None:
    if config.tls_cert_file and config.tls_key_file:
        return str(config.tls_cert_file), str(config.tls_key_file)
    return None
