"""Both Spark formats against servers with ACL on: accessKey / secretKey sign every
request (the Python source and sink, the JVM source); without them, or with an account
lacking the permission, the query fails with the servers' reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connector.local import LocalCluster
from tests.support.acl import ADMIN, PUB_ONLY, SUB_ONLY, create_topic, start_acl_cluster


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster, _ = start_acl_cluster(tmp_path_factory.mktemp("spark-acl"))
    try:
        create_topic(cluster, "SparkAcl")
        yield cluster
    finally:
        cluster.stop()


def read(spark: Any, fmt: str, cluster: LocalCluster, keys: tuple[str, str] | None) -> Any:
    reader = spark.read.format(fmt).option("namesrv", cluster.namesrv_addr)
    if keys is not None:
        reader = reader.option("accessKey", keys[0]).option("secretKey", keys[1])
    return reader.option("topic", "SparkAcl").load()


def test_both_formats_sign_with_the_account_they_are_given(
    spark: Any, acl: LocalCluster, tmp_path: Path
) -> None:
    rows = [(b"acl-%d" % i,) for i in range(200)]
    df = spark.createDataFrame(rows, "body binary")
    writer = df.write.format("pymq").option("namesrv", acl.namesrv_addr)
    writer = writer.option("topic", "SparkAcl").mode("append")
    with pytest.raises(Exception, match="subOnly1 may not PUB topic SparkAcl"):
        writer.option("accessKey", SUB_ONLY[0]).option("secretKey", SUB_ONLY[1]).save()
    writer.option("accessKey", PUB_ONLY[0]).option("secretKey", PUB_ONLY[1]).save()
    for fmt in ("pymq", "pymq-jvm"):
        got = sorted(bytes(r.body) for r in read(spark, fmt, acl, SUB_ONLY).collect())
        assert got == sorted(r[0] for r in rows), fmt
        with pytest.raises(Exception, match="is not signed"):
            read(spark, fmt, acl, None).collect()
        with pytest.raises(Exception, match="pubOnly1 may not SUB topic SparkAcl"):
            read(spark, fmt, acl, PUB_ONLY).collect()
    # a stream reads with its account too
    stream = (
        spark.readStream.format("pymq").option("namesrv", acl.namesrv_addr)
        .option("accessKey", ADMIN[0]).option("secretKey", ADMIN[1])
        .option("topic", "SparkAcl").option("startingOffsets", "earliest").load()
    )  # fmt: skip
    query = (
        stream.writeStream.format("memory").queryName("acl_stream")
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(120)
    assert query.exception() is None
    assert spark.sql("select count(*) from acl_stream").first()[0] == len(rows)


def test_options_the_account_needs_both_keys(spark: Any, acl: LocalCluster) -> None:
    for fmt in ("pymq", "pymq-jvm"):
        reader = spark.read.format(fmt).option("namesrv", acl.namesrv_addr)
        with pytest.raises(Exception, match="accessKey and secretKey go together"):
            reader.option("topic", "SparkAcl").option("accessKey", "x").load().collect()
