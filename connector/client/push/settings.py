"""A push consumer's settings, named as RocketMQ's ``DefaultMQPushConsumer``'s in
snake_case, with units in the names; validated once, defaults in one place."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from connector.client.push.allocate import ALLOCATE_STRATEGIES
from connector.errors import ConfigError

__all__ = ["CONSUME_FROM", "MESSAGE_MODELS", "PULL_BATCH_MAX", "PULL_BATCH_MIN", "PushSettings"]

CONSUME_FROM = ("CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP")
MESSAGE_MODELS = ("CLUSTERING", "BROADCASTING")
DEFAULT_OFFSET_STORE_DIR = Path.home() / ".pymq_offsets"
# the adaptive pull page (``pull_batch_size=None``): RocketMQ's 32 while a queue is
# caught up; x PULL_BATCH_GROWTH after every answer that leaves more behind it, up to
# PULL_BATCH_MAX (and pull_threshold_for_queue). Why: a pull costs this Python client
# ~300 us whatever its size (build, send, read, decode, hand over), 10 us a message at
# 32 a page: a backlog read 3x slower at 32 than at 1000 (README, Benchmarks)
PULL_BATCH_MIN = 32
PULL_BATCH_MAX = 1000
PULL_BATCH_GROWTH = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class PushSettings:
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    # CONSUME_FROM_TIMESTAMP's start: ms since the epoch, or RocketMQ's "yyyyMMddHHmmss"
    # (local time); default half an hour ago
    consume_timestamp: int | str | None = None
    message_model: str = "CLUSTERING"
    allocate: str = "averagely"
    orderly: bool = False
    # the consume pool: threads start as batches come, up to the max (the min is
    # RocketMQ's core size, reported in the running info)
    consume_thread_min: int = 20
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1  # messages per listener call
    # messages per pull; None (the default): adapted per queue, PULL_BATCH_MIN while it
    # is caught up and up to PULL_BATCH_MAX while it has a backlog (``pull_batch``)
    pull_batch_size: int | None = None
    max_reconsume_times: int = 16  # then %DLQ%group
    pull_threshold_for_queue: int = 1000  # messages held per queue before pulls pause
    pull_threshold_size_for_queue_mib: int = 100  # bytes of bodies held per queue, MiB
    # a message whose listener call started longer ago is sent back (delay level 3) and
    # no longer holds the queue's offset; checked as often (RocketMQ's cleanExpireMsg).
    # Minutes as RocketMQ's consumeTimeout; fractions are taken (tests use seconds)
    consume_timeout_minutes: float = 15
    persist_consumer_offset_interval_ms: int = 5000
    heartbeat_broker_interval_ms: int = 30_000
    rebalance_interval_ms: int = 20_000
    lock_renew_interval_ms: int = 20_000  # orderly: the brokers' queue locks renewed
    lock_lost_after_ms: int = 30_000  # orderly: a lock not renewed this long is not trusted
    suspend_current_queue_time_ms: int = 1000  # orderly: the pause after SUSPEND
    pull_time_delay_ms_when_exception: int = 1000
    broker_suspend_max_time_ms: int = 15_000  # a long poll's hold on the broker
    offset_store_dir: Path = DEFAULT_OFFSET_STORE_DIR  # broadcasting: offset files

    def __post_init__(self) -> None:
        if self.consume_from_where not in CONSUME_FROM:
            raise ConfigError(f"consume_from_where must be one of {', '.join(CONSUME_FROM)}")
        if self.message_model not in MESSAGE_MODELS:
            raise ConfigError(f"message_model must be one of {', '.join(MESSAGE_MODELS)}")
        if self.allocate not in ALLOCATE_STRATEGIES:
            raise ConfigError(f"allocate must be one of {', '.join(ALLOCATE_STRATEGIES)}")
        positive = (
            "consume_thread_max", "consume_message_batch_max_size",
            "pull_threshold_for_queue", "pull_threshold_size_for_queue_mib",
            "persist_consumer_offset_interval_ms", "heartbeat_broker_interval_ms",
            "rebalance_interval_ms", "lock_renew_interval_ms",
        )  # fmt: skip
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.pull_batch_size is not None and self.pull_batch_size <= 0:
            raise ConfigError("pull_batch_size must be positive (or None: adaptive)")
        if not 0 < self.consume_thread_min <= self.consume_thread_max:
            raise ConfigError("consume_thread_min must be in 1..consume_thread_max")
        if not self.consume_timeout_minutes > 0:
            raise ConfigError("consume_timeout_minutes must be positive")
        if self.lock_lost_after_ms <= self.lock_renew_interval_ms:
            raise ConfigError("lock_lost_after_ms must exceed lock_renew_interval_ms")
        if self.max_reconsume_times < 0:
            raise ConfigError("max_reconsume_times must not be negative")
        self.timestamp_ms()  # a bad consume_timestamp fails here

    def timestamp_ms(self) -> int:
        """CONSUME_FROM_TIMESTAMP's start in ms since the epoch."""
        ts = self.consume_timestamp
        if ts is None:
            return int((time.time() - 1800) * 1000)
        if isinstance(ts, int):
            return ts
        try:
            return int(datetime.strptime(ts, "%Y%m%d%H%M%S").timestamp() * 1000)
        except ValueError:
            raise ConfigError(
                f"consume_timestamp {ts!r} is neither ms nor yyyyMMddHHmmss"
            ) from None

    @property
    def clustering(self) -> bool:
        return self.message_model == "CLUSTERING"

    @property
    def consume_timeout_s(self) -> float:
        return self.consume_timeout_minutes * 60

    def pull_batch(self, asked: int | None, more_behind: bool) -> int:
        """The next pull's page: ``pull_batch_size`` if set; else adapted from the last
        pull's (``asked``; None: the queue's first pull), larger while the queue has
        more behind its last answer (a backlog), back to the minimum once caught up."""
        if self.pull_batch_size is not None:
            return self.pull_batch_size
        if asked is None or not more_behind:
            return PULL_BATCH_MIN
        return min(self._pull_batch_cap, asked * PULL_BATCH_GROWTH)

    def pull_batch_text(self) -> str:
        """``pull_batch_size`` as the running info reports it."""
        if self.pull_batch_size is not None:
            return str(self.pull_batch_size)
        return f"auto ({PULL_BATCH_MIN}-{self._pull_batch_cap})"

    @property
    def _pull_batch_cap(self) -> int:
        """The adaptive page's largest: no more than a queue may hold before it pauses."""
        return max(PULL_BATCH_MIN, min(PULL_BATCH_MAX, self.pull_threshold_for_queue))

    @property
    def pull_threshold_bytes(self) -> int:
        return self.pull_threshold_size_for_queue_mib << 20
