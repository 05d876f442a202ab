"""A SparkSession for the jobs: the one spark-submit made, or a local one.

Spark's Python workers must run an interpreter that has pymq installed; when
nothing says otherwise, that is the interpreter running the job.
"""

from __future__ import annotations

import os
import sys
from typing import Any


def get_spark(app_name: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # noqa: PLC0415 - after PYSPARK_PYTHON is set

    builder = SparkSession.builder.appName(app_name)
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain `python job.py`: no spark-submit
        builder = builder.master(os.environ.get("PYMQ_SPARK_MASTER", "local[2]"))
    return builder.config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"]).getOrCreate()
