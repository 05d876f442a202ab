"""How ``pymq admin`` shows times and bodies, and reads times (pure: a fixed clock)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from connector.client.admin_format import (
    body_text,
    format_age,
    format_time,
    parse_time,
    table,
)

NOW = 1_795_805_545_128  # some epoch ms


@pytest.mark.parametrize(
    ("delta_ms", "text"),
    [
        (0, "0 s ago"),
        (3_400, "3 s ago"),
        (119_000, "119 s ago"),
        (5 * 60_000, "5 min ago"),
        (3 * 3_600_000, "3 h ago"),
        (4 * 86_400_000, "4 d ago"),
        (-10_000, "in 10 s"),
    ],
)
def test_age(delta_ms: int, text: str) -> None:
    assert format_age(delta_ms) == text


def test_a_time_is_a_local_date_time_and_its_age() -> None:
    local = datetime.fromtimestamp((NOW - 3_000) / 1000).strftime("%Y-%m-%d %H:%M:%S")
    assert format_time(NOW - 3_000, NOW) == f"{local} (3 s ago)"
    assert format_time(0, NOW) == "never"
    assert format_time(None, NOW) == "never"


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("now", NOW),
        ("NOW", NOW),
        ("1795805545128", 1795805545128),
        ("0", 0),
        ("2026-11-27T18:40:02Z", 1795804802000),
        ("2026-11-27T18:40:02+00:00", 1795804802000),
        ("2026-11-27T19:40:02+01:00", 1795804802000),
        ("2026-11-27 18:40:02", int(datetime(2026, 11, 27, 18, 40, 2).timestamp() * 1000)),
        ("2026-11-27", int(datetime(2026, 11, 27).timestamp() * 1000)),
    ],
)
def test_parse_time(text: str, ms: int) -> None:
    assert parse_time(text, NOW) == ms


@pytest.mark.parametrize("text", ["yesterday", "", "12:00", "-5", "2026-13-01"])
def test_a_bad_time_names_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match="ISO date-time"):
        parse_time(text, NOW)


def test_utc_offsets_agree() -> None:
    when = datetime(2026, 11, 27, 18, 40, 2, tzinfo=timezone.utc)
    assert parse_time(when.isoformat(), NOW) == int(when.timestamp() * 1000)


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b"hello", "hello"),
        ("héllo ✓".encode(), "héllo ✓"),
        (b"two\nlines\t", "two\nlines\t"),
        (b"\xff\xfe", "base64://4="),
        (b"\x00\x01", "base64:AAE="),
        (b"", ""),
    ],
)
def test_a_body_is_text_when_it_is_utf8_text(body: bytes, shown: str) -> None:
    assert body_text(body) == shown


def test_a_table_shows_times_readable_and_one_row_a_line() -> None:
    rows = [
        {"topic": "T", "last_update_timestamp": NOW - 5_000, "body": "a\nb"},
        {"topic": "Longer", "last_update_timestamp": 0, "body": "c"},
    ]
    out = table(rows, ["topic", "last_update_timestamp", "body"], now=NOW).splitlines()
    assert out[0].split() == ["TOPIC", "LAST_UPDATE_TIMESTAMP", "BODY"]
    assert "(5 s ago)" in out[1] and out[1].endswith("a\\nb")
    assert "never" in out[2]
    assert len(out) == 3


def test_a_time_column_in_ms_loses_its_suffix_in_the_header() -> None:
    out = table([{"last_heartbeat_ms": NOW}], ["last_heartbeat_ms"], now=NOW)
    assert out.splitlines()[0] == "LAST_HEARTBEAT"
