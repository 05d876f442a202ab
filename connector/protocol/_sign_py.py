"""The plain-Python twin of ``connector.protocol._sign`` (see its text): RocketMQ ACL 1.0's
remoting signature, used where the C module was not built, with ``PYMQ_KERNELS=python``,
and by the tests as the reference for the C one. It hashes through the hashlib objects
always (``states`` is checked, not used); ``keyed_states`` and ``compress`` are SHA-1's
compression in Python (FIPS 180-4), run once per account."""

from __future__ import annotations

import hmac
import struct
import time
from binascii import b2a_base64
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "SHANI",
    "Pending",
    "begin_signature",
    "compress",
    "keyed_states",
    "remoting_signature",
    "settle",
    "sign",
    "verify",
]

SHANI = 0  # no SHA instructions here
_UNSIGNED = ("Signature", "_UNIQUE_KEY_QUERY")
_IV = bytes.fromhex("67452301EFCDAB8998BADCFE10325476C3D2E1F0")
_MASK = 0xFFFFFFFF


def remoting_signature(
    ext: Mapping[str, str], body: bytes | memoryview, inner: Any, outer: Any, states: bytes
) -> str:
    """The Base64 of HMAC-SHA1 over ``ext``'s values in key order (but the two unsigned
    keys), then ``body``; ``inner`` / ``outer``: SHA-1 objects keyed ahead (copied)."""
    if not isinstance(ext, dict):
        raise TypeError("ext must be a dict")
    if not isinstance(states, bytes) or len(states) != 40:
        raise TypeError("states must be keyed_states' 40 bytes")
    values = []
    for key in sorted(ext):
        if not isinstance(key, str):
            raise TypeError("ext keys must be str")
        if key in _UNSIGNED:
            continue
        value = ext[key]
        if not isinstance(value, str):
            raise TypeError(f"ext value of {key!r} must be str")
        values.append(value)
    h = inner.copy()
    h.update("".join(values).encode())
    if len(body):
        h.update(body)
    o = outer.copy()
    o.update(h.digest())
    digest = o.digest()
    if len(digest) != 20:
        raise TypeError("inner and outer must be SHA-1 hash objects")
    return b2a_base64(digest, newline=False).decode()


def sign(
    inner: Any, outer: Any, states: bytes, access_key: str, instance: str | None,
    counter: Iterator[int] | None, ext: dict[str, str], body: bytes | memoryview,
) -> None:  # fmt: skip
    """A client's signing of one request: ``ext`` gets AccessKey, then (``instance`` not
    None) pymqSignTime (Unix ms now) and pymqSignSeq (``instance-n``, n the next of
    ``counter``), then Signature over them all and ``body``."""
    if not isinstance(access_key, str) or not isinstance(ext, dict):
        raise TypeError(
            "sign(inner, outer, states, access_key: str, instance, counter, ext: dict, body)"
        )
    ext["AccessKey"] = access_key
    if instance is not None:
        if not isinstance(instance, str):
            raise TypeError("instance must be a str or None")
        if not isinstance(counter, Iterator):
            raise TypeError("counter must be an iterator")
        n = next(counter, None)
        if n is None:
            raise ValueError("the request numbers ran out")
        ext["pymqSignTime"] = str(int(time.time() * 1000))
        ext["pymqSignSeq"] = f"{instance}-{n}"
    ext["Signature"] = remoting_signature(ext, body, inner, outer, states)


# settle's answers (connector/protocol/acl.py names them)
OK, MISMATCH, MALFORMED, EXPIRED, REPLAYED = range(5)


def _digits(text: str) -> int:
    """``text`` as a decimal of 1 to 18 ASCII digits, else -1."""
    if not 1 <= len(text) <= 18 or not text.isascii() or not text.isdigit():
        return -1
    return int(text)


def settle(
    ext: Mapping[str, str], expected: str, seqs: dict[str, tuple[int, int]], now_ms: int,
    window_ms: int,
) -> int:  # fmt: skip
    """The rest of a remoting check once the signature ``expected`` is known: ``ext``'s
    Signature must be it (compared in constant time); then, for a request numbered by
    pymq's clients (``pymqSignSeq`` = ``<instance>-<n>``, ``pymqSignTime`` = Unix ms),
    its time within ``window_ms`` of ``now_ms`` (-1: the clock now) and ``n`` above the
    last its instance sent, which ``seqs`` then records as ``(n, now_ms)``. OK (0), or
    why not: MISMATCH, MALFORMED, EXPIRED, REPLAYED."""
    if not isinstance(ext, dict) or not isinstance(expected, str):
        raise TypeError("settle(ext: dict, expected: str, seqs, now_ms, window_ms)")
    if not isinstance(seqs, dict):
        raise TypeError("seqs must be a dict")
    sent = ext.get("Signature")
    if not isinstance(sent, str) or not sent.isascii() or len(sent) != 28 or len(expected) != 28:
        return MISMATCH
    if not hmac.compare_digest(sent.encode(), expected.encode()):
        return MISMATCH
    seq = ext.get("pymqSignSeq")
    if seq is None:
        return OK  # not numbered (RocketMQ's clients)
    sent_time = ext.get("pymqSignTime")
    if not isinstance(seq, str) or not isinstance(sent_time, str):
        return MALFORMED
    instance, dash, n_text = seq.rpartition("-")
    n, sent_ms = _digits(n_text) if dash else -1, _digits(sent_time)
    if n < 0 or sent_ms < 0:
        return MALFORMED
    if now_ms < 0:
        now_ms = int(time.time() * 1000)
    if abs(now_ms - sent_ms) > window_ms:
        return EXPIRED
    last = seqs.get(instance)
    if last is not None and n <= last[0]:
        return REPLAYED
    seqs[instance] = (n, now_ms)
    return OK


def verify(
    inner: Any, outer: Any, states: bytes, ext: Mapping[str, str], body: bytes | memoryview,
    seqs: dict[str, tuple[int, int]], now_ms: int, window_ms: int,
) -> int:  # fmt: skip
    """``settle`` with the signature made here (the keys first: a partial of them checks
    one account's requests)."""
    return settle(ext, remoting_signature(ext, body, inner, outer, states), seqs, now_ms, window_ms)


class Pending:
    """A signature already computed (the C module's is hashed on its worker thread)."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    def result(self) -> str:
        return self._text


def begin_signature(
    ext: Mapping[str, str], body: bytes | memoryview, inner: Any, outer: Any, states: bytes
) -> Pending:
    """``remoting_signature``'s result to collect later (here: computed now)."""
    return Pending(remoting_signature(ext, body, inner, outer, states))


def keyed_states(key_block: bytes) -> bytes:
    """SHA-1's states after the 64-byte key block XOR ipad, then XOR opad (RFC 2104)."""
    if not isinstance(key_block, bytes) or len(key_block) != 64:
        raise TypeError("keyed_states(key_block): 64 bytes")
    return b"".join(compress(_IV, bytes(b ^ pad for b in key_block), False) for pad in (0x36, 0x5C))


def _rol(x: int, n: int) -> int:
    return ((x << n) | (x >> (32 - n))) & _MASK


def compress(state: bytes, blocks: bytes, shani: bool) -> bytes:
    """SHA-1's compression of whole 64-byte blocks from a 20-byte state (``shani``: the
    C module's choice of instructions; the same result here)."""
    if not isinstance(state, bytes) or len(state) != 20 or len(blocks) % 64:
        raise TypeError("compress(state: 20 bytes, blocks: 64*n bytes, shani)")
    h = list(struct.unpack(">5I", state))
    for start in range(0, len(blocks), 64):
        w = list(struct.unpack_from(">16I", blocks, start))
        for t in range(16, 80):
            w.append(_rol(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1))
        a, b, c, d, e = h
        for t in range(80):
            if t < 20:
                f, k = (b & c) | (~b & d), 0x5A827999
            elif t < 40:
                f, k = b ^ c ^ d, 0x6ED9EBA1
            elif t < 60:
                f, k = (b & c) | (b & d) | (c & d), 0x8F1BBCDC
            else:
                f, k = b ^ c ^ d, 0xCA62C1D6
            a, b, c, d, e = (_rol(a, 5) + f + e + k + w[t]) & _MASK, a, _rol(b, 30), c, d
        h = [(x + y) & _MASK for x, y in zip(h, (a, b, c, d, e), strict=True)]
    return struct.pack(">5I", *h)
