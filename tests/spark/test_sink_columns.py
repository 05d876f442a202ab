"""Write columns the sink cannot honour are refused on the driver, naming the column."""

from __future__ import annotations

from typing import Any

import pytest

from connector.errors import ConfigError
from connector.spark.options import WriteOptions
from connector.spark.sink import check_write_schema


def test_born_timestamp_column_is_refused_not_ignored(spark: Any) -> None:
    # a send request has one born time, set by the producer: a per-row value cannot travel
    frame = spark.range(2).selectExpr("cast(id as string) as body", "now() as bornTimestamp")
    opts = WriteOptions.parse({"namesrv": "127.0.0.1:1", "topic": "T"})
    with pytest.raises(ConfigError, match="bornTimestamp"):
        check_write_schema(opts, frame.schema)
    with pytest.raises(Exception, match="column bornTimestamp is not supported"):
        frame.write.mode("append").format("pymq").option("namesrv", "127.0.0.1:1").option(
            "topic", "T"
        ).save()
