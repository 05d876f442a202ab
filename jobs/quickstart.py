"""The quickstart behind `make run`: a local cluster, events in, a streaming aggregation out.

    make run                      # this job, with the defaults below
    python jobs/quickstart.py [--seconds 60] [--rate 2000] [--data-dir DIR] [--keep-data]
    spark-submit jobs/quickstart.py --seconds 15 --rate 500

Needs Java 17+ (Spark) and nothing else: the job starts its own cluster and its
own local Spark (``PYMQ_SPARK_MASTER``, default ``local[2]``; spark-submit's
master when run through it). Ctrl-C stops it cleanly at any point.

1. Starts a NameServer and two brokers (``connector.local.LocalCluster``) with
   their data and logs under ``--data-dir`` (default: a fresh temp dir, removed
   after a successful run unless ``--keep-data``), and creates the topics
   ``quickstart-events`` and ``quickstart-results`` with 8 queues on each broker.
2. Streams synthetic shop events (JSON: id, user, kind, amount, ts) from Spark's
   ``rate`` source into ``quickstart-events`` through the pymq sink, tagged with
   their kind and keyed by user.
3. Reads them back with ``readStream.format("pymq")`` (consumer group
   ``quickstart-agg``, so the brokers show its lag), counts events and sums
   amounts per kind and 10-second window (30-second watermark) and, after every
   micro-batch, writes the totals it changed into ``quickstart-results`` through
   the sink (``foreachBatch``: the sink appends, the aggregation updates).
4. Prints a progress line every few seconds; after ``--seconds`` stops the
   producing query, lets the aggregation drain the topic, then reads the
   results back in batch and prints them with a summary: counts, rates, the
   spread over the brokers and the consumer group's lag.
5. Checks the counts end to end: the events in the topic, the rows the
   aggregation read, the final totals in the results topic and a batch recount
   of the events topic must all agree. Exit code 0 if they do, 1 with a
   one-line reason if not; Spark and the cluster are stopped in every case.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_session import get_spark

from connector import Admin
from connector.errors import PyMQError
from connector.local import LocalCluster

EVENTS = "quickstart-events"
RESULTS = "quickstart-results"
GROUP = "quickstart-agg"
QUEUES = 8
KINDS = ("view", "click", "cart", "purchase")
MAX_WINDOWS_SHOWN = 15
EVENT_SCHEMA = "id long, user string, kind string, amount decimal(10,2), ts long"
RESULT_SCHEMA = (
    "window_start long, window_end long, kind string, events long, amount decimal(20,2), "
    "batch_id long"
)


class CheckFailed(Exception):
    """The end-to-end counts do not add up (or something needed never happened)."""


def say(text: str = "") -> None:
    print(text, flush=True)


def wait_for(what: str, ready: Callable[[], bool], timeout_s: float, every_s: float = 0.2) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what} within {timeout_s:.0f} s")
        time.sleep(every_s)


# -- the cluster ---------------------------------------------------------------------------


def create_topics(admin: Admin, brokers: int) -> None:
    for topic in (EVENTS, RESULTS):
        admin.create_topic(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES)

    def routed() -> bool:
        try:
            return all(
                len({q.broker_name for q in admin.topic_route(t).queues}) == brokers
                for t in (EVENTS, RESULTS)
            )
        except PyMQError:
            return False

    wait_for("the NameServer had no route to both brokers", routed, 30)


def messages_per_broker(admin: Admin, topic: str) -> dict[str, int]:
    spread: dict[str, int] = {}
    for q in admin.topic_status(topic):
        spread[q["broker_name"]] = (
            spread.get(q["broker_name"], 0) + q["max_offset"] - q["min_offset"]
        )
    return spread


def group_lag(admin: Admin, topic: str) -> int | None:
    rows = [r for r in admin.consumer_progress(GROUP) if r["topic"] == topic]
    return sum(r["lag"] for r in rows) if rows else None


# -- the Spark queries ---------------------------------------------------------------------


def start_producer(spark: Any, ns: str, rate: int, checkpoint: Path) -> Any:
    """rate source -> JSON events -> quickstart-events, through the pymq sink."""
    kinds = ", ".join(f"'{k}'" for k in ("view",) * 4 + ("click",) * 2 + ("cart", "purchase"))
    events = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", str(rate))
        .option("numPartitions", "2")
        .load()
        .selectExpr(
            "value AS id",
            "timestamp",
            f"element_at(array({kinds}), cast(pmod(xxhash64(value, 'k'), 8) AS int) + 1) AS kind",
            "concat('user-', pmod(xxhash64(value, 'user'), 50)) AS user",
        )
        .selectExpr(
            "*",
            "CASE WHEN kind IN ('cart', 'purchase') "
            "THEN cast(pmod(xxhash64(id, 'amount'), 20000) / 100 + 1 AS decimal(10,2)) "
            "ELSE cast(0 AS decimal(10,2)) END AS amount",
        )
    )
    return (
        events.selectExpr(
            "to_json(named_struct('id', id, 'user', user, 'kind', kind, 'amount', amount, "
            "'ts', unix_millis(timestamp))) AS body",
            "kind AS tags",
            "user AS keys",
        )
        .writeStream.queryName("quickstart-producer")
        .format("pymq")
        .option("namesrv", ns)
        .option("topic", EVENTS)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="2 seconds")
        .start()
    )


def start_aggregation(spark: Any, ns: str, max_per_trigger: int, checkpoint: Path) -> Any:
    """quickstart-events -> count and sum(amount) per kind and 10 s window -> quickstart-results."""
    from pyspark.sql import functions as F  # noqa: PLC0415 - pyspark after get_spark

    events = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", EVENTS)
        .option("startingOffsets", "earliest")
        .option("consumerGroup", GROUP)
        .option("maxMessagesPerTrigger", str(max_per_trigger))
        .load()
        .select(F.from_json(F.col("body").cast("string"), EVENT_SCHEMA).alias("e"))
        .select("e.*")
        .withColumn("event_time", F.timestamp_millis("ts"))
    )
    totals = (
        events.withWatermark("event_time", "30 seconds")
        .groupBy(F.window("event_time", "10 seconds"), "kind")
        .agg(F.count("*").alias("events"), F.sum("amount").alias("amount"))
    )

    # the pymq sink appends rows, so the streaming write does not take update mode; each
    # micro-batch's changed windows go out through a batch write of the sink instead
    def send_updates(changed: Any, batch_id: int) -> None:
        changed.selectExpr(
            "to_json(named_struct('window_start', unix_millis(window.start), "
            "'window_end', unix_millis(window.end), 'kind', kind, 'events', events, "
            f"'amount', amount, 'batch_id', {int(batch_id)})) AS body",
            "kind AS tags",
            "concat(kind, '@', cast(unix_millis(window.start) AS string)) AS keys",
        ).write.mode("append").format("pymq").option("namesrv", ns).option("topic", RESULTS).save()

    return (
        totals.writeStream.queryName("quickstart-aggregation")
        .outputMode("update")
        .foreachBatch(send_updates)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="2 seconds")
        .start()
    )


class Query:
    """A streaming query and its progress over restarts from its checkpoint.

    Spark waits a fixed 10 s for the Python process that plans a Python source's
    micro-batches to connect back; on a machine busy enough that starting Python takes
    longer, the query fails with "Python worker failed to connect back". That failure
    (and only that) restarts the query from its checkpoint, at most ``restarts`` times.
    """

    def __init__(self, name: str, start: Callable[[], Any], *, restarts: int = 0) -> None:
        self.name = name
        self._start = start
        self.restarts_left = restarts
        self._earlier: dict[int, Any] = {}  # progress of earlier runs, by batch id
        self.query = start()
        self.started = time.monotonic()

    def progress(self) -> dict[int, Any]:
        """Every completed micro-batch's progress (a re-run batch keeps one entry)."""
        out = dict(self._earlier)
        out.update((p["batchId"], p) for p in self.query.recentProgress)
        return out

    def input_rows(self) -> int:
        return sum(p["numInputRows"] for p in self.progress().values())

    def dropped_late(self) -> int:
        return sum(
            op["numRowsDroppedByWatermark"]
            for p in self.progress().values()
            for op in p["stateOperators"] or []
        )

    @property
    def last(self) -> Any:
        return self.query.lastProgress

    def check(self) -> None:
        exc = self.query.exception()
        if exc is None:
            if not self.query.isActive:
                raise CheckFailed(f"query {self.name} stopped unexpectedly")
            return
        text = str(exc).strip()
        if "connect back" in text.lower() and self.restarts_left > 0:
            self.restarts_left -= 1
            self._earlier = self.progress()
            say(f"  {self.name}: Spark's Python worker did not start within 10 s (a busy "
                "machine); restarting the query from its checkpoint")  # fmt: skip
            self.query = self._start()
            return
        first = text.splitlines()[0] if text else type(exc).__name__
        raise CheckFailed(f"query {self.name} failed: {first[:300]}")

    def stop(self) -> None:
        self.query.stop()


def rate_of(progress: Any) -> float:
    """Rows per second of the last micro-batch, from its progress.

    Spark's inputRowsPerSecond (rows over the time since the previous batch started); a
    query's first batch has no previous one, so then its processedRowsPerSecond.
    """
    if not progress:
        return 0.0
    return float(progress["inputRowsPerSecond"] or progress["processedRowsPerSecond"])


# -- reading back --------------------------------------------------------------------------


def final_totals(spark: Any, ns: str) -> list[Any]:
    """The last total of every (window, kind) in quickstart-results, read in batch."""
    from pyspark.sql import functions as F  # noqa: PLC0415

    results = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", RESULTS)
        .load()
        .select(F.from_json(F.col("body").cast("string"), RESULT_SCHEMA).alias("r"))
        .select("r.*")
    )
    # a window's totals went out each time they changed: the last micro-batch's are final
    rows: list[Any] = (
        results.groupBy("window_start", "window_end", "kind")
        .agg(
            F.max_by("events", "batch_id").alias("events"),
            F.max_by("amount", "batch_id").alias("amount"),
        )
        .orderBy("window_start", "kind")
        .collect()
    )
    return rows


def recount(spark: Any, ns: str) -> tuple[dict[str, tuple[int, Any]], int]:
    """A batch recount of quickstart-events: kind -> (events, sum of amounts); distinct ids."""
    events = (
        spark.read.format("pymq")
        .option("namesrv", ns)
        .option("topic", EVENTS)
        .load()
        .selectExpr(f"from_json(cast(body AS string), '{EVENT_SCHEMA}') AS e")
        .select("e.*")
        .cache()
    )
    rows = events.groupBy("kind").agg({"*": "count", "amount": "sum"}).collect()
    (distinct,) = events.selectExpr("count(DISTINCT id)").first()
    events.unpersist()
    return {r["kind"]: (int(r["count(1)"]), r["sum(amount)"]) for r in rows}, int(distinct)


def print_results(totals: list[Any]) -> dict[str, tuple[int, Any]]:
    """One line per window (events per kind, all events, their amount), then the totals."""
    windows: dict[tuple[int, int], dict[str, tuple[int, Any]]] = {}
    for r in totals:
        windows.setdefault((r["window_start"], r["window_end"]), {})[r["kind"]] = (
            r["events"],
            r["amount"],
        )
    by_kind: dict[str, tuple[int, Any]] = {}
    for cells in windows.values():
        for kind, (n, amount) in cells.items():
            n0, amount0 = by_kind.get(kind, (0, 0))
            by_kind[kind] = (n0 + n, amount0 + amount)
    head = f"  {'window':<19}" + "".join(f"{k:>9}" for k in KINDS) + f"{'events':>9}{'amount':>13}"
    rule = "  " + "-" * (len(head) - 2)

    def line(label: str, cells: dict[str, tuple[int, Any]]) -> None:
        counts = "".join(f"{cells.get(k, (0, 0))[0]:>9,}" for k in KINDS)
        events = sum(n for n, _ in cells.values())
        amount = sum(a for _, a in cells.values())
        say(f"  {label:<19}{counts}{events:>9,}{amount:>13,.2f}")

    say(head)
    say(rule)
    shown = sorted(windows.items())[-MAX_WINDOWS_SHOWN:]
    if len(windows) > len(shown):
        say(f"  ({len(windows) - len(shown)} earlier windows: in the total)")
    for (start, end), cells in shown:
        line(f"{clock(start)}-{clock(end)}", cells)
    say(rule)
    line("total", by_kind)
    return by_kind


def clock(ms: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ms / 1000))


# -- the job -------------------------------------------------------------------------------


class Progress:
    """Progress lines: events in the topic (asked of the brokers), rows the aggregation read."""

    def __init__(self, admin: Admin, producer: Query, *, every_s: float) -> None:
        self.admin = admin
        self.producer = producer
        self.agg: Query | None = None
        self.t0 = producer.started
        self.every_s = every_s
        self.next_line = self.t0 + every_s

    def in_topic(self) -> int:
        return sum(messages_per_broker(self.admin, EVENTS).values())

    def line(self) -> None:
        made = self.in_topic()
        read = self.agg.input_rows() if self.agg else 0
        pp, ap = self.producer.last, self.agg.last if self.agg else None
        took = f"{ap['durationMs']['triggerExecution'] / 1000:.1f} s" if ap else "-"
        say(f"  [{time.monotonic() - self.t0:5.1f} s] produced {made:>9,} "
            f"({rate_of(pp):>6,.0f}/s) | consumed {read:>9,} ({rate_of(ap):>6,.0f}/s) | "
            f"lag {made - read:>7,} | last aggregation batch {took}")  # fmt: skip

    def tick(self, pause_s: float, *queries: Query) -> None:
        """Pause, check the queries, print a line if one is due."""
        time.sleep(pause_s)
        for q in queries:
            q.check()
        if time.monotonic() >= self.next_line:
            self.line()
            while self.next_line <= time.monotonic():  # after a slow call: no burst of lines
                self.next_line += self.every_s


def stream(args: argparse.Namespace, progress: Progress, start_agg: Callable[[], Query]) -> float:
    """Produce until ``--seconds`` after the first events reached the topic; the stop time.

    The aggregation starts once they are there, and the clock then: the first micro-batch
    starts Spark's Python workers, which takes a while on a busy machine.
    """
    producer = progress.producer
    deadline = progress.t0 + args.startup_timeout
    while progress.in_topic() == 0:
        if time.monotonic() > deadline:
            raise CheckFailed(f"no event reached {EVENTS} within {args.startup_timeout:.0f} s")
        progress.tick(0.5, producer)
    first = time.monotonic()
    say(f"  first events in {EVENTS} after {first - progress.t0:.1f} s; starting the "
        f"aggregation and streaming for {args.seconds:g} s more")  # fmt: skip
    agg = progress.agg = start_agg()
    while (left := first + args.seconds - time.monotonic()) > 0:
        progress.tick(min(left, 0.5), producer, agg)
    # on a busy machine the producer may never pause, and its last batch is cut short:
    # "produced" is what reached the topic, so the counts still add up
    stop_between_batches(producer)
    return time.monotonic()


def stop_between_batches(query: Query, timeout_s: float = 10.0) -> None:
    """Stop the query when no micro-batch runs (or after ``timeout_s`` regardless)."""
    deadline = time.monotonic() + timeout_s
    while query.query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def drain(args: argparse.Namespace, progress: Progress) -> tuple[int, float]:
    """Wait until the aggregation read every event in the topic: (their number, when)."""
    agg = progress.agg
    assert agg is not None
    deadline = time.monotonic() + args.drain_timeout
    while True:
        produced, consumed = progress.in_topic(), agg.input_rows()
        if consumed >= produced:
            done = time.monotonic()
            break
        if time.monotonic() > deadline:
            raise CheckFailed(f"the aggregation read {consumed:,} of {produced:,} events "
                              f"within {args.drain_timeout:.0f} s")  # fmt: skip
        progress.tick(0.2, agg)
    # Spark commits a micro-batch's offsets to the source when it plans the next one; the
    # watermark's move brings one more: a bounded moment for the group's lag to reach 0
    deadline = time.monotonic() + 15
    while group_lag(progress.admin, EVENTS) != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    progress.line()
    stop_between_batches(agg)
    return produced, done


def run(args: argparse.Namespace, data_dir: Path, stack: list[Callable[[], object]]) -> None:
    say(f"starting a NameServer and 2 brokers; data and logs under {data_dir}")
    cluster = LocalCluster(data_dir, brokers=2, namesrvs=1)
    stack.append(cluster.stop)
    cluster.start()
    ns = cluster.namesrv_addr
    for proc in [*cluster.namesrvs, *cluster.brokers]:
        say(f"  {proc.name:<10} remoting {proc.addr}, http http://{proc.http_addr}")
    admin = Admin(namesrv=ns)
    stack.append(admin.close)
    create_topics(admin, len(cluster.brokers))
    say(f"created {EVENTS} and {RESULTS}: {QUEUES} queues on each broker")

    say("starting Spark")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # plain python: keep the console readable
        os.environ.setdefault(
            "PYSPARK_SUBMIT_ARGS", "--conf spark.ui.showConsoleProgress=false pyspark-shell"
        )
    spark = get_spark("pymq-quickstart")
    stack.append(spark.stop)
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")
    checkpoints = data_dir / "checkpoints"
    producer = Query(
        "quickstart-producer",
        lambda: start_producer(spark, ns, args.rate, checkpoints / "producer"),
    )
    stack.append(producer.stop)
    ui = spark.sparkContext.uiWebUrl
    say(f"streaming {args.rate:,} events/s into {EVENTS}" + (f" (Spark UI: {ui})" if ui else ""))

    def start_agg() -> Query:
        agg = Query(
            "quickstart-aggregation",
            lambda: start_aggregation(spark, ns, args.max_per_trigger, checkpoints / "agg"),
            restarts=3,
        )
        stack.append(agg.stop)
        return agg

    progress = Progress(admin, producer, every_s=args.progress_every)
    stopped = stream(args, progress, start_agg)
    say(f"producer stopped; the aggregation drains {EVENTS}")
    produced, drained = drain(args, progress)
    agg = progress.agg
    assert agg is not None
    consumed, late = agg.input_rows(), agg.dropped_late()
    batches = sum(1 for p in agg.progress().values() if p["numInputRows"])

    say()
    say(f"results: the last totals of every window in {RESULTS} (read back in batch)")
    totals = final_totals(spark, ns)
    by_kind = print_results(totals)
    counted, distinct = recount(spark, ns)

    say()
    say("summary")
    produce_s, consume_s = stopped - producer.started, drained - agg.started
    say(f"  produced    {produced:>9,} events into {EVENTS} in {produce_s:.1f} s "
        f"({produced / produce_s:,.0f} msgs/s)")  # fmt: skip
    say(f"  consumed    {consumed:>9,} events by the aggregation in {consume_s:.1f} s "
        f"({consumed / consume_s:,.0f} msgs/s, {batches} micro-batches)")  # fmt: skip
    say(f"  results     {len(totals):>9,} window totals, from "
        f"{sum(messages_per_broker(admin, RESULTS).values()):,} messages in {RESULTS}")  # fmt: skip
    for name, n in sorted(messages_per_broker(admin, EVENTS).items()):
        share = 100 * n / produced if produced else 0.0
        say(f"  {name:<11} {n:>9,} events of {EVENTS} ({share:.1f}%, {QUEUES} queues)")
    lag = group_lag(admin, EVENTS)
    say(f"  group lag   {'-' if lag is None else f'{lag:,}':>9} ({GROUP} on {EVENTS})")

    check_counts(produced, consumed, late, by_kind, counted, distinct)
    say(f"quickstart OK: produced == consumed == {produced:,} events, "
        "and the results agree with a batch recount")  # fmt: skip


def check_counts(
    produced: int,
    consumed: int,
    late: int,
    by_kind: dict[str, tuple[int, Any]],
    counted: dict[str, tuple[int, Any]],
    distinct: int,
) -> None:
    """Events in the topic = rows the aggregation read = the results' totals = a recount."""
    result_events = sum(n for n, _ in by_kind.values())
    if produced == 0:
        raise CheckFailed("nothing was produced")
    if late:
        raise CheckFailed(f"the watermark dropped {late:,} late events")
    if consumed != produced:
        raise CheckFailed(f"produced {produced:,} events but the aggregation read {consumed:,}")
    if result_events != produced:
        raise CheckFailed(f"produced {produced:,} events but the results count {result_events:,}")
    if distinct != produced:
        raise CheckFailed(f"{produced:,} events in {EVENTS} but {distinct:,} distinct ids")
    if counted != by_kind:
        raise CheckFailed(f"per kind, the results {by_kind} differ from a recount {counted}")


def java_found() -> bool:
    """Spark runs ``$JAVA_HOME/bin/java``, else ``java`` on PATH (spark-submit: it has one)."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        return True
    home = os.environ.get("JAVA_HOME")
    return bool(home and (Path(home) / "bin" / "java").exists()) or bool(shutil.which("java"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--seconds",
        type=float,
        default=60.0,
        help="seconds to stream once the first events are in (default 60)",
    )
    ap.add_argument("--rate", type=int, default=2000, help="events per second (default 2000)")
    ap.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="an empty or new dir for the cluster's data and logs, kept "
        "(default: a temp dir, removed after a successful run)",
    )
    ap.add_argument("--keep-data", action="store_true", help="keep the temp dir too")
    ap.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        help="seconds between progress lines (default 5)",
    )
    ap.add_argument(
        "--max-per-trigger",
        type=int,
        default=20_000,
        help="most events per aggregation micro-batch (default 20000)",
    )
    ap.add_argument(
        "--startup-timeout",
        type=float,
        default=180.0,
        help="seconds for the first events to arrive (default 180)",
    )
    ap.add_argument(
        "--drain-timeout",
        type=float,
        default=120.0,
        help="seconds for the aggregation to catch up at the end (default 120)",
    )
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.rate < 1 or args.max_per_trigger < 1:
        ap.error("--seconds, --rate and --max-per-trigger must be positive")
    if args.data_dir is not None and args.data_dir.exists() and any(args.data_dir.iterdir()):
        ap.error(f"--data-dir {args.data_dir} is not empty (the counts are checked end to end)")
    if not java_found():
        print("error: java not found (set JAVA_HOME or put java on PATH); Spark needs Java 17+",
              file=sys.stderr)  # fmt: skip
        return 1
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="pymq-quickstart-"))

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    stack: list[Callable[[], object]] = []
    code = 1
    try:
        run(args, data_dir, stack)
        code = 0
    except (CheckFailed, PyMQError) as exc:  # PyMQError: e.g. a server that did not start
        print(f"quickstart FAILED: {exc}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        say("interrupted; stopping")
        code = 130
    finally:
        for undo in reversed(stack):  # queries, Spark, then the cluster
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - keep stopping the rest, say why
                say(f"while stopping: {type(exc).__name__}: {exc}")
        if code == 0 and args.data_dir is None and not args.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
            say(f"stopped; removed {data_dir} (--keep-data keeps it)")
        else:
            say(f"stopped; data and logs kept in {data_dir}")
    return code


if __name__ == "__main__":
    sys.exit(main())
