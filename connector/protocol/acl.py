"""Request signatures, both edges: RocketMQ ACL 1.0's for remoting, pymq's for REST.

Remoting (what RocketMQ's clients in every language send): a signed request
carries the ext fields ``AccessKey`` and ``Signature``, the Base64 of
HMAC-SHA1(secretKey, the values of every other ext field in key order,
concatenated, then the body bytes). Java, C++ and JavaScript clients sign
their header's fields plus ``AccessKey`` (and ``OnsChannel``); the server
checks over the ext fields it received, which are the same. RocketMQ's
signature has no time in it, so a captured request could be sent again;
pymq's own clients add two signed ext fields that close this:
``pymqSignTime`` (Unix ms, accepted within ``REST_WINDOW_MS``) and
``pymqSignSeq`` (``<client instance>-<n>``, n rising on every request the
instance sends; a server refuses an n it has seen rise past).

REST (pymq's design, documented in the OpenAPI of both servers): four
headers. ``X-Pymq-Access-Key``; ``X-Pymq-Timestamp``, Unix milliseconds;
``X-Pymq-Nonce``, 8 to 64 characters the client never repeats within the
window; ``X-Pymq-Signature``, the Base64 of HMAC-SHA256(secretKey,
``rest_string_to_sign``): method, path and query as sent, timestamp,
nonce and the body's SHA-256, one per line. A server accepts a timestamp
within ``REST_WINDOW_MS`` of its clock and a nonce once in that window, so a
captured request cannot be sent again.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import itertools
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from types import ModuleType
from typing import Any, Protocol

import orjson

from connector.errors import ConfigError

__all__ = [
    "ACCESS_KEY",
    "CHECK_EXPIRED",
    "CHECK_MALFORMED",
    "CHECK_MISMATCH",
    "CHECK_OK",
    "CHECK_REPLAYED",
    "REST_ACCESS_KEY",
    "REST_NONCE",
    "REST_SIGNATURE",
    "REST_TIMESTAMP",
    "REST_WINDOW_MS",
    "SIGNATURE",
    "SIGN_SEQ",
    "SIGN_TIME",
    "Credentials",
    "RemotingSigner",
    "SignSequence",
    "document_signature",
    "remoting_signer",
    "rest_headers",
    "rest_signature",
    "rest_string_to_sign",
    "settle_remoting",
    "sign_document",
    "sign_remoting",
    "signed_content",
]

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
# RocketMQ's broker leaves this one out of the signed content too (set after signing)
_UNIQUE_QUERY = "_UNIQUE_KEY_QUERY"

SIGN_TIME = "pymqSignTime"
SIGN_SEQ = "pymqSignSeq"

_SHA1_BLOCK = 64

# what a server's check of a signed remoting request finds (RemotingSigner.verify)
CHECK_OK = 0
CHECK_MISMATCH = 1  # the signature is not the account's
CHECK_MALFORMED = 2  # pymqSignSeq / pymqSignTime do not parse
CHECK_EXPIRED = 3  # signed outside the window of the server's clock
CHECK_REPLAYED = 4  # numbered at or below what its client instance sent before

REST_ACCESS_KEY = "X-Pymq-Access-Key"
REST_TIMESTAMP = "X-Pymq-Timestamp"
REST_NONCE = "X-Pymq-Nonce"
REST_SIGNATURE = "X-Pymq-Signature"
REST_WINDOW_MS = 300_000  # a signed REST request is good for 5 minutes either side


_SIGNERS: dict[tuple[str, str], RemotingSigner] = {}


@dataclass(frozen=True, slots=True)
class Credentials:
    """An account's keys. The secret never appears in ``repr`` (nor in logs)."""

    access_key: str
    secret_key: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ConfigError("access_key and secret_key must both be set (or neither)")

    @property
    def signer(self) -> RemotingSigner:
        # keyed by a plain tuple: the dataclass's own __hash__ is a Python call, on
        # every signed request
        key = (self.access_key, self.secret_key)
        signer: RemotingSigner | None = _SIGNERS.get(key)
        if signer is None:
            signer = _SIGNERS[key] = RemotingSigner(self.secret_key)
        return signer

    @classmethod
    def of(cls, access_key: str | None, secret_key: str | None) -> Credentials | None:
        """Both keys, or None when neither is given; one without the other is an error."""
        if not access_key and not secret_key:
            return None
        return cls(access_key or "", secret_key or "")


def signed_content(ext: Mapping[str, str], body: bytes | memoryview) -> bytes:
    """What a remoting signature covers: every ext value but the signature's own, in key
    order, then the body."""
    return _values(ext) + bytes(body)


def _values(ext: Mapping[str, str]) -> bytes:
    keys = sorted(ext)
    if SIGNATURE in ext:
        keys.remove(SIGNATURE)
    if _UNIQUE_QUERY in ext:
        keys.remove(_UNIQUE_QUERY)
    if len(keys) < 2:  # itemgetter of one key gives the value, not a tuple
        return "".join([ext[k] for k in keys]).encode()
    return "".join(itemgetter(*keys)(ext)).encode()


class RemotingSigner:
    """One account's remoting signatures, its HMAC key prepared once: HMAC-SHA1 done with
    the inner and outer hash states keyed ahead (RFC 2104), so a request costs two copies
    of a hash state and the hashing of its content, the body not copied. The steps run
    in one C call (``connector.protocol._sign``, or its plain-Python twin where it was
    not built), on every signed request at both edges; the keyed states are kept both
    as hashlib objects and as raw SHA-1 states (``_sign`` hashes a small request
    itself, a large body through hashlib)."""

    __slots__ = ("_begin", "_inner", "_outer", "_states", "verify")

    def __init__(self, secret_key: str) -> None:
        key = secret_key.encode()
        if len(key) > _SHA1_BLOCK:
            key = hashlib.sha1(key).digest()
        key = key.ljust(_SHA1_BLOCK, b"\0")
        self._inner = hashlib.sha1(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha1(bytes(b ^ 0x5C for b in key))
        kernel = _kernel()
        self._begin = kernel.begin_signature
        self._states: bytes = kernel.keyed_states(key)
        # verify(ext, body, seqs, now_ms, window_ms) -> CHECK_*: a server's whole check
        # of a signed request in one compiled call (a partial: no Python frame): the
        # signature made and compared, then ``settle_remoting``'s numbering
        self.verify: Callable[..., int] = functools.partial(
            kernel.verify, self._inner, self._outer, self._states
        )

    def signing(
        self, access_key: str, instance: str | None, counter: Iterator[int] | None
    ) -> Callable[..., None]:
        """``sign(ext, body)`` for ``access_key``'s requests (numbered ``instance-n``, n
        from ``counter``, when ``instance`` is given): see ``remoting_signer``."""
        sign: Callable[..., None] = _kernel().sign
        return functools.partial(sign, self._inner, self._outer, self._states, access_key,
                                 instance, counter)  # fmt: skip

    def begin(self, ext: dict[str, str], body: bytes | memoryview) -> PendingSignature:
        """The signature of ``ext`` and ``body``, the body hashed on the compiled module's
        worker thread while the caller goes on (the GIL is not needed there):
        ``result()`` waits for it. Worth it for a large body only (a thread hand-over
        costs ~20-30 us here)."""
        begin: Callable[..., PendingSignature] = self._begin
        return begin(ext, body, self._inner, self._outer, self._states)


def settle_remoting(
    ext: dict[str, str], expected: str, seqs: dict[str, tuple[int, int]], now_ms: int = -1
) -> int:
    """A server's check of a signed remoting request once its signature ``expected`` is
    known: ``ext``'s Signature must be it; then, for a request numbered by pymq's
    clients, ``SIGN_TIME`` within ``REST_WINDOW_MS`` of ``now_ms`` (-1: the clock now)
    and ``SIGN_SEQ``'s number above the last its client instance sent, kept in
    ``seqs`` (instance -> (n, now_ms)). CHECK_OK, or why not."""
    settle: Callable[..., int] = _kernel().settle
    return settle(ext, expected, seqs, now_ms, REST_WINDOW_MS)


class PendingSignature(Protocol):
    """A signature being hashed (``RemotingSigner.begin``)."""

    def result(self) -> str: ...


_KERNEL: list[ModuleType] = []


def _kernel() -> ModuleType:
    """The compiled signature, else its twin (loaded on first use: importing pymq loads
    no kernels)."""
    if not _KERNEL:
        from connector.protocol.native import load  # noqa: PLC0415

        _KERNEL.append(load("connector.protocol._sign", "connector.protocol._sign_py",
                            configure=False))  # fmt: skip
    return _KERNEL[0]


class SignSequence:
    """One client instance's request numbers (taken in the order requests go out on
    each connection: a server refuses one lower than it has seen)."""

    def __init__(self) -> None:
        self.instance = secrets.token_hex(8)
        self.counter = itertools.count(1)


def remoting_signer(creds: Credentials, seq: SignSequence | None = None) -> Callable[..., None]:
    """``sign(ext, body)``: signs one request as ``sign_remoting`` does, in one compiled
    call (a partial: no Python frame; a connection keeps one for every request)."""
    if seq is None:
        return creds.signer.signing(creds.access_key, None, None)
    return creds.signer.signing(creds.access_key, seq.instance, seq.counter)


def sign_remoting(
    ext: dict[str, str],
    body: bytes | memoryview,
    creds: Credentials,
    seq: SignSequence | None = None,
) -> None:
    """Add ``AccessKey`` and ``Signature`` to a request's ext fields (and, with ``seq``,
    the time and request number that make a replay detectable: ``SIGN_TIME``, Unix ms,
    and ``SIGN_SEQ``, ``<instance>-<n>``)."""
    remoting_signer(creds, seq)(ext, body)


def sign_document(doc: dict[str, Any], creds: Credentials) -> None:
    """Sign a JSON handshake (a slave's HELLO to its master's HA port): adds
    ``access_key``, ``signed_at`` (Unix ms), ``nonce`` and ``signature``, the Base64 of
    HMAC-SHA256(secretKey, the document without ``signature`` as sorted-key JSON)."""
    doc.pop("signature", None)
    doc.update(
        access_key=creds.access_key,
        signed_at=int(time.time() * 1000),
        nonce=secrets.token_urlsafe(12),
    )
    doc["signature"] = document_signature(creds.secret_key, doc)


def document_signature(secret_key: str, doc: Mapping[str, Any]) -> str:
    content = orjson.dumps({k: v for k, v in doc.items() if k != "signature"},
                           option=orjson.OPT_SORT_KEYS)  # fmt: skip
    return rest_signature(secret_key, content)


def rest_string_to_sign(
    method: str, target: str, timestamp: str, nonce: str, body: bytes | memoryview
) -> bytes:
    """``target`` is the path and query as sent (``/topics/T/messages?x=1``)."""
    digest = hashlib.sha256(body).hexdigest()
    return "\n".join((method.upper(), target, timestamp, nonce, digest)).encode()


def rest_signature(secret_key: str, string_to_sign: bytes) -> str:
    digest = hmac.new(secret_key.encode(), string_to_sign, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


def rest_headers(
    creds: Credentials, method: str, target: str, body: bytes | memoryview = b""
) -> dict[str, str]:
    """The four headers that sign one REST request, made now."""
    timestamp = str(int(time.time() * 1000))
    nonce = secrets.token_urlsafe(12)
    text = rest_string_to_sign(method, target, timestamp, nonce, body)
    return {
        REST_ACCESS_KEY: creds.access_key,
        REST_TIMESTAMP: timestamp,
        REST_NONCE: nonce,
        REST_SIGNATURE: rest_signature(creds.secret_key, text),
    }
