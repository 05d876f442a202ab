"""``format("pymq")``: the PySpark Python data source of pymq.

Batch read and write today; streaming arrives next. ``pyspark_pymq.py`` at
the top of the distribution exposes ``DefaultSource``, which is how Spark
finds the source in a fresh session without ``spark.dataSource.register``.
"""

from connector.spark.source import PyMQDataSource

__all__ = ["PyMQDataSource"]
