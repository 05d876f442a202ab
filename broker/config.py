"""Broker settings: one frozen dataclass, RocketMQ's defaults, units in the names.

Store settings (``flush_disk_type``, ``mapped_file_size_commit_log``, ...)
sit in the same TOML file and environment; they arrive in ``extra`` and are
turned into a ``StoreConfig`` by ``store_config()``.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.store.config import StoreConfig
from connector.errors import ConfigError
from connector.protocol.acl import Credentials
from connector.server.settings import (
    check_acl_settings,
    check_tls_settings,
    http_port_for,
)

__all__ = ["DEFAULT_DELAY_LEVELS", "BrokerConfig", "BrokerRole", "parse_delay_levels"]

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)(ms|s|m|h|d)$")
MAX_BUSY_POLL_US = 100_000
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,127}$")


def _is_ipv4(host: str) -> bool:
    try:
        socket.inet_aton(host)
    except OSError:
        return False
    return host.count(".") == 3


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``"1s 5s 10s ..."`` -> delay of each level in ms (level 1 first)."""
    out = []
    for item in text.split():
        m = _LEVEL.match(item)
        if not m:
            raise ConfigError(
                f"message_delay_level: bad level {item!r} (use e.g. 500ms, 5s, 1m, 2h)"
            )
        out.append(int(m.group(1)) * _UNIT_MS[m.group(2)])
    if not out:
        raise ConfigError("message_delay_level must list at least one level")
    return tuple(out)


class BrokerRole(str, enum.Enum):
    """RocketMQ's roles: a master (id 0) answers a send once it is stored
    (ASYNC_MASTER) or once every in-sync slave has it too (SYNC_MASTER); a SLAVE
    (id > 0) replicates its master's CommitLog and refuses writes."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"

    @property
    def is_master(self) -> bool:
        return self is not BrokerRole.SLAVE


def _is_host_port(addr: str) -> bool:
    host, sep, port = addr.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536)


@dataclass(frozen=True, kw_only=True)
class BrokerConfig:
    """Everything a broker process needs besides its store's own settings."""

    broker_name: str = "broker-a"
    broker_cluster_name: str = "DefaultCluster"
    broker_id: int = 0
    host: str = "127.0.0.1"
    port: int = 10911  # remoting (RocketMQ's protocol)
    http_port: int | None = None  # the REST API; default port + 4 (free with port 0)
    namesrv: str | None = None  # "h:p;h:p", remoting addresses
    # the "host:port" clients are told (routes, msgIds) when it is not the bind address:
    # behind NAT, in a container, or behind a proxy (RocketMQ's brokerIP1)
    advertised_addr: str | None = None
    store_dir: Path | None = None  # default ~/.pymq/store/<broker_name>
    broker_permission: int = 6
    register_name_server_period_ms: int = 30_000
    register_timeout_ms: int = 6_000
    auto_create_topic_enable: bool = True
    default_topic_queue_nums: int = 8
    max_reconsume_times: int = 16
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    long_polling_enable: bool = True
    max_pull_wait_ms: int = 30_000
    max_pull_nums: int = 10_000
    max_pull_bytes: int = 64 << 20
    # after a request arrives, the remoting event loop keeps polling this long before it
    # sleeps in the kernel (connector.server.busy_poll): a wake-up saved per request, for
    # at most this much CPU a request; 0 turns it off
    busy_poll_us: int = 100
    # -- high availability (broker/ha): a master's slaves connect to its HA port
    broker_role: BrokerRole = BrokerRole.ASYNC_MASTER
    ha_listen_port: int | None = None  # default port + 1 (free with port 0)
    # a slave's master HA address "host:port"; empty: learnt from the NameServers
    ha_master_address: str = ""
    # a slave behind for longer than this leaves the in-sync set (RocketMQ 5's value)
    ha_max_time_slave_not_catchup_ms: int = 15_000
    # the master's heartbeat to an idle slave, and the slave's acknowledgement when idle
    ha_send_heartbeat_interval_ms: int = 1_000
    # a connection silent for this long is closed (RocketMQ's haHousekeepingInterval)
    ha_housekeeping_interval_ms: int = 20_000
    # the most CommitLog bytes in one replication frame
    ha_transfer_batch_bytes: int = 1 << 20
    # how often the master looks for changed topics, offsets and delay progress to send
    ha_metadata_interval_ms: int = 200
    # -- transactional messages (broker/transaction.py)
    transaction_timeout_ms: int = 6_000  # a half undecided this long is checked back
    transaction_check_interval_ms: int = 30_000  # between check passes
    transaction_check_max: int = 15  # check-backs of one half before it is rolled back
    # -- orderly consumers' queue locks (broker/queue_locks.py)
    rebalance_lock_max_live_time_ms: int = 60_000  # a lock not renewed this long is free
    # -- access control (connector/server/acl): RocketMQ ACL 1.0's plain_acl.yml
    acl_enable: bool = False
    acl_file: Path | None = None  # required with acl_enable; reloaded when it changes
    # the account this broker signs its NameServer registrations with (needed when the
    # NameServers have ACL on); PYMQ_ACCESS_KEY / PYMQ_SECRET_KEY
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    # -- TLS: both listeners serve it with this certificate and key (PEM); the broker then
    # talks TLS to its NameServers too, trusting tls_ca_file (or the system's CAs)
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_ca_file: Path | None = None
    # -- limits: the largest remoting frame / REST body; connections from one address;
    # sends a second per account (or per address, unsigned), the excess SYSTEM_BUSY
    max_frame_bytes: int = 16 << 20
    max_connections_per_address: int = 1000  # 0: no limit
    send_rate_limit: int = 0  # 0: no limit
    log_level: str = "warning"
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("broker_name", "broker_cluster_name"):
            if not _NAME.match(getattr(self, name)):
                raise ConfigError(f"{name} must match {_NAME.pattern}")
        for name in ("port", "http_port"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 65535:
                raise ConfigError(f"{name} {value} is out of range 0..65535")
        if self.broker_id < 0:
            raise ConfigError("broker_id must be >= 0 (0 = master)")
        try:
            role: object = self.broker_role  # a str from code that builds the config by hand
            if not isinstance(role, BrokerRole):
                role = BrokerRole(str(role).strip().upper())
            object.__setattr__(self, "broker_role", role)
        except ValueError:
            raise ConfigError(
                f"broker_role must be one of {', '.join(r.value for r in BrokerRole)}"
            ) from None
        if self.broker_role.is_master and self.broker_id != 0:
            raise ConfigError(
                f"a {self.broker_role.value} has broker_id 0; a slave has broker_id > 0 "
                "and broker_role SLAVE"
            )
        if not self.broker_role.is_master and self.broker_id == 0:
            raise ConfigError("a SLAVE needs broker_id > 0 (0 is its master's)")
        if self.ha_listen_port is not None and not 0 <= self.ha_listen_port <= 65535:
            raise ConfigError(f"ha_listen_port {self.ha_listen_port} is out of range 0..65535")
        for name in (
            "ha_max_time_slave_not_catchup_ms",
            "ha_send_heartbeat_interval_ms",
            "ha_housekeeping_interval_ms",
            "ha_transfer_batch_bytes",
            "ha_metadata_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.ha_master_address and not _is_host_port(self.ha_master_address):
            raise ConfigError("ha_master_address must be host:port")
        for addr in self.namesrv_addrs:
            if not _is_host_port(addr):
                raise ConfigError(
                    f'NameServer address {addr!r} is not host:port (namesrv takes "h:p;h:p")'
                )
        if self.broker_permission not in (0, 2, 4, 6):
            raise ConfigError("broker_permission must be 0, 2 (write), 4 (read) or 6")
        for name in (
            "register_name_server_period_ms", "register_timeout_ms", "max_pull_nums",
            "transaction_timeout_ms", "transaction_check_interval_ms",
        ):  # fmt: skip
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if not 1 <= self.default_topic_queue_nums <= 1024:
            raise ConfigError("default_topic_queue_nums must be in 1..1024")
        if not 0 <= self.busy_poll_us <= MAX_BUSY_POLL_US:
            raise ConfigError(f"busy_poll_us must be in 0..{MAX_BUSY_POLL_US}")
        if self.max_reconsume_times < 0:
            raise ConfigError("max_reconsume_times must be >= 0")
        if self.transaction_check_max < 0:
            raise ConfigError("transaction_check_max must be >= 0")
        parse_delay_levels(self.message_delay_level)
        check_acl_settings(self.acl_enable, self.acl_file)
        check_tls_settings(self.tls_cert_file, self.tls_key_file)
        if self.acl_file is not None:
            object.__setattr__(self, "acl_file", Path(self.acl_file).expanduser())
        self.credentials  # noqa: B018 - both keys or neither
        if self.advertised_addr is not None:
            host, sep, port = self.advertised_addr.rpartition(":")
            if not sep or not _is_ipv4(host) or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError("advertised_addr must be IPv4:port (it goes into msgIds)")
        self.store_config()  # validates the store keys in extra

    @property
    def addr(self) -> str:
        """What clients connect to: ``advertised_addr``, else ``host:port``."""
        return self.advertised_addr or f"{self.host}:{self.port}"

    @property
    def credentials(self) -> Credentials | None:
        """The broker's own account (``access_key`` / ``secret_key``), if set."""
        return Credentials.of(self.access_key, self.secret_key)

    @property
    def resolved_http_port(self) -> int:
        """``http_port``, else ``port`` + 4 (0 with port 0: both free)."""
        return http_port_for(self.port, self.http_port)

    @property
    def resolved_ha_port(self) -> int:
        """``ha_listen_port``, else ``port`` + 1 (RocketMQ's; 0 with port 0: free)."""
        if self.ha_listen_port is not None:
            return self.ha_listen_port
        return 0 if self.port == 0 else self.port + 1

    @property
    def ha_addr(self) -> str:
        """The HA address slaves are told, on the host clients are told (``addr``'s)."""
        host = self.addr.rpartition(":")[0]
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"{host}:{self.resolved_ha_port}"

    @property
    def http_addr(self) -> str:
        """The REST API's base URL, on the host clients are told (``addr``'s)."""
        host = self.addr.rpartition(":")[0]
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        scheme = "https" if self.tls_cert_file else "http"
        return f"{scheme}://{host}:{self.resolved_http_port}"

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in (self.namesrv or "").split(";") if a.strip()]

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.message_delay_level)

    @property
    def resolved_store_dir(self) -> Path:
        if self.store_dir is not None:
            return Path(self.store_dir)
        return Path.home() / ".pymq" / "store" / self.broker_name

    def store_config(self, *, port: int | None = None) -> StoreConfig:
        """The store's settings: ``extra`` keys, store dir, and this broker's address."""
        known = {f.name: f.type for f in dataclasses.fields(StoreConfig)}
        kwargs: dict[str, Any] = {}
        for key, value in self.extra.items():
            if key not in known or key in ("store_dir", "store_host", "store_port", "extra"):
                raise ConfigError(f"unknown broker setting {key!r}")
            kwargs[key] = value
        host = self.host if self.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        port = self.port if port is None else port
        if self.advertised_addr is not None:  # msgIds must name an address clients reach
            adv_host, _, adv_port = self.advertised_addr.rpartition(":")
            host, port = adv_host, int(adv_port)
        return StoreConfig(
            store_dir=self.resolved_store_dir, store_host=host, store_port=port, **kwargs
        )

    def with_ports(self, port: int, http_port: int, ha_port: int | None = None) -> BrokerConfig:
        ha = self.ha_listen_port if ha_port is None else ha_port
        return dataclasses.replace(self, port=port, http_port=http_port, ha_listen_port=ha)
