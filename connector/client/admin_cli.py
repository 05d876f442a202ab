"""``pymq admin``: cluster, topic, message and consumer commands (tables, or ``--json``)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from connector.client.admin import Admin
from connector.client.admin_format import Output, key_values, parse_time, table
from connector.client.admin_messages import (
    message_dlq,
    message_get,
    message_print,
    message_query,
    message_send,
)
from connector.errors import ConfigError, PyMQError

__all__ = ["register"]

Handler = Callable[[Admin, argparse.Namespace], Any]


def _cluster_list(admin: Admin, _args: argparse.Namespace) -> Any:
    info = admin.cluster_list()
    cluster_of = {b: c for c, names in info.clusters.items() for b in names}
    lives = sorted(info.live, key=lambda x: (x.broker_name, x.broker_id))
    ha: dict[str, dict[str, Any]] = {}
    for live in lives:  # each broker's replication state, from its /health
        try:
            ha[live.addr] = admin.broker_status(live.addr).get("ha") or {}
        except PyMQError:
            ha[live.addr] = {}
    # what each master says of its slaves: broker name -> slave id -> state
    seen_by_master = {
        live.broker_name: {s["broker_id"]: s for s in ha[live.addr].get("slaves", [])}
        for live in lives
        if live.broker_id == 0
    }
    rows = []
    for live in lives:
        state = ha[live.addr]
        row: dict[str, Any] = {
            "cluster": cluster_of.get(live.broker_name, live.cluster),
            "broker": live.broker_name,
            "id": live.broker_id,
            "role": state.get("role", "unreachable"),
            "addr": live.addr,
            "epoch": state.get("epoch", ""),
            "max_offset": state.get("max_offset", ""),
            "last_heartbeat_ms": live.last_update_timestamp,
        }
        if "slaves" in state:  # a master: how many of its slaves are in sync
            slaves = state["slaves"]
            row["lag_bytes"] = max((s["lag_bytes"] for s in slaves), default=0)
            row["in_sync"] = f"{sum(1 for s in slaves if s['in_sync'])}/{len(slaves)} slaves"
        elif "master_connected" in state:  # a slave: its lag, and its master's view of it
            mine = seen_by_master.get(live.broker_name, {}).get(live.broker_id)
            row["lag_bytes"] = state.get("lag_bytes", "")
            row["in_sync"] = (
                "yes"
                if mine and mine["in_sync"]
                else "no"
                if state.get("master_connected")
                else "master lost"
            )
        rows.append(row)
    columns = [
        "cluster",
        "broker",
        "id",
        "role",
        "addr",
        "epoch",
        "max_offset",
        "lag_bytes",
        "in_sync",
        "last_heartbeat_ms",
    ]
    return rows, columns


def _topic_create(admin: Admin, args: argparse.Namespace) -> Any:
    brokers = admin.create_topic(
        args.name, cluster=args.cluster, read_queue_nums=args.queues, write_queue_nums=args.queues
    )
    return [{"topic": args.name, "broker": b, "queues": args.queues} for b in brokers], [
        "topic",
        "broker",
        "queues",
    ]


def _topic_list(admin: Admin, _args: argparse.Namespace) -> Any:
    return [{"topic": t} for t in admin.topic_list()], ["topic"]


def _topic_route(admin: Admin, args: argparse.Namespace) -> Any:
    route = admin.topic_route(args.name)
    addrs = {b.broker_name: b.addrs.get("0", "") for b in route.brokers}
    rows = [
        {
            "broker": q.broker_name,
            "addr": addrs.get(q.broker_name, ""),
            "read_queues": q.read_queue_nums,
            "write_queues": q.write_queue_nums,
            "perm": q.perm,
        }
        for q in route.queues
    ]
    return rows, ["broker", "addr", "read_queues", "write_queues", "perm"]


def _topic_status(admin: Admin, args: argparse.Namespace) -> Any:
    rows = admin.topic_status(args.name)
    return rows, ["broker_name", "queue_id", "min_offset", "max_offset", "last_update_timestamp"]


def _topic_delete(admin: Admin, args: argparse.Namespace) -> Any:
    return [{"topic": args.name, "deleted_on": b} for b in admin.delete_topic(args.name)], [
        "topic",
        "deleted_on",
    ]


def _broker_status(admin: Admin, args: argparse.Namespace) -> Any:
    status = admin.broker_status(args.addr)
    return Output(key_values(status), ["key", "value"], data=status)


def _consumer_progress(admin: Admin, args: argparse.Namespace) -> Any:
    rows = admin.consumer_progress(args.group)
    columns = [
        "topic",
        "broker_name",
        "queue_id",
        "broker_offset",
        "consumer_offset",
        "lag",
        "last_timestamp",
    ]
    return rows, columns


def _consumer_reset(admin: Admin, args: argparse.Namespace) -> Any:
    rows = admin.reset_offset(args.group, args.topic, args.timestamp)
    return rows, ["broker_name", "queue_id", "offset"]


def _consumer_list(admin: Admin, _args: argparse.Namespace) -> Output:
    groups = admin.consumer_groups()
    rows = [{**g, "state": "online" if g["clients"] else "offline"} for g in groups]
    columns = ["group", "state", "clients", "consume_type", "message_model", "topics", "total_lag"]
    return Output(rows, columns, data=groups)


_CONNECTION_COLUMNS = ["client_id", "addr", "language", "version", "last_heartbeat_ms"]


def _consumer_connections(admin: Admin, args: argparse.Namespace) -> Output:
    view = admin.consumer_connections(args.group)
    subs = ", ".join(f"{t} ({e})" for t, e in view["subscriptions"].items()) or "none"
    footer = (
        f"{len(view['connections'])} client(s) online; {view['consume_type'] or '-'}, "
        f"{view['message_model'] or '-'}, {view['consume_from_where'] or '-'}; "
        f"subscriptions: {subs}"
    )
    return Output(view["connections"], _CONNECTION_COLUMNS, data=view, footer=footer)


def _consumer_running_info(admin: Admin, args: argparse.Namespace) -> Output:
    info = admin.consumer_running_info(args.group, args.client_id)
    rows = [
        {"queue": key, **{k: v for k, v in q.items() if not isinstance(v, dict)}}
        for key, q in sorted((info.get("mqTable") or {}).items())
    ]
    props = info.get("properties") or {}
    subs = ", ".join(
        f"{s.get('topic')} ({s.get('subString')})" for s in info.get("subscriptionSet") or []
    )
    footer = f"{len(rows)} queue(s) held; subscriptions: {subs or 'none'}; " + ", ".join(
        f"{k}={v}" for k, v in sorted(props.items())
    )
    columns = ["queue", "commitOffset", "cachedMsgCount", "cachedMsgSizeInMiB", "locked"]
    return Output(rows, columns, data=info, footer=footer)


def _consumer_consume(admin: Admin, args: argparse.Namespace) -> Output:
    answer = admin.consume_directly(args.group, args.client_id, args.msg_id, args.topic)
    return Output(key_values(answer), ["key", "value"], data=answer)


def _producer_connections(admin: Admin, args: argparse.Namespace) -> Output:
    view = admin.producer_connections(args.group)
    footer = f"{len(view['connections'])} client(s) online"
    return Output(view["connections"], _CONNECTION_COLUMNS, data=view, footer=footer)


_PERMS = {"0": 0, "2": 2, "4": 4, "6": 6, "-": 0, "w": 2, "r": 4, "rw": 6, "wr": 6}


def _perm(text: str) -> int:
    try:
        return _PERMS[text.strip().lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a permission: 2 or w (write), 4 or r (read), 6 or rw (both)"
        ) from None


def _topic_update(admin: Admin, args: argparse.Namespace) -> Output:
    rows = admin.update_topic(args.name, perm=args.perm)
    return Output(rows, ["broker_name", "topic", "read_queue_nums", "write_queue_nums", "perm"])


def _broker_config_get(admin: Admin, args: argparse.Namespace) -> Output:
    config = admin.broker_config(args.addr)
    if args.keys:
        unknown = [k for k in args.keys if k not in config]
        if unknown:
            raise ConfigError(f"unknown setting {unknown[0]!r}")
        config = {k: config[k] for k in args.keys}
    return Output(key_values(config), ["key", "value"], data=config)


def _broker_config_set(admin: Admin, args: argparse.Namespace) -> Output:
    pairs = args.pairs
    if len(pairs) % 2:
        raise ConfigError("broker config set takes KEY VALUE pairs")
    changes = dict(zip(pairs[::2], pairs[1::2], strict=True))
    config = admin.update_broker_config(args.addr, changes)
    changed = {k: config[k] for k in changes}
    return Output(key_values(changed), ["key", "value"], data=changed)


def _common_options(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "--namesrv", default=default, help='NameServer addresses "h:p;h:p" (or PYMQ_NAMESRV)'
    )
    parser.add_argument(
        "--json", action="store_true", default=default, help="print JSON instead of a table"
    )
    parser.add_argument(
        "--access-key", default=default, help="sign requests as this account (or PYMQ_ACCESS_KEY)"
    )
    parser.add_argument(
        "--secret-key",
        default=default,
        help="the account's secret (better: PYMQ_SECRET_KEY, kept out of `ps`)",
    )
    parser.add_argument(
        "--tls", action="store_true", default=default, help="the servers serve TLS (or PYMQ_TLS=1)"
    )
    parser.add_argument(
        "--tls-ca-file",
        default=default,
        help="CA that signed the servers' certificates, PEM (implies --tls; PYMQ_TLS_CA_FILE)",
    )


def register(parser: argparse.ArgumentParser) -> None:
    _common_options(parser, None)
    # the same options on every subcommand, so they may stand anywhere on the line; their
    # SUPPRESS default keeps a value typed before the subcommand
    shared = argparse.ArgumentParser(add_help=False)
    _common_options(shared, argparse.SUPPRESS)
    groups = parser.add_subparsers(dest="admin_group", metavar="GROUP", required=True)

    def group_parser(name: str, help_text: str) -> argparse.ArgumentParser:
        return groups.add_parser(name, help=help_text, description=help_text, parents=[shared])

    def command(
        group: argparse._SubParsersAction[argparse.ArgumentParser],
        name: str,
        handler: Handler,
        help_text: str,
    ) -> argparse.ArgumentParser:
        p = group.add_parser(name, help=help_text, description=help_text, parents=[shared])
        p.set_defaults(run=_runner(handler))
        return p

    topic = group_parser("topic", "create, list, route, status, delete, update")
    t = topic.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(t, "create", _topic_create, "create a topic on every broker of a cluster")
    p.add_argument("name")
    p.add_argument("--cluster", default="DefaultCluster")
    p.add_argument("--queues", type=int, default=8)
    command(t, "list", _topic_list, "every topic the NameServer knows")
    command(t, "route", _topic_route, "brokers and queues of a topic").add_argument("name")
    command(t, "status", _topic_status, "min/max offset of every queue").add_argument("name")
    command(t, "delete", _topic_delete, "delete a topic from every broker").add_argument("name")
    p = command(t, "update", _topic_update, "change a topic's permission on every broker")
    p.add_argument("name")
    p.add_argument(
        "--perm",
        type=_perm,
        required=True,
        help="2 or w (write only), 4 or r (read only), 6 or rw (both)",
    )

    cluster = group_parser("cluster", "list brokers")
    c = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    command(
        c,
        "list",
        _cluster_list,
        "clusters, brokers, roles, epochs, replication lag and in-sync state, last heartbeats",
    )

    broker = group_parser("broker", "one broker's status and settings")
    b = broker.add_subparsers(dest="action", metavar="ACTION", required=True)
    addr_help = "the broker's remoting or REST address, or a broker name (its master)"
    command(b, "status", _broker_status, "a broker's /health").add_argument("addr", help=addr_help)
    config = b.add_parser(
        "config",
        help="get or set a running broker's settings",
        description="get or set a running broker's settings",
        parents=[shared],
    )
    bc = config.add_subparsers(dest="config_action", metavar="ACTION", required=True)
    p = command(bc, "get", _broker_config_get, "every setting, or the KEYs, as the broker runs")
    p.add_argument("addr", help=addr_help)
    p.add_argument("keys", nargs="*", metavar="KEY")
    p = command(
        bc,
        "set",
        _broker_config_set,
        "change settings until the broker stops (only "
        "those it reads at run time: max_reconsume_times, auto_create_topic_enable, ...)",
    )
    p.add_argument("addr", help=addr_help)
    p.add_argument("pairs", nargs="+", metavar="KEY VALUE")

    message = group_parser("message", "get, query, send, print, dlq")
    m = message.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = command(
        m,
        "get",
        message_get,
        "a message by either msgId: the one its send returned (UNIQ_KEY) or its offset msgId",
    )
    p.add_argument("msg_id")
    p.add_argument("--topic", help="look a UNIQ_KEY msgId up in this topic only (faster)")
    p = command(m, "query", message_query, "messages of a topic by key")
    p.add_argument("topic")
    p.add_argument("--key", required=True)
    p = command(m, "send", message_send, "send one message (through the full producer path)")
    p.add_argument("topic")
    p.add_argument("body")
    p.add_argument("--tags")
    p.add_argument("--keys", nargs="*")
    p = command(
        m,
        "print",
        message_print,
        "print a topic's messages (a console consumer that "
        "commits nothing); one line each, JSON lines with --json",
    )
    p.add_argument("topic")
    p.add_argument("--queue", type=_natural, help="this queue id only (of every broker)")
    start = p.add_mutually_exclusive_group()
    start.add_argument(
        "--from",
        dest="from_offset",
        type=_natural,
        metavar="OFFSET",
        help="start at this queue offset (default: each queue's first)",
    )
    start.add_argument(
        "--since",
        type=_time,
        metavar="TIME",
        help="start at the first message stored at/after TIME (now|ISO|MS)",
    )
    p.add_argument("--count", type=_positive, metavar="N", help="stop after N messages")
    p.add_argument(
        "--follow", action="store_true", help="keep waiting for new messages until Ctrl-C"
    )
    p = command(m, "dlq", message_dlq, "the messages of a group's dead letter queue (%DLQ%GROUP)")
    p.add_argument("group")
    p.add_argument("--count", type=_positive, metavar="N", help="at most N messages")

    consumer = group_parser("consumer", "list, connections, running-info, consume, progress, reset")
    cs = consumer.add_subparsers(dest="action", metavar="ACTION", required=True)
    command(cs, "list", _consumer_list, "consumer groups: online or not, clients, topics, lag")
    command(
        cs,
        "connections",
        _consumer_connections,
        "a group's clients online: ids, addresses, versions; its subscriptions",
    ).add_argument("group")
    p = command(
        cs,
        "running-info",
        _consumer_running_info,
        "a live consumer's own view: its settings, subscriptions, queues held and offsets",
    )
    p.add_argument("group")
    p.add_argument("client_id", help="as `consumer connections` lists it")
    p = command(
        cs,
        "consume",
        _consumer_consume,
        "give one stored message to a live consumer's listener now (offsets do not move)",
    )
    p.add_argument("group")
    p.add_argument("client_id", help="as `consumer connections` lists it")
    p.add_argument("msg_id", help="the offset msgId, or the msgId a send returned")
    p.add_argument("--topic", help="the message's topic (faster for a send's msgId)")
    command(
        cs, "progress", _consumer_progress, "broker offset, consumer offset, lag per queue"
    ).add_argument("group")
    p = command(cs, "reset", _consumer_reset, "move a group's offsets to a point in time")
    p.add_argument("group")
    p.add_argument("topic")
    p.add_argument(
        "--timestamp",
        type=_time,
        required=True,
        help="now, an ISO date-time (2026-11-27T18:40:02, local unless it has an offset) "
        "or ms since the epoch",
    )

    producer = group_parser("producer", "connections")
    ps = producer.add_subparsers(dest="action", metavar="ACTION", required=True)
    command(
        ps,
        "connections",
        _producer_connections,
        "a producer group's clients online: ids, addresses, versions",
    ).add_argument("group")


def _natural(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a number >= 0")
    return int(text)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number > 0")
    return int(text)


def _time(text: str) -> int:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _runner(handler: Handler) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        # the one-line error below says what failed; the client's warnings (a connection
        # closed, a retry) would only add lines to it
        logging.basicConfig(level=logging.ERROR, format="pymq admin: %(message)s")
        try:
            ca_file = args.tls_ca_file or os.environ.get("PYMQ_TLS_CA_FILE") or None
            with Admin(
                namesrv=args.namesrv or os.environ.get("PYMQ_NAMESRV"),
                access_key=args.access_key or os.environ.get("PYMQ_ACCESS_KEY"),
                secret_key=args.secret_key or os.environ.get("PYMQ_SECRET_KEY"),
                # a CA file means TLS
                tls=bool(args.tls or ca_file) or os.environ.get("PYMQ_TLS", "") in ("1", "true"),
                tls_ca_file=ca_file,
            ) as admin:
                out = handler(admin, args)
        except PyMQError as exc:
            print(f"pymq admin: {exc.message}", file=sys.stderr)
            return 1
        if out is None:  # the command printed as it went
            return 0
        if isinstance(out, tuple):
            out = Output(*out)
        if args.json:
            print(json.dumps(out.json_data, indent=1, default=str))
        else:
            print(table(out.rows, out.columns))
            if out.footer:
                print(out.footer)
        return 0

    return run
