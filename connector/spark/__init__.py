"""``format("pymq")``: the PySpark Python data source of pymq.

Batch and streaming reads and writes. ``pyspark_pymq.py`` at the top of
the distribution exposes ``DefaultSource``, which is how Spark finds the
source in a fresh session without ``spark.dataSource.register``; importing
it stays light (no client, no kernels) because Spark imports it in every session.
"""

from connector.spark.helpers import foreach_batch_writer
from connector.spark.source import PyMQDataSource

__all__ = ["PyMQDataSource", "foreach_batch_writer"]
