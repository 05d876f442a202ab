"""Store settings: one frozen dataclass, defaults in one place (RocketMQ's values)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from connector.errors import ConfigError

__all__ = ["FlushDiskType", "StoreConfig"]

GiB = 1 << 30
MiB = 1 << 20


class FlushDiskType(str, enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    """Everything the store needs; times carry their unit in the name."""

    store_dir: Path
    mapped_file_size_commit_log: int = GiB
    consume_queue_entries_per_file: int = 300_000
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log_ms: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval_ms: int = 10_000
    sync_flush_timeout_ms: int = 5_000
    group_commit_on_loop_max_ms: int = 10
    flush_interval_consume_queue_ms: int = 1_000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000
    max_message_size: int = 4 * MiB
    message_index_enable: bool = True
    # the index is fdatasync'ed (and the checkpoint's index offset moved) this often, not
    # with every queue flush: its hash slots are written all over the file, so a flush
    # each second rewrote ~20 MB (the whole slot table at 5,000 keyed messages a second)
    # and the I/O stalled the broker; after a crash the index is rebuilt from the log
    # written since (broker/store/recovery.py), as RocketMQ leaves index durability to
    # its dispatch
    flush_interval_index_ms: int = 10_000
    # ... or sooner once this much log was written since its last flush: what a crash can
    # leave to re-index stays small at any write rate
    flush_index_max_lag_bytes: int = 128 * MiB
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    file_reserved_time_hours: float = 72.0
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    disk_space_clean_forcibly_ratio: int = 85
    disk_space_warning_level_ratio: int = 90
    delete_files_batch_max: int = 10
    clean_resource_interval_ms: int = 10_000
    check_crc_on_recover: bool = True
    store_host: str = "127.0.0.1"
    store_port: int = 10911
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "store_dir", Path(self.store_dir))
        object.__setattr__(self, "flush_disk_type", FlushDiskType(self.flush_disk_type))
        if self.mapped_file_size_commit_log < 4096:
            raise ConfigError("mapped_file_size_commit_log must be at least 4096 bytes")
        if self.consume_queue_entries_per_file < 1:
            raise ConfigError("consume_queue_entries_per_file must be positive")
        if self.max_message_size < 1:
            raise ConfigError("max_message_size must be positive")
        for name in (
            "flush_interval_commit_log_ms",
            "sync_flush_timeout_ms",
            "flush_interval_consume_queue_ms",
            "flush_interval_index_ms",
            "clean_resource_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.group_commit_on_loop_max_ms < 0:
            raise ConfigError("group_commit_on_loop_max_ms must not be negative")
        if self.flush_index_max_lag_bytes < 0:
            raise ConfigError("flush_index_max_lag_bytes must not be negative")
        if self.max_hash_slot_num < 1 or self.max_index_num < 2:
            raise ConfigError("index sizes must be positive")
        for name in (
            "disk_max_used_space_ratio",
            "disk_space_clean_forcibly_ratio",
            "disk_space_warning_level_ratio",
        ):
            if not 0 <= getattr(self, name) <= 100:
                raise ConfigError(f"{name} is a percentage (0-100)")
        if self.disk_space_warning_level_ratio < self.disk_space_clean_forcibly_ratio:
            raise ConfigError(
                "disk_space_warning_level_ratio must not be below disk_space_clean_forcibly_ratio"
            )

    @property
    def commit_log_dir(self) -> Path:
        return self.store_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_dir / "index"

    @property
    def config_dir(self) -> Path:
        return self.store_dir / "config"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_dir / "abort"

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.name != "extra"]
