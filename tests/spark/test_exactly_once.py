"""deliveryGuarantee=exactly-once with a real SparkSession and two brokers: a task that
fails after sending part of its rows, a batch Spark runs again after its commit (the
driver died before recording it), a one-off write; each source row in the sink once."""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from connector.local import LocalCluster
from tests.support.cluster import create_topic
from tests.support.spark import fill_queues
from tests.support.waits import wait_until

ROWS = 3000


def sink_bodies(spark: Any, cluster: LocalCluster, topic: str) -> Counter[bytes]:
    df = spark.read.format("pymq").option("namesrv", cluster.namesrv_addr).option("topic", topic)
    return Counter(bytes(r.body) for r in df.load().select("body").collect())


def etl(spark: Any, cluster: LocalCluster, source: str, sink: str, ck: Path, fail: Path) -> Any:
    """source -> sink, exactly-once, 500 rows a micro-batch, requests of 100 rows. While
    the file ``fail`` exists, the task reading row 77 (rows 277, 477, ... share its queue)
    fails, once other tasks of its batch have stored their halves."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType

    marker = str(fail)
    brokers = [b.http_addr for b in cluster.brokers]

    def stored_halves() -> int:
        return sum(
            httpx.get(f"http://{a}/transactions", timeout=10).json()["halves"] for a in brokers
        )

    def check(body: bytes) -> bytes:
        if int(body[4:].split()[0]) % 200 == 77 and os.path.exists(marker):
            deadline = time.monotonic() + 60  # bounded: the worker cannot import tests/
            while stored_halves() == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            raise RuntimeError("the task fails after other tasks of its batch sent requests")
        return body

    passthrough = F.udf(check, BinaryType())
    stream = (
        spark.readStream.format("pymq").option("namesrv", cluster.namesrv_addr)
        .option("topic", source).option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "500").load()
    )  # fmt: skip
    return (
        stream.select(passthrough("body").alias("body"), "tags")
        .writeStream.format("pymq").option("namesrv", cluster.namesrv_addr)
        .option("topic", sink).option("deliveryGuarantee", "exactly-once")
        .option("batchSize", "100").option("checkpointLocation", str(ck))
        .trigger(availableNow=True).start()
    )  # fmt: skip


def half_states(cluster: LocalCluster) -> Counter[str]:
    """Halves stored and halves undecided, on both brokers."""
    out: Counter[str] = Counter()
    for b in cluster.brokers:
        tx = httpx.get(f"http://{b.http_addr}/transactions", timeout=10).json()
        out["halves"] += tx["halves"]
        out["undecided"] += tx["undecided"]
    return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(
        PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500",
        PYMQ_TRANSACTION_CHECK_INTERVAL_MS="300",  # strays rolled back soon
    )
    with LocalCluster(tmp_path_factory.mktemp("eo"), brokers=2, env=env) as c:
        yield c


def test_a_failed_task_and_a_rerun_batch_leave_every_row_once(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    source, sink = "EoSource", "EoSink"
    create_topic(cluster, source)
    create_topic(cluster, sink)
    sent = fill_queues(cluster.namesrv_addr, source, ROWS)
    ck, fail = tmp_path / "ck", tmp_path / "fail"
    fail.touch()
    first = etl(spark, cluster, source, sink, ck, fail)
    with pytest.raises(Exception, match="the task fails after other tasks of its batch"):
        first.awaitTermination(180)
    # the failed batch's requests were stored as halves, none visible
    assert half_states(cluster)["halves"] > 0
    assert sink_bodies(spark, cluster, sink) == Counter()
    # the restart comes after the brokers' transaction timeout: the halves are gone
    wait_until(lambda: half_states(cluster)["undecided"] == 0, 60, what="halves rolled back")
    fail.unlink()
    second = etl(spark, cluster, source, sink, ck, fail)
    second.awaitTermination(300)
    assert second.exception() is None
    assert sink_bodies(spark, cluster, sink) == Counter(sent)  # each row once
    # Spark runs the last batch again, as after a driver that died between the commit
    # and recording it in the checkpoint: the brokers answer "already committed"
    last = max(int(p.name) for p in (ck / "commits").iterdir() if p.name.isdigit())
    (ck / "commits" / str(last)).unlink()
    shutil.rmtree(ck / "commits" / f".{last}.crc", ignore_errors=True)
    (ck / "commits" / f".{last}.crc").unlink(missing_ok=True)
    third = etl(spark, cluster, source, sink, ck, fail)
    third.awaitTermination(300)
    assert third.exception() is None
    assert (ck / "commits" / str(last)).exists()  # the batch ran again
    assert sink_bodies(spark, cluster, sink) == Counter(sent)
    # its second run's halves, and the failed task's, are rolled back by the brokers
    wait_until(lambda: half_states(cluster)["undecided"] == 0, 60, what="no half left open")


def test_a_one_off_write_is_all_or_nothing(spark: Any, cluster: LocalCluster) -> None:
    topic = "EoBatchWrite"
    create_topic(cluster, topic)
    rows = [(b"w-%d" % i,) for i in range(2000)]
    df = spark.createDataFrame(rows, "body binary").repartition(3)
    (
        df.write.format("pymq").option("namesrv", cluster.namesrv_addr).option("topic", topic)
        .option("deliveryGuarantee", "exactly-once").option("batchSize", "300")
        .mode("append").save()
    )  # fmt: skip
    assert sink_bodies(spark, cluster, topic) == Counter(r[0] for r in rows)
    empty = spark.createDataFrame([], "body binary")
    (
        empty.write.format("pymq").option("namesrv", cluster.namesrv_addr).option("topic", topic)
        .option("deliveryGuarantee", "exactly-once").mode("append").save()
    )  # fmt: skip
    assert sink_bodies(spark, cluster, topic) == Counter(r[0] for r in rows)


def test_exactly_once_refuses_delayed_rows(spark: Any, cluster: LocalCluster) -> None:
    df = spark.createDataFrame([(b"x", 3)], "body binary, delayLevel int")
    with pytest.raises(Exception, match="exactly-once cannot send delayed messages"):
        (
            df.write.format("pymq").option("namesrv", cluster.namesrv_addr)
            .option("topic", "EoDelay").option("deliveryGuarantee", "exactly-once")
            .mode("append").save()
        )  # fmt: skip


def test_two_one_off_writes_in_one_foreach_batch_are_two_commits(
    spark: Any, cluster: LocalCluster, tmp_path: Path
) -> None:
    """A df.write inside a stream's foreachBatch has its own key, not the stream's: the
    second write of a micro-batch is not taken for a re-run of the first and dropped."""
    source, sink = "EoFbIn", "EoFbOut"
    create_topic(cluster, source)
    create_topic(cluster, sink)
    sent = fill_queues(cluster.namesrv_addr, source, 300)
    ns = cluster.namesrv_addr

    def twice(df: Any, _batch: int) -> None:
        for _ in range(2):
            (
                df.select("body").write.format("pymq").option("namesrv", ns)
                .option("topic", sink).option("deliveryGuarantee", "exactly-once")
                .mode("append").save()
            )  # fmt: skip

    query = (
        spark.readStream.format("pymq").option("namesrv", ns).option("topic", source)
        .option("startingOffsets", "earliest").load()
        .writeStream.foreachBatch(twice).option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(300)
    assert query.exception() is None
    assert sink_bodies(spark, cluster, sink) == Counter(sent + sent)
