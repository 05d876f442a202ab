"""A bad read option reaches the user as pymq's own error, naming the option.

PySpark (4.2, 4.3) turns an error raised in ``streamReader()`` into its own
``UnboundLocalError: cannot access local variable 'reader'``, with pymq's
message only in the chained traceback. The source checks its read options
when Spark asks for the schema (at ``load()``), and a stream read with a
schema given by the user (Spark then does not ask) gets a reader that raises
the error on its first call. No cluster: nothing is contacted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connector.spark.options import READ_SCHEMA
from tests.support.spark import first_error_line

NOWHERE = "127.0.0.1:1"  # never dialled: the options are refused first

BAD = [
    pytest.param(
        {"topic": "T", "startingOffsets": "bogus"},
        "connector.errors.ConfigError: option startingOffsets: earliest, latest or JSON"
        " offsets, not 'bogus'",
        id="startingOffsets",
    ),
    pytest.param(
        {"topic": "T", "maxMessagesPerTrigger": "0"},
        "connector.errors.ConfigError: option maxMessagesPerTrigger must be >= 1",
        id="maxMessagesPerTrigger",
    ),
    pytest.param(
        {"tags": "A"},
        "connector.errors.ConfigError: give exactly one of the options topic, subscribePattern,"
        " assign (none given)",
        id="no-topic",
    ),
    pytest.param(
        {"topic": "bad topic!"},
        "connector.errors.InvalidTopicError: topic name 'bad topic!'",
        id="topic-name",
    ),
]


@pytest.mark.parametrize(("options", "message"), BAD)
def test_stream_read_refused_at_load(spark: Any, options: dict[str, str], message: str) -> None:
    reader = spark.readStream.format("pymq").option("namesrv", NOWHERE).options(**options)
    with pytest.raises(Exception) as caught:
        reader.load()  # before start(): no query exists yet
    assert first_error_line(caught.value).startswith(message), str(caught.value)
    assert "UnboundLocalError" not in str(caught.value)


@pytest.mark.parametrize(("options", "message"), BAD[:2])
def test_batch_read_refused_at_load(spark: Any, options: dict[str, str], message: str) -> None:
    reader = spark.read.format("pymq").option("namesrv", NOWHERE).options(**options)
    with pytest.raises(Exception) as caught:
        reader.load()
    assert first_error_line(caught.value).startswith(message), str(caught.value)


@pytest.mark.parametrize(("options", "message"), BAD)
def test_stream_read_with_a_given_schema(
    spark: Any, options: dict[str, str], message: str, tmp_path: Path
) -> None:
    # a schema given by the user: Spark never asks the source for one, so the query's
    # first call to the reader raises
    df = (
        spark.readStream.format("pymq")
        .schema(READ_SCHEMA)
        .option("namesrv", NOWHERE)
        .options(**options)
        .load()
    )
    query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
    try:
        with pytest.raises(Exception) as caught:
            query.awaitTermination(120)
    finally:
        query.stop()
    assert first_error_line(caught.value).startswith(message), str(caught.value)
    assert "UnboundLocalError" not in str(caught.value)
