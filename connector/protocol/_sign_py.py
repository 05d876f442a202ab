"""The plain-Python twin of ``connector.protocol._sign`` (see its text): RocketMQ ACL 1.0's
remoting signature, used where the C module was not built, with ``PYMQ_KERNELS=python``,
and by the tests as the reference for the C one."""

from __future__ import annotations

from binascii import b2a_base64
from collections.abc import Mapping
from typing import Any

__all__ = ["remoting_signature"]

_UNSIGNED = ("Signature", "_UNIQUE_KEY_QUERY")


def remoting_signature(
    ext: Mapping[str, str], body: bytes | memoryview, inner: Any, outer: Any
) -> str:
    """The Base64 of HMAC-SHA1 over ``ext``'s values in key order (but the two unsigned
    keys), then ``body``; ``inner`` / ``outer``: SHA-1 objects keyed ahead (copied)."""
    if not isinstance(ext, dict):
        raise TypeError("ext must be a dict")
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
