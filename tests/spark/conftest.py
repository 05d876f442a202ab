"""One local SparkSession for the whole test session, and a pymq cluster per module."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from connector.local import LocalCluster
from connector.spark_jar import jar_path


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    # Spark's Python workers must run this interpreter (the one with pymq installed)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pymq-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.jars", jar_path())  # format("pymq-jvm"), built by make
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["PYMQ_REGISTER_NAME_SERVER_PERIOD_MS"] = "500"
    with LocalCluster(
        tmp_path_factory.mktemp("spark-cluster"), brokers=2, namesrvs=1, env=env
    ) as c:
        yield c
