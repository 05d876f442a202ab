"""``pymq admin message ...``: get, query, send, print (a console consumer) and dlq.

Bodies are shown as text when they are UTF-8 text, base64 otherwise; ``--json``
keeps the REST API's ``body_base64`` and adds ``body`` (the text, or null).
``message print`` reads queues through the brokers' REST pulls, which commit
nothing: no group, no offsets, no trace on the brokers.
"""

from __future__ import annotations

import argparse
import base64
import json
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

from connector.client.admin import Admin
from connector.client.admin_format import (
    Output,
    body_text,
    format_time,
    key_values,
    now_ms,
    with_body,
)
from connector.client.producer import Producer
from connector.errors import TopicNotExistError
from connector.protocol.message import Message
from connector.protocol.names import validate_group
from connector.protocol.properties import PropertyKeys

__all__ = ["message_dlq", "message_get", "message_print", "message_query", "message_send"]

DLQ_PREFIX = "%DLQ%"
_PULL_BATCH = 32
_FOLLOW_WAIT_MS = 1000  # a pass over the queues waits about this long for news


def _raw(message: dict[str, Any]) -> bytes:
    return base64.b64decode(message.get("body_base64") or "")


def _shown(message: dict[str, Any]) -> dict[str, Any]:
    """``body`` as text, or ``body_base64`` when it is not text (not both)."""
    view = with_body(message)
    if view["body"] is None:
        view.pop("body")
    else:
        view.pop("body_base64", None)
    return view


def message_get(admin: Admin, args: argparse.Namespace) -> Output:
    msg = with_body(admin.get_message(args.msg_id, topic=args.topic))
    return Output(key_values(_shown(msg)), ["key", "value"], data=msg)


def message_query(admin: Admin, args: argparse.Namespace) -> Output:
    msgs = [with_body(m) for m in admin.query_message(args.topic, args.key)]
    rows = [{**m, "body": body_text(_raw(m))} for m in msgs]
    columns = [
        "broker_name",
        "queue_id",
        "queue_offset",
        "msg_id",
        "offset_msg_id",
        "tags",
        "keys",
        "store_timestamp",
        "body",
    ]
    return Output(rows, columns, data=msgs)


def message_send(admin: Admin, args: argparse.Namespace) -> Output:
    creds = admin.credentials
    with Producer(
        group="pymq-admin",
        namesrv=admin.namesrv.addrs,
        access_key=creds.access_key if creds else None,
        secret_key=creds.secret_key if creds else None,
        tls=admin.tls,
        tls_ca_file=admin.tls_ca_file,
    ) as producer:
        r = producer.send(
            Message(topic=args.topic, body=args.body.encode(), tags=args.tags, keys=args.keys or [])
        )
    row = {
        "status": r.status.value,
        "msg_id": r.msg_id,
        "offset_msg_id": r.offset_msg_id,
        "broker": r.queue.broker_name,
        "queue_id": r.queue.queue_id,
        "queue_offset": r.queue_offset,
    }
    return Output([row], list(row))


# -- print: a console consumer -----------------------------------------------------------


@dataclass(slots=True)
class _Cursor:
    broker_name: str
    broker: str  # REST base URL
    queue_id: int
    offset: int
    end: int  # the queue's max offset when reading began


def _cursors(admin: Admin, topic: str, args: argparse.Namespace) -> list[_Cursor]:
    out = []
    for name, addr, q in admin.topic_queues(topic):
        qid = q["queue_id"]
        if args.queue is not None and qid != args.queue:
            continue
        start = q["min_offset"]
        if args.since is not None:
            start = admin.offset_by_time(addr, topic, qid, args.since)
        elif args.from_offset is not None:
            start = max(q["min_offset"], min(args.from_offset, q["max_offset"]))
        out.append(_Cursor(name, addr, qid, start, q["max_offset"]))
    if args.queue is not None and not out:
        raise TopicNotExistError(f"topic {topic} has no queue {args.queue}")
    return out


def _line(broker_name: str, m: dict[str, Any], now: int) -> str:
    keys = m.get("keys") or []
    keys_text = " ".join(keys) if isinstance(keys, list) else str(keys)
    where = f"{broker_name}:{m['queue_id']}@{m['queue_offset']}"
    when = format_time(m.get("store_timestamp"), now)
    body = body_text(_raw(m)).replace("\r", "\\r").replace("\n", "\\n")
    return f"{where}  {when}  tags={m.get('tags') or '-'}  keys={keys_text or '-'}  {body}"


def read_messages(admin: Admin, topic: str, args: argparse.Namespace) -> int:
    """Print messages until the end of every queue (or forever with ``--follow``), at
    most ``--count``; the number printed. Ctrl-C stops it between two lines (at most
    a long poll, about a second, later), so what it counts is what it printed."""
    cursors = _cursors(admin, topic, args)
    limit = args.count
    printed = 0
    wait_ms = 0
    stop = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda _sig, _frame: stop.set())
    try:
        while cursors and (limit is None or printed < limit) and not stop.is_set():
            news = moved = False
            for c in cursors:
                if stop.is_set():
                    break
                if not args.follow and c.offset >= c.end:
                    continue
                want = _PULL_BATCH if limit is None else min(_PULL_BATCH, limit - printed)
                res = admin.pull(
                    c.broker, topic, c.queue_id, c.offset, max_nums=want, wait_ms=wait_ms
                )
                before, c.offset = c.offset, max(c.offset, int(res["next_begin_offset"]))
                moved = moved or c.offset != before
                now = now_ms()
                for m in res["messages"][:want]:
                    if stop.is_set():
                        break
                    row = {"broker_name": c.broker_name, **with_body(m)}
                    print(
                        json.dumps(row) if args.json else _line(c.broker_name, m, now), flush=True
                    )
                    printed += 1
                news = news or bool(res["messages"])
                if limit is not None and printed >= limit:
                    break
            # without --follow: done at the ends seen at the start, or when nothing moves
            # (messages counted but not yet readable, as a SYNC_MASTER's past its slaves)
            if not args.follow and (not moved or all(c.offset >= c.end for c in cursors)):
                break
            # caught up: the next pass waits (long polls) for news instead of spinning
            wait_ms = 0 if news else max(50, _FOLLOW_WAIT_MS // len(cursors))
    except KeyboardInterrupt:
        pass  # Ctrl-C before the handler was in place: a clean stop too
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    return printed


def message_print(admin: Admin, args: argparse.Namespace) -> Output | None:
    printed = read_messages(admin, args.topic, args)
    if not args.json:
        print(f"pymq admin: {printed} message(s)", file=sys.stderr)
    return None


def message_dlq(admin: Admin, args: argparse.Namespace) -> Output:
    """The messages of a group's dead letter queue ``%DLQ%GROUP`` (none: no table rows)."""
    topic = DLQ_PREFIX + validate_group(args.group)
    rows: list[dict[str, Any]] = []
    try:
        queues = admin.topic_queues(topic)
    except TopicNotExistError:
        queues = []
    for name, addr, q in queues:
        offset = q["min_offset"]
        while offset < q["max_offset"] and (args.count is None or len(rows) < args.count):
            res = admin.pull(addr, topic, q["queue_id"], offset, max_nums=_PULL_BATCH)
            for m in res["messages"]:
                props = m.get("properties") or {}
                rows.append(
                    {
                        "broker_name": name,
                        **with_body(m),
                        "origin_topic": props.get(PropertyKeys.RETRY_TOPIC, ""),
                        "origin_msg_id": props.get(PropertyKeys.ORIGIN_MESSAGE_ID, ""),
                    }
                )
            if int(res["next_begin_offset"]) <= offset:
                break
            offset = int(res["next_begin_offset"])
    if args.count is not None:
        rows = rows[: args.count]
    shown = [{**r, "body": body_text(_raw(r))} for r in rows]
    columns = [
        "broker_name",
        "queue_offset",
        "msg_id",
        "origin_topic",
        "reconsume_times",
        "store_timestamp",
        "body",
    ]
    return Output(shown, columns, data=rows)
