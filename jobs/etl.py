"""Topic-to-topic streaming ETL that survives restarts (a template to adapt).

    python jobs/etl.py --namesrv 127.0.0.1:9876 --source-topic in --sink-topic out \\
        --checkpoint /tmp/etl-ck [--available-now] [--consumer-group etl] [--exactly-once]
    spark-submit jobs/etl.py ...

Copies each message unchanged (body, tags, keys) and adds the property
``etl_source_msg_id`` (the source message's msgId) so readers can drop the
duplicates at-least-once delivery may bring after a crash. With
``--exactly-once`` (``deliveryGuarantee=exactly-once``) there are none: a
micro-batch's messages become visible when Spark commits it, once, even if
the job is killed (``kill -9``) at any point and restarted. Progress lives in
the checkpoint: a restarted job goes on where the last committed micro-batch
ended. Replace ``transform`` with your own logic.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_session import get_spark


def transform(df: Any) -> Any:
    """The ETL step: here a copy that records where each message came from."""
    # map_filter first: a message that already went through an ETL keeps one source id
    return df.selectExpr(
        "body",
        "tags",
        "keys",
        "map_concat(map_filter(properties, (k, v) -> k != 'etl_source_msg_id'), "
        "map('etl_source_msg_id', msgId)) as properties",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--source-topic", required=True)
    ap.add_argument("--sink-topic", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--available-now", action="store_true", help="drain what is there, then exit")
    ap.add_argument("--consumer-group", default=None, help="commit offsets so lag is visible")
    ap.add_argument("--max-per-trigger", type=int, default=10_000)
    ap.add_argument(
        "--exactly-once", action="store_true", help="each source message in the sink once"
    )
    args = ap.parse_args(argv)
    spark = get_spark("pymq-etl")
    reader = (
        spark.readStream.format("pymq")
        .option("namesrv", args.namesrv)
        .option("topic", args.source_topic)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", str(args.max_per_trigger))
    )
    if args.consumer_group:
        reader = reader.option("consumerGroup", args.consumer_group)
    writer = (
        transform(reader.load())
        .writeStream.format("pymq")
        .option("namesrv", args.namesrv)
        .option("topic", args.sink_topic)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.exactly_once:
        writer = writer.option("deliveryGuarantee", "exactly-once")
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    print(
        f"etl {args.source_topic} -> {args.sink_topic} running (checkpoint {args.checkpoint})",
        flush=True,
    )
    query.awaitTermination()
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    print(f"etl stopped after {rows:,} rows in this run", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
