"""Settings from four layers: flags > ``PYMQ_*`` environment > TOML file > defaults.

Every setting is a field of a frozen dataclass (its default lives there) and
has one snake_case key, usable in the TOML file and as the environment
variable ``PYMQ_<KEY_IN_UPPER_CASE>``. Values from the environment arrive as
strings and are converted to the field's type here, once, so a bad value is
a ``ConfigError`` naming the key, never a crash deep inside a server.
Only entry points (CLIs) read ``os.environ``; they pass it in.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from connector.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "ENV_PREFIX",
    "HTTP_PORT_OFFSET",
    "check_acl_settings",
    "check_limits",
    "check_tls_settings",
    "convert",
    "http_port_for",
    "load_settings",
    "read_toml",
    "settings_keys",
]

HTTP_PORT_OFFSET = 4  # a server's REST port by default: its remoting port + 4 (9880, 10915)


def http_port_for(port: int, http_port: int | None) -> int:
    """``http_port`` if set, else ``port`` + 4; both free (0) with port 0."""
    if http_port is not None:
        return http_port
    return 0 if port == 0 else port + HTTP_PORT_OFFSET


def check_tls_settings(cert_file: Path | str | None, key_file: Path | str | None) -> None:
    """TLS needs both: a certificate without its key (or the reverse) is a ConfigError."""
    if bool(cert_file) != bool(key_file):
        raise ConfigError("tls_cert_file and tls_key_file go together: set both or neither")


def check_limits(max_frame_bytes: int, max_connections_per_address: int) -> None:
    if not 1024 <= max_frame_bytes <= 1 << 30:
        raise ConfigError("max_frame_bytes must be in 1024..1073741824")
    if max_connections_per_address < 0:
        raise ConfigError("max_connections_per_address must be >= 0 (0: no limit)")


def check_acl_settings(acl_enable: bool, acl_file: Path | str | None) -> None:
    """ACL needs its file: ``acl_enable`` without ``acl_file`` is a ConfigError."""
    if acl_enable and not acl_file:
        raise ConfigError("acl_enable needs acl_file (the path of a plain_acl.yml)")


ENV_PREFIX = "PYMQ_"
T = TypeVar("T")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def read_toml(path: Path) -> dict[str, Any]:
    """A TOML file as a flat dict; a ``[section]`` table is merged into the top level."""
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    flat: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(value, dict):
            flat.update(value)
        else:
            flat[key] = value
    return flat


def _field_types(classes: tuple[type[Any], ...]) -> dict[str, Any]:
    types_: dict[str, Any] = {}
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.init and not f.name.startswith("_") and f.name != "extra":
                types_.setdefault(f.name, hints[f.name])
    return types_


def settings_keys(*classes: type[Any]) -> list[str]:
    """Every key the given settings classes accept."""
    return sorted(_field_types(classes))


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return tp, False


def convert(key: str, value: Any, tp: Any) -> Any:
    """``value`` (from TOML, the environment or a flag) as type ``tp``, or ConfigError."""
    tp, optional = _unwrap_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{key} must not be empty")
    text = value.strip() if isinstance(value, str) else None
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            if text is not None and text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            raise ValueError
        if tp is int:
            if isinstance(value, bool):
                raise ValueError
            return int(text.replace("_", "")) if text is not None else int(value)
        if tp is float:
            if isinstance(value, bool):
                raise ValueError
            return float(text) if text is not None else float(value)
        if tp is Path:
            return Path(value)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            wanted = str(value).strip().upper()
            for member in tp:
                if wanted in (member.name.upper(), str(member.value).upper()):
                    return member
            # a short form: "sync" for SYNC_FLUSH, when it names one member only
            short = [m for m in tp if m.name.upper().split("_")[0] == wanted]
            if len(short) == 1:
                return short[0]
            raise ValueError
        if tp is str:
            if not isinstance(value, str):
                raise ValueError
            return value
        if typing.get_origin(tp) in (list, tuple) and isinstance(value, (list, tuple, str)):
            items = value.split(";") if isinstance(value, str) else list(value)
            return [str(i).strip() for i in items if str(i).strip()]
    except (TypeError, ValueError):
        pass
    else:
        return value
    raise ConfigError(f"bad value for {key}: {value!r} (expected {getattr(tp, '__name__', tp)})")


def load_settings(
    cls: type[T],
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
    extra_classes: tuple[type[Any], ...] = (),
) -> T:
    """Build ``cls`` from defaults < TOML file < ``PYMQ_*`` environment < flags.

    ``flags`` holds only what the user typed (None values are ignored).
    Keys of ``extra_classes`` (e.g. the store's settings inside a broker's
    file) are accepted and collected into ``cls``'s ``extra`` field.
    """
    known = _field_types((cls, *extra_classes))
    values: dict[str, Any] = {}
    if config_file is not None:
        for key, value in read_toml(config_file).items():
            if key not in known:
                raise ConfigError(f"config file {config_file}: unknown setting {key!r}")
            values[key] = convert(key, value, known[key])
    for env_key, value in (environ or {}).items():
        if env_key.startswith(ENV_PREFIX):
            key = env_key[len(ENV_PREFIX) :].lower()
            if key in known:
                values[key] = convert(env_key, value, known[key])
    for key, value in (flags or {}).items():
        if value is not None:
            if key not in known:
                raise ConfigError(f"unknown setting {key!r}")
            values[key] = convert(key, value, known[key])
    own = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = {k: v for k, v in values.items() if k in own}
    extra = {k: v for k, v in values.items() if k not in own}
    if extra:
        kwargs["extra"] = extra
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
