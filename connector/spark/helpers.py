"""Writing a streaming aggregation's updates to pymq (``outputMode("update")``).

A Python stream writer (``writeStream.format("pymq")``) takes append mode
only: with ``outputMode("update")`` the query starts and then fails at its
first micro-batch (``StreamingQueryException``: "requirement failed: pymq
does not support Update mode", PySpark 4.3; Spark asks the sink for
``SupportsStreamingUpdateAsAppend``, which Python data sources do not
offer). ``foreachBatch`` runs in every mode, so the shortest correct path is
a function that writes each micro-batch with the batch sink::

    counts.writeStream.outputMode("update").foreachBatch(
        foreach_batch_writer(namesrv=ns, topic="counts", key_column="word", json_body=True)
    ).start()

Delivery is at-least-once: Spark runs a micro-batch again after a failure
and its rows are sent again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connector.errors import ConfigError
from connector.spark.options import WriteOptions

__all__ = ["foreach_batch_writer"]


def foreach_batch_writer(
    *,
    namesrv: str | None = None,
    topic: str | None = None,
    key_column: str | None = None,
    json_body: bool = False,
    **options: Any,
) -> Callable[[Any, int], None]:
    """A function for ``writeStream.foreachBatch`` that writes every micro-batch to pymq.

    ``namesrv``, ``topic`` and ``options`` are the sink's write options
    (``batchSize=500``, ``producerGroup="g"``; values become strings).
    ``json_body``: each row becomes a JSON object in ``body`` (every
    column), for frames without a ``body`` column such as aggregations.
    ``key_column``: that column's value is the row's ``shardingKey`` and
    ``keys``, so every update of a key lands in one queue, in batch order.
    The options are checked now, on the driver: a bad one raises
    ``ConfigError`` before the query starts.
    """
    given = {k: _text(v) for k, v in options.items()}
    if namesrv is not None:
        given["namesrv"] = namesrv
    if topic is not None:
        given["topic"] = topic
    if "deliveryguarantee" in {k.lower() for k in given}:
        raise ConfigError(
            "option deliveryGuarantee: foreachBatch writes are at-least-once (a micro-batch "
            "runs again after a failure); use writeStream.format('pymq') for other guarantees"
        )
    if json_body and "topic" not in given:
        raise ConfigError("json_body=True needs the topic option (every column goes into the body)")
    WriteOptions.parse(given)

    def write(batch: Any, batch_id: int) -> None:
        frame = _shape(batch, key_column=key_column, json_body=json_body)
        frame.write.format("pymq").mode("append").options(**given).save()

    return write


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _shape(batch: Any, *, key_column: str | None, json_body: bool) -> Any:
    """The micro-batch in the sink's columns."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    names = batch.columns
    if key_column is not None and key_column not in names:
        raise ConfigError(f"key_column {key_column!r} is not a column of the stream: {names}")
    cols = []
    if json_body:
        cols.append(F.to_json(F.struct(*[F.col(f"`{n}`") for n in names])).alias("body"))
    elif "body" in names:
        cols += [
            F.col(f"`{n}`") for n in names if n not in {"shardingKey", "keys"} or not key_column
        ]
    else:
        raise ConfigError("the stream has no body column; pass json_body=True to send rows as JSON")
    if key_column is not None:
        key = F.col(f"`{key_column}`").cast("string")
        cols += [key.alias("shardingKey"), key.alias("keys")]
    return batch.select(*cols)
