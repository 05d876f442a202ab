"""One set of cases for both readers: options (``fixtures/read_options.json``) and
pull answers (``fixtures/records.json``, written by ``fixtures/make_records.py``).

Each case is an option map and what it must parse to (the fields it names)
or the error it must raise, word for word (``error_prefix``: its start, where
the rest is a regex engine's own words). ``format("pymq")``'s
``ReadOptions.parse`` and ``format("pymq-jvm")``'s ``ReadOptions.java`` each
replay every case: the Java one through a plain ``java`` process (the
fixture runner in ``jvm/test/``, compiled here against the jar), no Spark,
no cluster. Both load their option names from ``connector/spark/options.json``.

A record case is a pull answer (the stored records byte for byte: UNIQ_KEY and
offset msgIds, tags, keys, properties, a zlib body, a property named twice, a
value that is not UTF-8), the range end and tags it is read with, and the
rows it must give; ``format("pymq")``'s ``records_to_batch`` and
``format("pymq-jvm")``'s ``Columns`` (``RecordFixtures.java``) decode each.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyspark
import pytest

from connector.errors import PyMQError
from connector.spark.columnar import arrow_schema, records_to_batch
from connector.spark.options import (
    READ_OPTIONS,
    READ_SCHEMA,
    SPARK_OPTIONS,
    WRITE_OPTIONS,
    ReadOptions,
)
from connector.spark_jar import jar_path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).with_name("fixtures") / "read_options.json"
RECORDS = FIXTURES.with_name("records.json")
TESTS = ROOT / "jvm" / "test" / "io" / "pymq" / "spark"
RUNNER = TESTS / "OptionFixtures.java"
CASES: list[dict[str, Any]] = json.loads(FIXTURES.read_text())
RECORD_CASES: list[dict[str, Any]] = json.loads(RECORDS.read_text())


def _json(value: Any) -> Any:
    """As JSON has it (queue ids as strings, tuples as lists)."""
    return json.loads(json.dumps(value))


def python_view(o: ReadOptions) -> dict[str, Any]:
    """``ReadOptions`` in the fixtures' names (the Java runner's ``view``)."""
    return _json(
        {
            "namesrv": o.namesrv,
            "topics": list(o.topics),
            "subscribePattern": o.pattern.pattern if o.pattern is not None else None,
            "assign": o.assign,
            "startingOffsets": o.starting,
            "endingOffsets": o.ending,
            "startingTimestamp": o.starting_timestamp,
            "startingOffsetsByTimestamp": o.starting_by_timestamp,
            "startingOffsetsByTimestampStrategy": o.starting_timestamp_strategy,
            "endingTimestamp": o.ending_timestamp,
            "endingOffsetsByTimestamp": o.ending_by_timestamp,
            "tags": o.tags,
            "failOnDataLoss": o.fail_on_data_loss,
            "pullBatchSize": o.pull_batch_size,
            "minPartitions": o.min_partitions,
            "maxRecordsPerPartition": o.max_records_per_partition,
            "consumerGroup": o.consumer_group,
            "signed": o.security.access_key is not None,
            "tls": o.security.tls,
        }
    )


def python_results() -> dict[str, dict[str, Any]]:
    out = {}
    for case in CASES:
        try:
            out[case["name"]] = {
                "parsed": python_view(ReadOptions.parse(case["options"], stream=False))
            }
        except PyMQError as exc:  # ConfigError, or a name error (InvalidTopicError, ...)
            out[case["name"]] = {"error": exc.message}
    return out


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, Path], Any]:
    """Runs a fixture runner of ``jvm/test`` (compiled against the jar) on a file."""
    if shutil.which("javac") is None:
        pytest.skip("no JDK: format('pymq-jvm') is built with javac")
    classes = tmp_path_factory.mktemp("fixture-classes")
    spark_jars = str(Path(pyspark.__file__).parent / "jars" / "*")
    cp = os.pathsep.join([jar_path(), spark_jars])
    subprocess.run(
        ["javac", "--release", "17", "-Xlint:all", "-Xlint:-path", "-Werror",
         "-d", str(classes), "-cp", cp, *map(str, sorted(TESTS.glob("*.java")))],
        check=True, timeout=120,
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYMQ_NAMESRV"}

    def run(main: str, fixtures: Path) -> Any:
        out = subprocess.run(
            ["java", "-cp", os.pathsep.join([str(classes), cp]), f"io.pymq.spark.{main}",
             str(fixtures)],
            check=True, capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        return json.loads(out.stdout)

    return run


@pytest.fixture(scope="module")
def java_results(java: Callable[[str, Path], Any]) -> dict[str, dict[str, Any]]:
    results = java("OptionFixtures", FIXTURES)
    return {r["name"]: {k: v for k, v in r.items() if k != "name"} for r in results}


def _check(case: dict[str, Any], got: dict[str, Any]) -> None:
    if "error" in case:
        assert got == {"error": case["error"]}
    elif "error_prefix" in case:
        assert list(got) == ["error"] and got["error"].startswith(case["error_prefix"]), got
    else:
        assert "parsed" in got, got
        assert {k: got["parsed"][k] for k in case["expect"]} == case["expect"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_format_pymq_replays_the_case(
    case: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYMQ_NAMESRV", raising=False)
    _check(case, python_results()[case["name"]])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_format_pymq_jvm_replays_the_case(
    case: dict[str, Any], java_results: dict[str, dict[str, Any]]
) -> None:
    _check(case, java_results[case["name"]])


def test_both_load_their_names_from_one_file() -> None:
    spec = json.loads((ROOT / "connector" / "spark" / "options.json").read_text())
    assert (set(spec["read"]), set(spec["write"]), set(spec["spark"])) == (
        READ_OPTIONS, WRITE_OPTIONS, SPARK_OPTIONS,
    )  # fmt: skip
    java = (ROOT / "jvm" / "src" / "io" / "pymq" / "spark" / "ReadOptions.java").read_text()
    assert 'getResourceAsStream("options.json")' in java
    assert '"subscribePattern"' not in java.split("private static final JsonNode NAMES")[0]


def python_rows(case: dict[str, Any]) -> list[dict[str, Any]]:
    """``format("pymq")``'s rows of a record case, in the fixtures' form."""
    tags = case["tags"]
    batch = records_to_batch(
        base64.b64decode(case["records"]), arrow_schema(READ_SCHEMA),
        topic=case["topic"], broker_name=case["brokerName"], queue_id=case["queueId"],
        end=case["end"], tags=None if tags is None else {t.strip() for t in tags.split("||")},
    )  # fmt: skip
    rows = batch.to_pylist()
    for row in rows:
        row["body"] = base64.b64encode(row["body"]).decode()
        row["properties"] = [list(p) for p in row["properties"]]
        for t in ("bornTimestamp", "storeTimestamp"):
            row[t] = int(row[t].timestamp() * 1_000_000)
    return rows


@pytest.mark.parametrize("case", RECORD_CASES, ids=[c["name"] for c in RECORD_CASES])
def test_format_pymq_decodes_the_records(case: dict[str, Any]) -> None:
    assert python_rows(case) == case["rows"]


def test_format_pymq_jvm_decodes_the_records(java: Callable[[str, Path], Any]) -> None:
    got = {r["name"]: r["rows"] for r in java("RecordFixtures", RECORDS)}
    for case in RECORD_CASES:
        assert got[case["name"]] == case["rows"], case["name"]


def test_the_record_cases_cover_what_they_say() -> None:
    rows = [r for c in RECORD_CASES for r in c["rows"]]
    props = [dict(r["properties"]) for r in rows]
    assert any("UNIQ_KEY" not in p for p in props)  # an offset msgId
    assert any(p.get("k") == "second" for p in props)  # a property named twice
    assert any("\ufffd" in v for p in props for v in p.values())  # not UTF-8
    assert any(base64.b64decode(r["body"]).startswith(b"inflated") for r in rows)  # zlib
    assert any(len(c["rows"]) < 4 for c in RECORD_CASES if c["tags"])  # filtered by tag
