"""Where the jar of ``format("pymq-jvm")`` is, and ``pymq spark-jar``, which prints it.

``format("pymq-jvm")`` is pymq's batch source read in Spark's JVM (its Java code is in
``jvm/``): the options and rows of ``format("pymq")``, several times the rows a second,
because no row passes through a Python worker. Spark loads it from ``spark.jars``::

    spark = SparkSession.builder.config("spark.jars", jar_path()).getOrCreate()

This module stays light (no pyspark import): the CLI loads it to build its help.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from connector.errors import ConfigError

__all__ = ["JAR", "jar_path", "register"]

JAR = Path(__file__).resolve().parent / "spark" / "jars" / "pymq-spark.jar"


def jar_path() -> str:
    """The jar's absolute path (for ``spark.jars``); ConfigError if it was not built."""
    if not JAR.is_file():
        raise ConfigError(
            f"{JAR} is not built: run `make jar` in pymq's checkout (it needs a JDK 17+)"
        )
    return str(JAR)


def register(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        print(jar_path())
    except ConfigError as exc:
        print(f"pymq spark-jar: {exc}", file=sys.stderr)
        return 1
    return 0
