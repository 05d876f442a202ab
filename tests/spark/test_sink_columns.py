"""The sink's bornTimestamp column: a row's born time reaches its message."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from connector.errors import ConfigError
from connector.local import LocalCluster
from connector.spark.options import WriteOptions
from connector.spark.sink import check_write_schema

BASE_MS = 1_700_000_000_000


def read_born(spark: Any, ns: str, topic: str) -> dict[str, int]:
    rows = spark.read.format("pymq").option("namesrv", ns).option("topic", topic).load().collect()
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    out = {}
    for r in rows:
        born = r.bornTimestamp
        if born.tzinfo is None:  # the session's time zone: read it back as UTC
            born = born.replace(tzinfo=dt.timezone.utc)
        out[bytes(r.body).decode()] = round((born - epoch).total_seconds() * 1000)
    return out


@pytest.fixture(scope="module")
def utc(spark: Any) -> Any:
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


def test_born_timestamp_column_as_timestamp_and_as_ms(utc: Any, cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    # runs of equal born times (one request each) and times of their own, with keys so the
    # rows take the Message path, a sharding key, and a delayed row (sent alone)
    want = {f"r{i}": BASE_MS + (i // 50) * 1000 + (i % 3 if i >= 200 else 0) for i in range(300)}
    frame = utc.createDataFrame(
        [(k, v, f"key{k}") for k, v in want.items()], "body string, ms long, keys string"
    )
    stamped = frame.selectExpr("body", "keys", "timestamp_millis(ms) as bornTimestamp")
    stamped.write.mode("append").format("pymq").option("namesrv", ns).option(
        "topic", "BornTs"
    ).save()
    assert read_born(utc, ns, "BornTs") == want

    longs = frame.selectExpr(
        "body",
        "ms + 7 as bornTimestamp",
        "body as shardingKey",
        "if(body = 'r5', 2, 0) as delayLevel",
    )
    longs.write.mode("append").format("pymq").option("namesrv", ns).option("topic", "BornMs").save()
    got = read_born(utc, ns, "BornMs")
    want_ms = {k: v + 7 for k, v in want.items() if k != "r5"}  # r5 waits for its delay level
    assert {k: v for k, v in got.items() if k != "r5"} == want_ms


def test_born_timestamp_of_another_type_is_refused(spark: Any) -> None:
    frame = spark.range(2).selectExpr("cast(id as string) as body", "'soon' as bornTimestamp")
    opts = WriteOptions.parse({"namesrv": "127.0.0.1:1", "topic": "T"})
    with pytest.raises(ConfigError, match="bornTimestamp must be a timestamp"):
        check_write_schema(opts, frame.schema)
    with pytest.raises(Exception, match="bornTimestamp must be a timestamp"):
        frame.write.mode("append").format("pymq").option("namesrv", "127.0.0.1:1").option(
            "topic", "T"
        ).save()
