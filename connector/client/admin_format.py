"""How ``pymq admin`` shows things: tables, times, bodies; and how it reads times.

Pure functions (the clock is a parameter) so the rules are unit-tested without a
cluster. Tables show times as local date-times with their age
(``2026-11-27 18:40:02 (3 s ago)``, ``never`` for 0) and bodies as text when they
are UTF-8 (base64 otherwise); ``--json`` keeps epoch milliseconds and base64.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "TIME_COLUMNS",
    "Output",
    "body_text",
    "format_age",
    "format_time",
    "is_text",
    "key_values",
    "now_ms",
    "parse_time",
    "table",
    "with_body",
]

# the columns (and message fields) that hold epoch milliseconds
TIME_COLUMNS = frozenset(
    {
        "born_timestamp",
        "store_timestamp",
        "last_update_timestamp",
        "last_timestamp",
        "last_heartbeat_ms",
        "started_ms",
        "last_update_ms",
    }
)


def now_ms() -> int:
    return int(time.time() * 1000)


def format_age(delta_ms: int) -> str:
    """``3 s ago``, ``5 min ago``, ``2 h ago``, ``4 d ago`` (``in ...`` for the future)."""
    seconds = abs(delta_ms) // 1000
    if seconds < 120:
        text = f"{seconds} s"
    elif seconds < 120 * 60:
        text = f"{seconds // 60} min"
    elif seconds < 48 * 3600:
        text = f"{seconds // 3600} h"
    else:
        text = f"{seconds // 86400} d"
    return f"in {text}" if delta_ms < 0 else f"{text} ago"


def format_time(ms: int | None, now: int | None = None) -> str:
    """Epoch ms as a local date-time and its age; ``never`` for 0 (or none)."""
    if not ms or ms <= 0:
        return "never"
    now = now_ms() if now is None else now
    stamp = datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")
    return f"{stamp} ({format_age(now - ms)})"


def parse_time(text: str, now: int | None = None) -> int:
    """``now``, epoch ms (``1795805545128``) or an ISO date-time (``2026-11-27T18:40:02``,
    ``2026-11-27 18:40``, ``2026-11-27``; local time unless it names its offset, ``Z``
    too) as epoch ms. ValueError with the accepted forms otherwise."""
    raw = text.strip()
    if raw.lower() == "now":
        return now_ms() if now is None else now
    if raw.isdigit():
        return int(raw)
    try:
        when = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise ValueError(
            f"{text!r} is not a time: give now, an ISO date-time (2026-11-27T18:40:02) "
            "or epoch milliseconds"
        ) from None
    return int(when.timestamp() * 1000)  # a naive date-time is local time


_TEXT_CONTROLS = frozenset("\t\n\r")


def is_text(body: bytes) -> bool:
    """UTF-8 without control characters but tabs and line ends."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not any((ord(c) < 32 or 127 <= ord(c) < 160) and c not in _TEXT_CONTROLS for c in text)


def body_text(body: bytes) -> str:
    """The body as text when it is UTF-8 text, else ``base64:`` and its base64."""
    if is_text(body):
        return body.decode("utf-8")
    return "base64:" + base64.b64encode(body).decode("ascii")


def _cell(column: str, value: Any, now: int) -> str:
    if value is None:
        return ""
    if column in TIME_COLUMNS and isinstance(value, int) and not isinstance(value, bool):
        return format_time(value, now)
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    # one row a line: a line break inside a value is shown as \n
    return str(value).replace("\r", "\\r").replace("\n", "\\n")


def _header(column: str) -> str:
    name = column.removesuffix("_ms") if column in TIME_COLUMNS else column
    return name.upper()


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], now: int | None = None) -> str:
    """A plain text table; ``columns`` picks and orders the keys; times readable."""
    now = now_ms() if now is None else now
    cells = [[_cell(c, r.get(c), now) for c in columns] for r in rows]
    heads = [_header(c) for c in columns]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(heads)]
    out = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True)).rstrip()]
    for row in cells:
        out.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(out)


@dataclass(frozen=True, slots=True)
class Output:
    """What an admin command prints: ``rows`` as a table of ``columns``, or ``data``
    as JSON with ``--json`` (the rows themselves unless the two differ)."""

    rows: Sequence[Mapping[str, Any]]
    columns: Sequence[str]
    data: Any = None
    footer: str = ""  # a line under the table (not in --json)

    @property
    def json_data(self) -> Any:
        return self.rows if self.data is None else self.data


def key_values(record: Mapping[str, Any], now: int | None = None) -> list[dict[str, Any]]:
    """A record as KEY / VALUE rows: times readable, nested values as JSON."""
    now = now_ms() if now is None else now
    rows = []
    for k, v in record.items():
        shown = v
        if k in TIME_COLUMNS and isinstance(v, int):
            shown = format_time(v, now)
        elif isinstance(v, (dict, list)):
            shown = json.dumps(v)
        rows.append({"key": k, "value": shown})
    return rows


def with_body(message: Mapping[str, Any]) -> dict[str, Any]:
    """A message from the REST API (``body_base64``) with ``body`` as text when it is
    UTF-8 text (None otherwise), for people and ``--json`` alike."""
    raw = base64.b64decode(message.get("body_base64") or "")
    return {**message, "body": raw.decode("utf-8") if is_text(raw) else None}
