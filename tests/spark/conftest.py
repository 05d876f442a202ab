"""One local SparkSession for the whole test session (the pymq cluster per module is the
shared ``cluster`` fixture of ``tests.support.fixtures``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

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
