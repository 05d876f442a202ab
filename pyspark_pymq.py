"""Lets Spark find ``format("pymq")`` with no ``spark.dataSource.register`` call.

PySpark looks for installed top-level modules named ``pyspark_*`` that
define ``DefaultSource`` (a ``DataSource`` subclass) and registers each one
under its ``name()``.
"""

from connector.spark.source import PyMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
