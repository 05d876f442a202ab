"""Lets Spark find ``format("pymq")`` with no ``spark.dataSource.register`` call.

PySpark looks for installed top-level modules named ``pyspark_*`` that
define ``DefaultSource`` (a ``DataSource`` subclass) and registers each one
under its ``name()``. It imports every such module in each session and one
that fails to import fails every lookup, other formats' too: so where pymq's
spark extra is not installed (pyarrow missing), ``DefaultSource`` still loads
and only a use of ``format("pymq")`` fails, with one line naming the extra.
"""

from __future__ import annotations

from typing import Any

from connector.extras import install_hint, missing

__all__ = ["DefaultSource"]

DefaultSource: Any
try:
    from connector.spark.source import PyMQDataSource

    DefaultSource = PyMQDataSource
except ModuleNotFoundError:
    # pyspark is running this import: what else of the extra is missing (read from pymq's
    # metadata only on this path: Spark imports this module in every session and worker)
    _ABSENT = [name for name in missing("spark") if name != "pyspark"]
    if not _ABSENT:
        raise  # not a missing extra: a broken install, shown as it is
    from pyspark.sql.datasource import DataSource

    class MissingSparkExtra(DataSource):  # type: ignore[misc]
        """``format("pymq")`` on a host without pymq's spark extra: refused on use."""

        @classmethod
        def name(cls) -> str:
            return "pymq"

        def __init__(self, options: dict[str, str]) -> None:
            raise ImportError(f'format("pymq") {install_hint("spark", _ABSENT)}')

    DefaultSource = MissingSparkExtra
