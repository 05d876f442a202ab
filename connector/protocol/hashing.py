"""Hash codes stored on disk: tag codes in the ConsumeQueue, key hashes in the index.

``tags_code`` is Java's ``String.hashCode`` (RocketMQ stores exactly that), so a
ConsumeQueue written by pymq filters the same way RocketMQ's does.
"""

from __future__ import annotations

import zlib
from functools import lru_cache

__all__ = ["key_hash", "parse_tags", "tags_code"]


@lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """Java ``String.hashCode`` of ``tags`` as a signed 64-bit value; 0 for no tags."""
    if not tags:
        return 0
    h = 0
    raw = tags.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def key_hash(key: str) -> int:
    """CRC-32 of an index key's UTF-8 bytes (``topic#key``), masked to 31 bits.

    Stable across processes; the broker's compiled scans compute the same value.
    """
    return zlib.crc32(key.encode("utf-8")) & 0x7FFFFFFF


def parse_tags(expression: str | None) -> frozenset[str] | None:
    """A subscription expression ``"A || B"`` -> {"A", "B"}; None, "" and "*" mean all."""
    if expression is None:
        return None
    tags = frozenset(t.strip() for t in expression.split("||") if t.strip())
    return None if not tags or "*" in tags else tags
