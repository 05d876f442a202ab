"""format("pymq-jvm"): pymq's batch source read in Spark's JVM (jvm/), with format("pymq")'s
options and rows. Each read here is compared with the same read through format("pymq"),
column for column, against a real two-broker cluster; then what only the JVM source does
(column pruning) and its errors."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connector import Message, Producer
from connector.client.connection import RemotingConnection
from connector.local import LocalCluster
from connector.protocol.batch import encode_batch
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.spark.options import READ_OPTIONS
from connector.spark_jar import jar_path
from tests.support.cluster import create_topic
from tests.support.processes import pinned_port

TOPIC = "JvmT"
OTHER = "JvmOther"
N = 2000
LATEST = {"startingOffsetsByTimestampStrategy": "latest"}
NOT_A_COLUMN = "column bdy is not in pymq's read schema; did you mean body?"


@pytest.fixture
def cluster_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}


def raw_send(addr: str, topic: str, queue_id: int, body: bytes, props: bytes) -> None:
    """A one-message SEND_BATCH_MESSAGE whose properties are these bytes exactly (no
    UNIQ_KEY unless named; not UTF-8 if so given)."""
    fields = {
        "a": "PID_jvm_test", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
        "g": str(int(time.time() * 1000)), "h": "0", "i": "", "j": "0", "k": "false",
        "m": "true",
    }  # fmt: skip
    frame = encode_batch([(body, 0, props)])
    conn = RemotingConnection(addr)
    try:
        resp = conn.invoke(RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, fields, frame), 10)
    finally:
        conn.close()
    assert resp.code == ResponseCode.SUCCESS, resp


@pytest.fixture(scope="module")
def filled(cluster: LocalCluster) -> Iterator[str]:
    """TOPIC (4 queues on each of 2 brokers): keyed, tagged messages with properties, bodies
    large enough to be stored compressed, and records without UNIQ_KEY, with a property
    named twice and with one that is not UTF-8; OTHER: a second topic for patterns."""
    ns = cluster.namesrv_addr
    create_topic(cluster, TOPIC)
    create_topic(cluster, OTHER)
    with Producer(group="jvm-fill", namesrv=ns) as producer:
        for k in range(0, N, 100):
            producer.send_batch(
                [
                    Message(
                        topic=TOPIC,
                        body=b"row-%d" % i,
                        tags="A" if i % 3 else "B",
                        keys=[f"k{i}", "shared"] if i % 5 == 0 else None,
                        properties={"n": str(i), "ü": "é"},
                    )
                    for i in range(k, k + 100)
                ]
            )
        for i in range(20):  # compressed on the way (above the producer's 4 KiB threshold)
            producer.send(Message(topic=TOPIC, body=(b"big-%d " % i) * 2000, tags="A"))
        producer.send_batch([Message(topic=OTHER, body=b"other-%d" % i) for i in range(50)])
    addr = cluster.brokers[0].addr
    raw_send(addr, TOPIC, 1, b"no-uniq-key", b"TAGS\x01A\x02")
    raw_send(addr, TOPIC, 2, b"twice", b"p\x01first\x02TAGS\x01A\x02p\x01second\x02")
    raw_send(addr, TOPIC, 3, b"latin-1", b"TAGS\x01A\x02x\x01caf\xe9\x02")
    yield ns


def rows(spark: Any, fmt: str, ns: str, columns: str = "*", **options: str) -> list[dict]:
    df = spark.read.format(fmt).option("namesrv", ns).options(**options).load()
    got = [r.asDict(recursive=True) for r in df.select(columns).collect()]
    return sorted(got, key=lambda r: json.dumps(r, default=str, sort_keys=True))


def same(spark: Any, ns: str, **options: str) -> list[dict]:
    """The read through both formats: equal, every column; the rows."""
    python = rows(spark, "pymq", ns, **options)
    jvm = rows(spark, "pymq-jvm", ns, **options)
    assert len(jvm) == len(python)
    assert jvm == python
    return jvm


def test_every_row_and_column_as_format_pymq(spark: Any, filled: str) -> None:
    got = same(spark, filled, topic=TOPIC)
    assert len(got) == N + 20 + 3
    by_body = {bytes(r["body"]): r for r in got}
    assert by_body[b"no-uniq-key"]["msgId"] and len(by_body[b"no-uniq-key"]["msgId"]) == 32
    assert by_body[b"twice"]["properties"]["p"] == "second"
    assert by_body[b"latin-1"]["properties"]["x"] == "caf\ufffd"
    assert by_body[(b"big-3 ") * 2000]["tags"] == "A"
    assert by_body[b"row-10"]["keys"] == "k10 shared" and by_body[b"row-11"]["keys"] is None
    assert {r["brokerName"] for r in got} == {"broker-a", "broker-b"}


@pytest.mark.parametrize(
    "options",
    [
        {"topic": TOPIC, "tags": "B"},
        {"topic": TOPIC, "tags": "A || B"},
        {"topic": f"{TOPIC},{OTHER},{TOPIC}"},
        {"subscribePattern": "Jvm.*"},
        {"assign": json.dumps({TOPIC: {"broker-b": [0, 3]}})},
        {
            "topic": TOPIC,
            "startingOffsets": json.dumps({TOPIC: {"broker-a": {"0": 40, "1": -1}}}),
            "endingOffsets": json.dumps({TOPIC: {"broker-a": {"0": 90}, "broker-b": {"2": -2}}}),
        },
        {"topic": TOPIC, "startingTimestamp": "0"},
        {"topic": TOPIC, "endingTimestamp": "0"},
        {"topic": TOPIC, "startingTimestamp": str(2**41), **LATEST},
    ],
    ids=[
        "tag", "tags", "two-topics", "pattern", "assign", "offsets", "from-time", "to-time",
        "past-end-latest",
    ],
)  # fmt: skip
def test_options_read_what_format_pymq_reads(
    spark: Any, filled: str, options: dict[str, str]
) -> None:
    same(spark, filled, **options)


def test_splits_cover_each_range_exactly(spark: Any, filled: str) -> None:
    base = spark.read.format("pymq-jvm").option("namesrv", filled).option("topic", TOPIC)
    whole = base.load()
    split = base.option("minPartitions", "40").option("maxRecordsPerPartition", "30").load()
    assert whole.rdd.getNumPartitions() == 8
    assert split.rdd.getNumPartitions() > 40
    key = ["brokerName", "queueId", "queueOffset"]
    assert sorted(split.select(*key).collect()) == sorted(whole.select(*key).collect())
    assert split.select(*key).distinct().count() == whole.count()


def test_only_the_columns_a_query_uses_are_read(spark: Any, filled: str) -> None:
    df = spark.read.format("pymq-jvm").option("namesrv", filled).option("topic", TOPIC).load()
    plan = df.select("body", "queueOffset")._jdf.queryExecution().executedPlan().toString()
    assert re.search(r"BatchScan pymq-jvm\[queueOffset#\d+L, body#\d+\]", plan), plan
    python = rows(spark, "pymq", filled, "body", topic=TOPIC)
    assert rows(spark, "pymq-jvm", filled, "body", topic=TOPIC) == python


def test_a_given_schema_picks_columns(spark: Any, filled: str) -> None:
    schema = "queueOffset long, msgId string"
    python = spark.read.format("pymq").schema(schema).option("namesrv", filled)
    jvm = spark.read.format("pymq-jvm").schema(schema).option("namesrv", filled)
    got = jvm.option("topic", TOPIC).load()
    assert got.columns == ["queueOffset", "msgId"]
    assert sorted(got.collect()) == sorted(python.option("topic", TOPIC).load().collect())


@pytest.mark.parametrize(
    ("options", "schema", "message"),
    [
        ({"topc": TOPIC}, None, "option topc is not a pymq read option; did you mean topic?"),
        ({"topic": TOPIC, "assign": "{}"}, None, "give exactly one of the options topic"),
        ({}, None, "give exactly one of the options topic, subscribePattern, assign (none given)"),
        ({"topic": TOPIC, "pullBatchSize": "0"}, None, "option pullBatchSize must be >= 1"),
        ({"topic": TOPIC, "failOnDataLoss": "maybe"}, None, "is not true or false"),
        ({"topic": "bad topic"}, None, "has characters outside"),
        ({"topic": TOPIC, "startingOffsets": "first"}, None, "earliest, latest or JSON offsets"),
        ({"topic": TOPIC, "accessKey": "a"}, None, "accessKey and secretKey go together"),
        ({"topic": TOPIC, "maxTriggerDelay": "soon"}, None, "is not a duration like 500ms"),
        (
            {"topic": TOPIC, "maxOffsetsPerTrigger": "5", "maxMessagesPerTrigger": "5"},
            None,
            "options maxMessagesPerTrigger and maxOffsetsPerTrigger are the same; give one",
        ),
        ({"topic": TOPIC}, "bdy binary", NOT_A_COLUMN),
        ({"topic": TOPIC}, "body string", "column body is binary in pymq's read schema, not str"),
    ],
)  # fmt: skip
def test_bad_options_are_refused_with_their_reason(
    spark: Any, filled: str, options: dict[str, str], schema: str | None, message: str
) -> None:
    reader = spark.read.format("pymq-jvm").option("namesrv", filled).options(**options)
    if schema is not None:
        reader = reader.schema(schema)
    with pytest.raises(Exception) as info:
        reader.load().collect()
    assert message in str(info.value)


def test_errors_found_by_asking_the_cluster(spark: Any, filled: str) -> None:
    def error(**options: str) -> str:
        with pytest.raises(Exception) as info:
            spark.read.format("pymq-jvm").options(**options).load().collect()
        return str(info.value)

    assert "No route info of this topic: JvmNope" in error(namesrv=filled, topic="JvmNope")
    assert "option assign: no such queue JvmT:broker-a:9" in error(
        namesrv=filled, assign=json.dumps({TOPIC: {"broker-a": [9]}})
    )
    assert "has no message stored at or after" in error(
        namesrv=filled, topic=TOPIC, startingTimestamp=str(2**41)
    )
    assert "no NameServer answered" in error(namesrv="127.0.0.1:1", topic=TOPIC)


def test_a_broker_restarted_on_its_address_between_reads(
    spark: Any, tmp_path: Path, cluster_env: dict[str, str]
) -> None:
    """The executor keeps its connections (planning and reading): after the broker restarts
    on the same address, the next read replaces the ones it closed instead of failing."""
    port = pinned_port()  # REST at port + 4
    pinned = ["--port", str(port)]
    with LocalCluster(tmp_path, brokers=1, broker_args=pinned, env=cluster_env) as solo:
        ns = solo.namesrv_addr
        create_topic(solo, "JvmRestart", queues=2)
        with Producer(group="jvm-restart", namesrv=ns) as producer:
            producer.send_batch([Message(topic="JvmRestart", body=b"r%d" % i) for i in range(30)])
        read = spark.read.format("pymq-jvm").option("namesrv", ns).option("topic", "JvmRestart")
        assert read.load().count() == 30
        solo.restart_broker("broker-a")
        assert read.load().count() == 30


def test_the_jar_and_its_option_names(spark: Any) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "connector.cli", "spark-jar"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(out.stdout.strip()) == Path(jar_path())
    assert Path(jar_path()).is_file()
    names = spark.sparkContext._jvm.io.pymq.spark.ReadOptions.readNames()
    assert names.split(",") == sorted(READ_OPTIONS)


def test_streams_are_refused_for_now(spark: Any, filled: str) -> None:
    reader = spark.readStream.format("pymq-jvm").option("namesrv", filled).option("topic", TOPIC)
    with pytest.raises(Exception, match="does not support streamed reading"):
        reader.load()
