"""``pymq broker``: run one broker in the foreground."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig
from broker.store.config import StoreConfig
from connector.errors import PyMQError
from connector.server.settings import load_settings

__all__ = ["build_config", "register"]


def register(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--config", type=Path, help="TOML file with broker and store settings (conf/broker-a.toml)")
    add("--name", dest="broker_name", help="broker name (default broker-a)")
    add("--cluster", dest="broker_cluster_name", help="cluster name (default DefaultCluster)")
    add("--id", dest="broker_id", help="broker id: 0 = master, 1.. = its slaves (default 0)")
    add(
        "--role",
        dest="broker_role",
        type=str.upper,
        choices=["ASYNC_MASTER", "SYNC_MASTER", "SLAVE"],
        help="ASYNC_MASTER (default), SYNC_MASTER (a send is answered once its in-sync "
        "slaves have it) or SLAVE (replicates the master of its --name; needs --id > 0)",
    )
    add("--ha-port", dest="ha_listen_port",
        help="a master's replication port; 0 picks a free one (default --port + 1)")  # fmt: skip
    add("--host", help="address to bind and to register (default 127.0.0.1)")
    add("--port", help="remoting (RocketMQ protocol) port; 0 picks a free one (default 10911)")
    add(
        "--http-port",
        dest="http_port",
        help="REST API port; 0 picks a free one (default --port + 4)",
    )
    add("--namesrv", help='NameServer addresses, "host:port;host:port"')
    add("--store", dest="store_dir", help="store directory (default ~/.pymq/store/NAME)")
    add("--flush", dest="flush_disk_type", choices=["async", "sync"],
        help="ASYNC_FLUSH (default) or SYNC_FLUSH")  # fmt: skip
    add("--segment-size", dest="mapped_file_size_commit_log",
        help="CommitLog segment size in bytes (default 1 GiB)")  # fmt: skip
    add("--auto-create-topic", dest="auto_create_topic_enable",
        action=argparse.BooleanOptionalAction, default=None,
        help="create unknown topics on first send from TBW102 (default on)")  # fmt: skip
    parser.set_defaults(run=_run)


def build_config(args: argparse.Namespace, environ: dict[str, str]) -> BrokerConfig:
    keys = (
        "broker_name", "broker_cluster_name", "broker_id", "host", "port", "http_port", "namesrv",
        "store_dir", "flush_disk_type", "mapped_file_size_commit_log", "auto_create_topic_enable",
        "broker_role", "ha_listen_port",
    )  # fmt: skip
    flags: dict[str, Any] = {k: getattr(args, k, None) for k in keys}
    return load_settings(
        BrokerConfig,
        config_file=args.config,
        environ=environ,
        flags=flags,
        extra_classes=(StoreConfig,),
    )


def _run(args: argparse.Namespace) -> int:
    # the server stack loads only when a server is about to start: `pymq --help`
    # and `pymq broker --help` answer without it
    from connector.server.serve import bind_socket, serve  # noqa: PLC0415

    try:
        config = build_config(args, dict(os.environ))
        rsock = bind_socket(config.host, config.port)
        sock = bind_socket(config.host, config.resolved_http_port)
        # a master listens for its slaves; a slave connects to its master's
        hsock = None
        if config.broker_role.is_master:
            hsock = bind_socket(config.host, config.resolved_ha_port)
    except PyMQError as exc:
        print(f"pymq broker: {exc.message}", file=sys.stderr)
        return 2
    port, http_port = rsock.getsockname()[1], sock.getsockname()[1]
    ha_port = hsock.getsockname()[1] if hsock is not None else None
    config = config.with_ports(port, http_port, ha_port)
    logging.basicConfig(
        level=config.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # imported late: the CLI answers --help and bad flags without loading the store
    from broker.app import create_app  # noqa: PLC0415
    from broker.controller import BrokerController  # noqa: PLC0415
    from broker.remoting import remoting_server  # noqa: PLC0415

    try:
        controller = BrokerController(config, ha_socket=hsock)
    except PyMQError as exc:
        print(f"pymq broker: {exc.message}", file=sys.stderr)
        return 2
    store_dir = controller.store.config.store_dir
    namesrv = ";".join(config.namesrv_addrs) or "none"

    ha = f"ha {config.host}:{ha_port}, " if ha_port is not None else ""
    ready = (
        f"pymq broker {config.broker_name} ready: remoting {config.host}:{port}, "
        f"http {'https' if controller.tls else 'http'}://{config.host}:{http_port} "
        f"(cluster {config.broker_cluster_name}, id {config.broker_id}, "
        f"{config.broker_role.value}, {ha}"
        f"store {store_dir}, namesrv {namesrv}, "
        f"{controller.store.config.flush_disk_type.value})"
    )

    # background threads (flushers, schedule) must not hold the GIL for the default
    # 5 ms while a request waits: that is the p99 of a single send otherwise
    sys.setswitchinterval(0.0005)
    app = create_app(controller)
    return serve(
        app,
        sock,
        ready_line=ready,
        log_level=config.log_level,
        on_exit=controller.stopping,
        remoting=(remoting_server(controller), rsock),
        # once started (store recovered, modules imported: ~60,000 objects), the
        # long-lived objects of the process leave the collector's view, so a full
        # collection takes ~1 ms instead of the several ms a send would wait on one
        on_ready=gc.freeze,
        tls=(str(config.tls_cert_file), str(config.tls_key_file)) if controller.tls else None,
        max_connections_per_address=config.max_connections_per_address,
    )
