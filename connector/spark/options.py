"""The source's and sink's options, parsed once on the driver (names as CONTRACT.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from connector.errors import ConfigError
from connector.protocol.names import validate_topic

__all__ = ["READ_SCHEMA", "ReadOptions", "WriteOptions", "namesrv_option"]

READ_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("brokerName", StringType()),
        StructField("queueId", IntegerType()),
        StructField("queueOffset", LongType()),
        StructField("msgId", StringType()),
        StructField("tags", StringType()),
        StructField("keys", StringType()),
        StructField("body", BinaryType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("bornTimestamp", TimestampType()),
        StructField("storeTimestamp", TimestampType()),
    ]
)


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark hands options over case-insensitively; accept either spelling
    for key in (name, name.lower()):
        if key in options:
            return options[key]
    return None


def namesrv_option(options: Mapping[str, str]) -> str:
    value = _get(options, "namesrv") or os.environ.get("PYMQ_NAMESRV")
    if not value:
        raise ConfigError("option namesrv is required (or set PYMQ_NAMESRV)")
    return value


def _int(options: Mapping[str, str], name: str, default: int, low: int = 1) -> int:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"option {name}: {raw!r} is not an integer") from None
    if value < low:
        raise ConfigError(f"option {name} must be >= {low}")
    return value


def _int_or_none(options: Mapping[str, str], name: str, low: int = 1) -> int | None:
    return None if _get(options, name) is None else _int(options, name, low, low)


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise ConfigError(f"option {name}: {raw!r} is not true or false")


def _offsets(options: Mapping[str, str], name: str, default: str) -> str | dict[str, Any]:
    """``earliest`` | ``latest`` | JSON ``{"T": {"broker-a": {"0": 42}}}``."""
    raw = (_get(options, name) or default).strip()
    if raw in ("earliest", "latest"):
        return raw
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise ConfigError(f"option {name}: earliest, latest or JSON offsets, not {raw!r}") from None
    if not isinstance(parsed, dict) or not all(
        isinstance(b, dict) and all(isinstance(q, dict) for q in b.values())
        for b in parsed.values()
    ):
        raise ConfigError(
            f'option {name}: JSON must look like {{"T": {{"broker-a": {{"0": 42}}}}}}'
        )
    return parsed


@dataclass(frozen=True)
class ReadOptions:
    namesrv: str
    topics: tuple[str, ...]
    starting: str | dict[str, Any]
    ending: str | dict[str, Any]
    starting_timestamp: int | None
    tags: str | None
    fail_on_data_loss: bool
    pull_batch_size: int
    min_partitions: int
    consumer_group: str | None
    max_per_trigger: int | None  # streams only: maxMessagesPerTrigger

    @classmethod
    def parse(cls, options: Mapping[str, str], *, stream: bool) -> ReadOptions:
        """Every read option checked at once; a bad one raises ``ConfigError`` naming it.

        ``stream`` only picks the default of ``startingOffsets`` (``latest`` for streams,
        ``earliest`` for batch), so either value checks the same options.
        """
        raw_topics = _get(options, "topic") or ""
        topics = tuple(validate_topic(t.strip()) for t in raw_topics.split(",") if t.strip())
        if not topics:
            raise ConfigError("option topic is required (a comma-separated list)")
        ts = _get(options, "startingTimestamp")
        return cls(
            namesrv=namesrv_option(options),
            topics=topics,
            starting=_offsets(options, "startingOffsets", "latest" if stream else "earliest"),
            ending=_offsets(options, "endingOffsets", "latest"),
            starting_timestamp=_int(options, "startingTimestamp", 0, 0) if ts else None,
            tags=_get(options, "tags"),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            pull_batch_size=_int(options, "pullBatchSize", 5000),
            min_partitions=_int(options, "minPartitions", 1),
            consumer_group=_get(options, "consumerGroup"),
            max_per_trigger=_int_or_none(options, "maxMessagesPerTrigger"),
        )


@dataclass(frozen=True)
class WriteOptions:
    namesrv: str
    topic: str | None
    producer_group: str
    send_latency_fault_enable: bool
    retry_times_when_send_failed: int
    send_msg_timeout_ms: int
    batch_size: int

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        topic = _get(options, "topic")
        return cls(
            namesrv=namesrv_option(options),
            topic=validate_topic(topic) if topic else None,
            producer_group=_get(options, "producerGroup") or "pymq-spark",
            send_latency_fault_enable=_bool(options, "sendLatencyFaultEnable", True),
            retry_times_when_send_failed=_int(options, "retryTimesWhenSendFailed", 2, 0),
            send_msg_timeout_ms=_int(options, "sendMsgTimeoutMs", 3000),
            batch_size=_int(options, "batchSize", 10000),
        )
