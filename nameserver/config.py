"""NameServer settings: one frozen dataclass, defaults in one place (RocketMQ's values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connector.errors import ConfigError
from connector.server.settings import (
    check_acl_settings,
    check_limits,
    check_tls_settings,
    http_port_for,
)

__all__ = ["DEFAULT_DATA_DIR", "KV_CONFIG_FILE", "LOG_LEVELS", "NamesrvConfig"]

DEFAULT_DATA_DIR = Path("~/.pymq/namesrv")
KV_CONFIG_FILE = "kvConfig.json"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


@dataclass(frozen=True, kw_only=True)
class NamesrvConfig:
    """Everything a NameServer needs; times carry their unit in the name.

    - ``host`` / ``port``: where the remoting service (RocketMQ's protocol) listens
      (default 127.0.0.1:9876; port 0 picks a free port).
    - ``http_port``: the REST API's port (default ``port`` + 4, 9880; free with port 0).
    - ``data_dir``: holds ``kvConfig.json``; None means ``~/.pymq/namesrv``.
    - ``scan_not_active_broker_interval_ms``: how often expired brokers are
      looked for (10 000 ms, RocketMQ 4's value).
    - ``broker_channel_expired_time_ms``: a broker silent this long is removed
      from every table (120 000 ms).
    - ``acl_enable`` / ``acl_file``: check every request against RocketMQ ACL 1.0's
      ``plain_acl.yml`` (reloaded when it changes); brokers then register signed.
    - ``tls_cert_file`` / ``tls_key_file``: both listeners serve TLS (PEM files).
    - ``max_frame_bytes``: the largest remoting frame and REST body (16 MiB);
      ``max_connections_per_address``: connections from one address, per listener (1000; 0:
      no limit).
    - ``log_level``: one of critical, error, warning, info, debug, trace.
    - ``extra``: settings this class does not know (kept, never rejected).
    """

    host: str = "127.0.0.1"
    port: int = 9876
    http_port: int | None = None
    data_dir: Path | None = None
    scan_not_active_broker_interval_ms: int = 10_000
    broker_channel_expired_time_ms: int = 120_000
    acl_enable: bool = False
    acl_file: Path | None = None
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    max_frame_bytes: int = 16 << 20
    max_connections_per_address: int = 1000
    log_level: str = "warning"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", Path(self.data_dir).expanduser())
        if not self.host:
            raise ConfigError("host must not be empty")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port {self.port} is out of range 0..65535")
        if self.http_port is not None and not 0 <= self.http_port <= 65535:
            raise ConfigError(f"http_port {self.http_port} is out of range 0..65535")
        for name in ("scan_not_active_broker_interval_ms", "broker_channel_expired_time_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")
        check_acl_settings(self.acl_enable, self.acl_file)
        check_tls_settings(self.tls_cert_file, self.tls_key_file)
        check_limits(self.max_frame_bytes, self.max_connections_per_address)
        if self.acl_file is not None:
            object.__setattr__(self, "acl_file", Path(self.acl_file).expanduser())
        level = self.log_level.lower()
        if level not in LOG_LEVELS:
            raise ConfigError(f"log_level {self.log_level!r} is not one of {', '.join(LOG_LEVELS)}")
        object.__setattr__(self, "log_level", level)

    @property
    def resolved_http_port(self) -> int:
        """``http_port``, else ``port`` + 4 (0 with port 0: both free)."""
        return http_port_for(self.port, self.http_port)

    @property
    def resolved_data_dir(self) -> Path:
        """``data_dir``, or ``~/.pymq/namesrv`` when it is unset."""
        return self.data_dir if self.data_dir is not None else DEFAULT_DATA_DIR.expanduser()

    @property
    def kv_config_path(self) -> Path:
        """The KV config file: ``<data dir>/kvConfig.json``."""
        return self.resolved_data_dir / KV_CONFIG_FILE
