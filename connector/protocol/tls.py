"""TLS contexts for both sides (``ssl`` only): what a server presents, what a client trusts.

A server with ``tls_cert_file`` / ``tls_key_file`` serves TLS on its remoting
and REST listeners; a client with ``tls=True`` verifies the server's
certificate against ``tls_ca_file`` (or the system's CAs) and its name or IP
address. Errors are ``ConfigError`` with one line saying which file and why.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from connector.errors import ConfigError

__all__ = ["client_context", "server_context", "tls_settings"]


def tls_settings(tls: bool, ca_file: str | Path | None) -> bool:
    """A client's ``tls`` / ``tls_ca_file``: a CA file without ``tls=True`` is refused
    (it would be ignored, and the connection made in the clear)."""
    if ca_file and not tls:
        raise ConfigError("tls_ca_file is set but tls is not: set tls=True too")
    return tls


def server_context(cert_file: str | Path, key_file: str | Path) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(str(cert_file), str(key_file))
    except FileNotFoundError as exc:
        raise ConfigError(f"TLS: {exc.filename or cert_file} does not exist") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"TLS: cannot use certificate {cert_file} with key {key_file}: {_reason(exc)}"
        ) from None
    return ctx


def client_context(ca_file: str | Path | None = None) -> ssl.SSLContext:
    """Verifies the server against ``ca_file`` (PEM), else the system's CAs."""
    try:
        ctx = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except FileNotFoundError:
        raise ConfigError(f"TLS: CA file {ca_file} does not exist") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"TLS: cannot read CA file {ca_file}: {_reason(exc)}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
    return str(reason).replace("_", " ").lower()
