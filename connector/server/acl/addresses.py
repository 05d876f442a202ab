"""Remote address patterns of ACL white lists, as RocketMQ ACL 1.0 writes them.

- ``*`` (or ``*.*.*.*``): every address;
- ``192.168.0.7``: one address (IPv6 too);
- ``192.168.0.{1,2,7}``: a list in the last field;
- ``192.168.*.*``, ``192.168.1.1-100``: wildcards and ranges, per field;
- ``10.0.0.0/8``: a network (pymq's addition; IPv6 too);
- several patterns separated by commas outside braces.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable

from connector.errors import ConfigError

__all__ = ["AddressPattern", "parse_addresses"]

_FIELD = re.compile(r"^(\*|\d{1,3}|\d{1,3}-\d{1,3}|\{\d{1,3}(,\d{1,3})*\})$")


class AddressPattern:
    """Whether an address matches one white-list entry."""

    __slots__ = ("_match", "text")

    def __init__(self, text: str) -> None:
        self.text = text.strip()
        self._match = _compile(self.text)

    def matches(self, addr: str) -> bool:
        return self._match(addr)

    def __repr__(self) -> str:
        return f"AddressPattern({self.text!r})"


def parse_addresses(text: str | list[str] | None) -> list[AddressPattern]:
    """White-list entries from a YAML value: one string (comma-separated) or a list."""
    if text is None or text == "":
        return []
    items = text if isinstance(text, list) else _split(str(text))
    return [AddressPattern(str(item)) for item in items if str(item).strip()]


def _split(text: str) -> list[str]:
    """Split at commas outside braces."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return out


def _compile(text: str) -> Callable[[str], bool]:
    if text in ("*", "*.*.*.*"):
        return lambda _addr: True
    if "/" in text:
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ConfigError(f"white list entry {text!r} is not a network") from None
        return lambda addr: _in_network(addr, net)
    if ":" in text:
        try:
            one = ipaddress.ip_address(text)
        except ValueError:
            raise ConfigError(f"white list entry {text!r} is not an address") from None
        return lambda addr: _same(addr, one)
    fields = text.split(".")
    if len(fields) != 4 or not all(_FIELD.match(f) for f in fields):
        raise ConfigError(
            f"white list entry {text!r}: use *, an address, a.b.c.{{1,2}}, a.b.*.*, "
            "a.b.c.1-100 or a network a.b.c.d/n"
        )
    tests = [_field_test(f, text) for f in fields]

    def match(addr: str) -> bool:
        parts = _ipv4(addr)
        return parts is not None and all(t(p) for t, p in zip(tests, parts, strict=True))

    return match


def _field_test(field: str, text: str) -> Callable[[int], bool]:
    if field == "*":
        return lambda _v: True
    if field.startswith("{"):
        values = {int(v) for v in field[1:-1].split(",")}
        _check(values, text)
        return values.__contains__
    if "-" in field:
        lo, hi = (int(v) for v in field.split("-"))
        _check({lo, hi}, text)
        if lo > hi:
            raise ConfigError(f"white list entry {text!r}: range {field} is empty")
        return lambda v: lo <= v <= hi
    value = int(field)
    _check({value}, text)
    return lambda v: v == value


def _check(values: set[int], text: str) -> None:
    if any(v > 255 for v in values):
        raise ConfigError(f"white list entry {text!r}: a field is above 255")


def _ipv4(addr: str) -> list[int] | None:
    if addr.startswith("::ffff:"):
        addr = addr[7:]
    parts = addr.split(".")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    return [int(p) for p in parts]


def _in_network(addr: str, net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.version == net.version and ip in net


def _same(addr: str, one: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    try:
        return ipaddress.ip_address(addr) == one
    except ValueError:
        return False
