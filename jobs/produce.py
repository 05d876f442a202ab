"""Write a DataFrame into a pymq topic through the sink (the full producer path).

    python jobs/produce.py --namesrv 127.0.0.1:9876 --topic events --rows 100000
    spark-submit jobs/produce.py --namesrv ... --topic ... --rows N

Rows are synthetic events: body ``event-<id>``, tags ``even``/``odd``, keys
``k<id>``, a ``seq`` property.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_session import get_spark


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--namesrv", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args(argv)
    spark = get_spark("pymq-produce")
    df = spark.range(0, args.rows, numPartitions=args.partitions).selectExpr(
        "cast(concat('event-', id) as binary) as body",
        "if(id % 2 = 0, 'even', 'odd') as tags",
        "concat('k', id) as keys",
        "map('seq', cast(id as string)) as properties",
    )
    t0 = time.perf_counter()
    df.write.mode("append").format("pymq").option("namesrv", args.namesrv).option(
        "topic", args.topic
    ).save()
    took = time.perf_counter() - t0
    print(
        f"produced {args.rows:,} rows into {args.topic} in {took:.1f} s "
        f"({args.rows / took:,.0f} rows/s)",
        flush=True,
    )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
