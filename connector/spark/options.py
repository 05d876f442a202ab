"""The source's and sink's options, parsed once on the driver (docs/contract.md).

Names follow Spark's Kafka source where the idea is the same (its Kafka names
``maxOffsetsPerTrigger``/``minOffsetsPerTrigger`` are aliases). Spark hands
options over case-insensitively, so names are compared lower-cased, and a name
that is neither a read nor a write option is refused naming the closest known
one: a misspelt option must not be ignored silently.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
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
from connector.protocol.names import validate_group, validate_topic

__all__ = [
    "READ_OPTIONS",
    "READ_SCHEMA",
    "WRITE_OPTIONS",
    "ReadOptions",
    "WriteOptions",
    "check_names",
    "check_read_schema",
    "check_stream_read",
    "namesrv_option",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000  # Kafka's maxTriggerDelay default, 15m

# the option names, shared with format("pymq-jvm")'s ReadOptions.java (which loads the
# same file from its jar): read, write, and what Spark itself puts among a source's
# options (load(path) / save(path) / start(path), a stream write's checkpointLocation and
# queryName; checked with PySpark 4.2/4.3)
_NAMES = json.loads(resources.files("connector.spark").joinpath("options.json").read_text())
READ_OPTIONS = frozenset(_NAMES["read"])
WRITE_OPTIONS = frozenset(_NAMES["write"])
SPARK_OPTIONS = frozenset(_NAMES["spark"])

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


def check_names(options: Mapping[str, str], *, write: bool) -> None:
    """Refuse an option name pymq does not know, naming the closest known one.

    A name known only to the other side (a write option on a read, say) is logged and
    ignored, as Kafka's source does with one option map shared by a read and a write.
    """
    mine, other = (WRITE_OPTIONS, READ_OPTIONS) if write else (READ_OPTIONS, WRITE_OPTIONS)
    known = {n.lower(): n for n in (*sorted(mine), *sorted(other), *sorted(SPARK_OPTIONS))}
    side = "write" if write else "read"
    for key in options:
        name = known.get(key.lower())
        if name is None:
            close = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.6)
            hint = f"; did you mean {known[close[0]]}?" if close else ""
            raise ConfigError(f"option {key} is not a pymq {side} option{hint}")
        if name not in mine and name not in SPARK_OPTIONS:
            log.warning("option %s is not a %s option: ignored", name, side)


def check_read_schema(schema: StructType) -> None:
    """A schema given to a read (``.schema(...)``) picks columns: any of the read
    schema's, in any order, each with its type; a read builds only those and Spark
    carries only those (reading ``body`` alone costs Spark's JVM less than half of
    what every column does). Anything else is refused, naming the column."""
    known = {f.name: f.dataType for f in READ_SCHEMA.fields}
    seen: set[str] = set()
    for field in schema.fields:
        kind = known.get(field.name)
        if kind is None:
            close = difflib.get_close_matches(field.name, list(known), n=1, cutoff=0.6)
            lower = {n.lower(): n for n in known}.get(field.name.lower())
            hint = f"; did you mean {lower or close[0]}?" if lower or close else ""
            raise ConfigError(f"column {field.name} is not in pymq's read schema{hint}")
        if field.dataType != kind:
            raise ConfigError(
                f"column {field.name} is {kind.simpleString()} in pymq's read schema, "
                f"not {field.dataType.simpleString()}"
            )
        if not field.nullable:
            raise ConfigError(f"column {field.name} may be null in pymq's read schema")
        if field.name in seen:
            raise ConfigError(f"column {field.name} is given twice")
        seen.add(field.name)
    if not seen:
        raise ConfigError("the schema given to the read has no columns")


def check_stream_read(options: Mapping[str, str]) -> None:
    """The ending options are for batch reads: a stream refuses them, as Kafka's does."""
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        if _get(options, name) is not None:
            raise ConfigError(f"option {name} is for batch reads; a stream runs until stopped")


def _one_of(options: Mapping[str, str], name: str, alias: str) -> str:
    """The spelling of an option the user gave, ``name`` or its Kafka ``alias``."""
    if _get(options, name) is not None and _get(options, alias) is not None:
        raise ConfigError(f"options {name} and {alias} are the same; give one")
    return alias if _get(options, alias) is not None else name


def _duration_ms(options: Mapping[str, str], name: str, default_ms: int) -> int:
    """Spark's duration strings: ``500ms``, ``30s``, ``15m``, ``1h``, ``1d``; plain = ms."""
    raw = _get(options, name)
    if raw is None:
        return default_ms
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", raw.lower())
    if m is None:
        raise ConfigError(f"option {name}: {raw!r} is not a duration like 500ms, 30s, 15m, 1h")
    unit_ms = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
    unit_ms["d"] = 24 * unit_ms["h"]
    return int(m.group(1)) * unit_ms[m.group(2)]


@dataclass(frozen=True)
class Security:
    """accessKey / secretKey (both or neither): the account requests are signed with;
    tls / tlsCaFile: servers that serve TLS, verified against that CA file. The secret
    is never in ``repr``."""

    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    tls: bool = False
    tls_ca_file: str | None = None

    @property
    def client_kwargs(self) -> dict[str, Any]:
        """As the clients' keywords."""
        return {
            "access_key": self.access_key, "secret_key": self.secret_key,
            "tls": self.tls, "tls_ca_file": self.tls_ca_file,
        }  # fmt: skip


def _security(options: Mapping[str, str]) -> Security:
    access_key, secret_key = _get(options, "accessKey"), _get(options, "secretKey")
    if bool(access_key) != bool(secret_key):
        raise ConfigError("options accessKey and secretKey go together: give both or neither")
    tls, ca_file = _bool(options, "tls", False), _get(options, "tlsCaFile")
    if ca_file and not tls:
        raise ConfigError("option tlsCaFile is set but tls is not: set tls to true too")
    return Security(access_key or None, secret_key or None, tls, ca_file or None)


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
        isinstance(b, dict)
        and all(
            isinstance(q, dict)
            and all(
                _queue_id(k) and isinstance(n, int) and not isinstance(n, bool)
                for k, n in q.items()
            )
            for q in b.values()
        )
        for b in parsed.values()
    ):
        raise ConfigError(
            f'option {name}: JSON must look like {{"T": {{"broker-a": {{"0": 42}}}}}}'
        )
    return parsed


def _queue_id(key: str) -> bool:
    """A queue id as a JSON key: an integer (as Java's ``Integer.parseInt`` reads it)."""
    try:
        int(key.strip())
    except ValueError:
        return False
    return True


def _group_or_none(group: str | None) -> str | None:
    return None if group is None else validate_group(group)


def _per_queue_ms(options: Mapping[str, str], name: str) -> dict[str, Any] | None:
    """JSON ``{"T": {"broker-a": {"0": ms}}}`` of timestamps, or None when not given."""
    if _get(options, name) is None:
        return None
    parsed = _offsets(options, name, "")
    if not isinstance(parsed, dict) or not all(
        isinstance(ms, int) and not isinstance(ms, bool) and ms >= 0
        for bs in parsed.values()
        for qs in bs.values()
        for ms in qs.values()
    ):
        raise ConfigError(
            f'option {name}: JSON of timestamps in ms, like {{"T": {{"broker-a": {{"0": 0}}}}}}'
        )
    return parsed


def _assign(options: Mapping[str, str]) -> dict[str, dict[str, tuple[int, ...]]] | None:
    """JSON ``{"T": {"broker-a": [0, 1]}}``: exactly these queues."""
    raw = _get(options, "assign")
    if raw is None:
        return None
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if (
        not isinstance(parsed, dict)
        or not parsed
        or not all(
            isinstance(bs, dict)
            and bs
            and all(
                isinstance(qs, list)
                and qs
                and all(isinstance(q, int) and not isinstance(q, bool) and q >= 0 for q in qs)
                for qs in bs.values()
            )
            for bs in parsed.values()
        )
    ):
        raise ConfigError(f'option assign: JSON like {{"T": {{"broker-a": [0, 1]}}}}, not {raw!r}')
    return {
        validate_topic(t): {b: tuple(sorted(set(qs))) for b, qs in bs.items()}
        for t, bs in parsed.items()
    }


def _pattern(options: Mapping[str, str]) -> re.Pattern[str] | None:
    raw = _get(options, "subscribePattern")
    if raw is None:
        return None
    try:
        return re.compile(raw)
    except re.error as exc:
        raise ConfigError(f"option subscribePattern: {raw!r} is not a regex ({exc})") from None


def _topics(options: Mapping[str, str]) -> tuple[str, ...]:
    raw = _get(options, "topic")
    if raw is None:
        return ()
    topics = tuple(validate_topic(t.strip()) for t in raw.split(",") if t.strip())
    if not topics:
        raise ConfigError("option topic: a comma-separated list of topics, not empty")
    return topics


def _ms_or_none(options: Mapping[str, str], name: str) -> int | None:
    return None if _get(options, name) is None else _int(options, name, 0, 0)


@dataclass(frozen=True)
class ReadOptions:
    """Parsed read options; ``parse`` is the only constructor used (defaults live there).

    What to read is exactly one of ``topics``, ``pattern`` (subscribePattern, matched
    with ``fullmatch``) and ``assign`` (topic -> broker -> queue ids). Starting point:
    ``starting_timestamp`` wins over ``starting_by_timestamp``, which wins over
    ``starting``; the same order for the batch end.
    """

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
    max_per_trigger: int | None  # streams only: maxMessagesPerTrigger / maxOffsetsPerTrigger
    pattern: re.Pattern[str] | None = None
    assign: dict[str, dict[str, tuple[int, ...]]] | None = None
    starting_by_timestamp: dict[str, Any] | None = None
    starting_timestamp_strategy: str = "error"  # "error" | "latest": a time past a queue's end
    ending_timestamp: int | None = None
    ending_by_timestamp: dict[str, Any] | None = None
    min_per_trigger: int | None = None  # minMessagesPerTrigger / minOffsetsPerTrigger
    max_trigger_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS
    max_bytes_per_trigger: int | None = None
    max_records_per_partition: int | None = None
    security: Security = Security()  # accessKey / secretKey / tls / tlsCaFile

    @classmethod
    def parse(cls, options: Mapping[str, str], *, stream: bool) -> ReadOptions:
        """Every read option checked at once; a bad one raises ``ConfigError`` naming it.

        ``stream`` only picks the default of ``startingOffsets`` (``latest`` for streams,
        ``earliest`` for batch), so either value checks the same options.
        """
        check_names(options, write=False)
        given = [n for n in ("topic", "subscribePattern", "assign") if _get(options, n) is not None]
        if len(given) != 1:
            what = " and ".join(given) if given else "none"
            raise ConfigError(
                f"give exactly one of the options topic, subscribePattern, assign ({what} given)"
            )
        strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").lower()
        if strategy not in ("error", "latest"):
            raise ConfigError(
                f"option startingOffsetsByTimestampStrategy: error or latest, not {strategy!r}"
            )
        return cls(
            namesrv=namesrv_option(options),
            topics=_topics(options),
            pattern=_pattern(options),
            assign=_assign(options),
            starting=_offsets(options, "startingOffsets", "latest" if stream else "earliest"),
            ending=_offsets(options, "endingOffsets", "latest"),
            starting_timestamp=_ms_or_none(options, "startingTimestamp"),
            starting_by_timestamp=_per_queue_ms(options, "startingOffsetsByTimestamp"),
            starting_timestamp_strategy=strategy,
            ending_timestamp=_ms_or_none(options, "endingTimestamp"),
            ending_by_timestamp=_per_queue_ms(options, "endingOffsetsByTimestamp"),
            tags=_get(options, "tags"),
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            pull_batch_size=_int(options, "pullBatchSize", 5000),
            min_partitions=_int(options, "minPartitions", 1),
            consumer_group=_group_or_none(_get(options, "consumerGroup")),
            max_per_trigger=_int_or_none(
                options, _one_of(options, "maxMessagesPerTrigger", "maxOffsetsPerTrigger")
            ),
            min_per_trigger=_int_or_none(
                options, _one_of(options, "minMessagesPerTrigger", "minOffsetsPerTrigger")
            ),
            max_trigger_delay_ms=_duration_ms(
                options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY_MS
            ),
            max_bytes_per_trigger=_int_or_none(options, "maxBytesPerTrigger"),
            max_records_per_partition=_int_or_none(options, "maxRecordsPerPartition"),
            security=_security(options),
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
    exactly_once: bool = False  # deliveryGuarantee=exactly-once
    security: Security = Security()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        check_names(options, write=True)
        guarantee = (_get(options, "deliveryGuarantee") or "at-least-once").lower()
        if guarantee not in ("at-least-once", "exactly-once"):
            raise ConfigError(
                f"option deliveryGuarantee: at-least-once or exactly-once, not {guarantee!r}"
            )
        topic = _get(options, "topic")
        return cls(
            namesrv=namesrv_option(options),
            topic=validate_topic(topic) if topic else None,
            producer_group=_get(options, "producerGroup") or "pymq-spark",
            send_latency_fault_enable=_bool(options, "sendLatencyFaultEnable", True),
            retry_times_when_send_failed=_int(options, "retryTimesWhenSendFailed", 2, 0),
            send_msg_timeout_ms=_int(options, "sendMsgTimeoutMs", 3000),
            batch_size=_int(options, "batchSize", 10000),
            exactly_once=guarantee == "exactly-once",
            security=_security(options),
        )
