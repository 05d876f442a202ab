"""Option names are checked: a misspelt or unknown one is refused naming the closest
known one, what to read is exactly one of topic/subscribePattern/assign, and the Kafka
aliases parse. No cluster: the options are refused before anything is dialled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import StructType

from connector.errors import ConfigError
from connector.spark.options import (
    READ_OPTIONS,
    WRITE_OPTIONS,
    ReadOptions,
    WriteOptions,
    check_read_schema,
)
from tests.support.spark import first_error_line

NOWHERE = "127.0.0.1:1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(
            {"topic": "T", "startingOffset": "earliest"},
            # Spark lower-cases option names before the source sees them
            "option startingoffset is not a pymq read option; did you mean startingOffsets?",
            id="misspelt",
        ),
        pytest.param(
            {"topic": "T", "subscribePattern": "T.*"},
            "give exactly one of the options topic, subscribePattern, assign"
            " (topic and subscribePattern given)",
            id="topic-and-pattern",
        ),
        pytest.param(
            {"topic": "T", "maxOffsetsPerTrigger": "5", "maxMessagesPerTrigger": "5"},
            "options maxMessagesPerTrigger and maxOffsetsPerTrigger are the same; give one",
            id="alias-twice",
        ),
        pytest.param(
            {"subscribePattern": "T("},
            "option subscribePattern: 'T(' is not a regex",
            id="bad-pattern",
        ),
        pytest.param(
            {"assign": '{"T": [0]}'},
            "option assign: JSON like",
            id="bad-assign",
        ),
        pytest.param(
            {"topic": "T", "startingOffsetsByTimestampStrategy": "earliest"},
            "option startingOffsetsByTimestampStrategy: error or latest",
            id="strategy",
        ),
    ],
)
def test_read_refused_at_load(spark: Any, options: dict[str, str], message: str) -> None:
    for reader in (spark.read, spark.readStream):
        with pytest.raises(Exception) as caught:
            reader.format("pymq").option("namesrv", NOWHERE).options(**options).load()
        line = first_error_line(caught.value)
        assert line.startswith("connector.errors.ConfigError: " + message), line


def test_ending_options_refused_by_a_stream(spark: Any, tmp_path: Path) -> None:
    reader = spark.readStream.format("pymq").option("namesrv", NOWHERE).option("topic", "T")
    query = (
        reader.option("endingTimestamp", "0")
        .load()
        .writeStream.format("memory")
        .queryName("ending_refused")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        with pytest.raises(Exception, match="option endingTimestamp is for batch reads"):
            query.awaitTermination(120)
    finally:
        query.stop()


def test_misspelt_write_option_refused(spark: Any, tmp_path: Path) -> None:
    df = spark.range(1).selectExpr("'x' as body")
    with pytest.raises(Exception) as caught:
        df.write.format("pymq").option("namesrv", NOWHERE).option("topic", "T").option(
            "bachSize", "10"
        ).mode("append").save()
    assert "option bachsize is not a pymq write option; did you mean batchSize?" in str(
        caught.value
    )
    # a stream write: Spark's own checkpointLocation is among the options, and accepted
    query = (
        spark.readStream.format("rate")
        .load()
        .selectExpr("cast(value as string) as body")
        .writeStream.format("pymq")
        .option("namesrv", NOWHERE)
        .option("topic", "T")
        .option("sendMsgTimeoutMss", "10")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        with pytest.raises(Exception, match="did you mean sendMsgTimeoutMs"):
            query.awaitTermination(120)
    finally:
        query.stop()


CONTRACT_READ = [
    "namesrv",
    "topic",
    "subscribePattern",
    "assign",
    "startingOffsets",
    "startingTimestamp",
    "startingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "endingOffsets",
    "endingTimestamp",
    "endingOffsetsByTimestamp",
    "maxMessagesPerTrigger",
    "maxOffsetsPerTrigger",
    "minMessagesPerTrigger",
    "minOffsetsPerTrigger",
    "maxTriggerDelay",
    "maxBytesPerTrigger",
    "minPartitions",
    "maxRecordsPerPartition",
    "failOnDataLoss",
    "tags",
    "consumerGroup",
    "pullBatchSize",
    "accessKey",
    "secretKey",
    "tls",
    "tlsCaFile",
]
CONTRACT_WRITE = [
    "namesrv",
    "topic",
    "producerGroup",
    "sendLatencyFaultEnable",
    "retryTimesWhenSendFailed",
    "sendMsgTimeoutMs",
    "batchSize",
    "deliveryGuarantee",
    "accessKey",
    "secretKey",
    "tls",
    "tlsCaFile",
]


def test_every_option_of_the_contract_is_known() -> None:
    assert set(CONTRACT_READ) == READ_OPTIONS
    assert set(CONTRACT_WRITE) == WRITE_OPTIONS


def test_aliases_and_durations_parse() -> None:
    base = {"namesrv": NOWHERE, "assign": '{"T": {"broker-a": [1, 0, 1]}}'}
    opts = ReadOptions.parse(
        {
            **base,
            "maxoffsetspertrigger": "100",  # Spark lower-cases option names
            "minOffsetsPerTrigger": "10",
            "maxTriggerDelay": "30s",
            "maxBytesPerTrigger": "1048576",
            "maxRecordsPerPartition": "500",
        },
        stream=True,
    )
    assert (opts.max_per_trigger, opts.min_per_trigger) == (100, 10)
    assert opts.max_trigger_delay_ms == 30_000
    assert (opts.max_bytes_per_trigger, opts.max_records_per_partition) == (1048576, 500)
    assert opts.assign == {"T": {"broker-a": (0, 1)}}
    assert opts.topics == () and opts.pattern is None
    defaults = ReadOptions.parse(base, stream=True)
    assert defaults.max_trigger_delay_ms == 15 * 60_000
    assert defaults.starting_timestamp_strategy == "error"
    for raw, ms in [("500ms", 500), ("15m", 900_000), ("1h", 3_600_000), ("250", 250)]:
        assert (
            ReadOptions.parse({**base, "maxTriggerDelay": raw}, stream=True).max_trigger_delay_ms
            == ms
        )
    with pytest.raises(ConfigError, match="option maxTriggerDelay: '15 minutes'"):
        ReadOptions.parse({**base, "maxTriggerDelay": "15 minutes"}, stream=True)


def test_a_write_option_on_a_read_is_logged_not_refused(caplog: pytest.LogCaptureFixture) -> None:
    # one option map shared by a read and a write (as Kafka's users do) still reads
    ReadOptions.parse({"namesrv": NOWHERE, "topic": "T", "batchSize": "10"}, stream=False)
    assert "option batchSize is not a read option: ignored" in caplog.text
    with pytest.raises(ConfigError, match="did you mean producerGroup"):
        WriteOptions.parse({"namesrv": NOWHERE, "producergroupp": "g"})


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("bdy binary", "column bdy is not in pymq's read schema; did you mean body?"),
        ("Body binary", "column Body is not in pymq's read schema; did you mean body?"),
        ("body string", "column body is binary in pymq's read schema, not string"),
        ("queueId long", "column queueId is int in pymq's read schema, not bigint"),
        ("body binary not null", "column body may be null in pymq's read schema"),
        ("body binary, body binary", "column body is given twice"),
    ],
)
def test_a_given_schema_must_name_read_columns(spark: Any, schema: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:  # (the DDL parser needs a session)
        check_read_schema(StructType.fromDDL(schema))
    assert str(caught.value) == message


def test_a_wrong_given_schema_is_refused_by_a_read(spark: Any, tmp_path: Path) -> None:
    message = "column bdy is not in pymq's read schema; did you mean body?"
    read = spark.read.format("pymq").schema("bdy binary").option("namesrv", NOWHERE)
    with pytest.raises(Exception) as caught:
        read.option("topic", "T").load().collect()
    assert first_error_line(caught.value) == "connector.errors.ConfigError: " + message
    query = (
        spark.readStream.format("pymq").schema("bdy binary").option("namesrv", NOWHERE)
        .option("topic", "T").load()
        .writeStream.format("memory").queryName("schema_refused")
        .option("checkpointLocation", str(tmp_path / "ck")).start()
    )  # fmt: skip
    try:
        with pytest.raises(Exception, match=message):
            query.awaitTermination(120)
    finally:
        query.stop()
