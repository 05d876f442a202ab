"""What exactly-once costs: the Spark sink, batch commits, transactional sends.

    python benchmarks/tx_bench.py [--runs 3] [--quick] [--json-out FILE]

Every run starts a fresh ``LocalCluster`` of one NameServer and two
ASYNC_FLUSH brokers (``broker-a``, ``broker-b``; data in a temp dir, stopped
at the end, also on Ctrl-C or SIGTERM), every process on 127.0.0.1, and a
local SparkSession (``local[2]``, its Python workers this interpreter; one
JVM for all runs). 100-byte bodies throughout. Measured, in the same run:

1. Spark sink, ``exactly_once`` vs ``at_least_once``: a frame of
   500,000 rows (quick: 50,000) in 2 partitions with a 100-byte binary
   ``body`` (``spark_bench``'s frame, imported) written with
   ``write.format("pymq")`` and ``deliveryGuarantee`` ``exactly-once`` or
   ``at-least-once``, ``mode("append")``, to a topic of 4 queues on each
   broker (a topic per guarantee). Each guarantee writes twice a run, in the
   order A B B A (a drift of the machine's speed within the run cancels); its
   figure is the rows over the seconds of its two actions, each from the
   action's start to its end: for exactly-once that includes every request
   stored as a batch half and the driver's commit of the write's halves (one
   batch commit per broker, which appends each half's messages to its
   queue). After each write the topic must hold exactly the rows written so
   far (the sum over its queues of max - min offset, ``Admin.topic_status``,
   polled for at most 30 s while it falls short), else the run fails. Before
   the clocks, each guarantee writes as many rows once, not timed: the first
   exactly-once write of 500,000 rows in a session took 5.0 s and the next
   ones 2.9-3.4 s here, even after writes of 10,000 rows of each guarantee
   (at-least-once: no such step).
2. Commit latency per micro-batch, outside Spark: a ``Producer`` sends a
   micro-batch of 8,000 rows as 8 batch halves (``send_batch`` of 1,000 with
   ``half=(writer, batch_id)``, one per queue) and the clock times only
   ``connector.spark.exactly_once.commit`` of them, what the sink's driver
   calls: it opens a ``Producer``, asks the NameServer for the cluster's
   brokers, commits on the coordinator (``broker-a``) with the manifest and
   then on every other broker of the manifest. ``1 broker``: a topic of 8
   queues on ``broker-a`` only (one commit request); ``2 brokers``: 4 queues
   on each (two, one after the other). 100 commits each (quick: 20), fresh
   batch ids, after 3 not timed; the two alternate commit by commit. Every
   commit must answer 8,000 messages committed and the topics must then hold
   every committed row. p50 and p99 in ms.
3. ``TransactionProducer`` vs plain sends, one thread: 5,000 (quick: 500)
   ``send_message_in_transaction`` (the half, the listener answering
   ``COMMIT_MESSAGE``, then END_TRANSACTION, which pymq's producer sends and
   waits for) against as many ``Producer.send`` with ``auto_batch=False`` (a
   request a message; with auto batching on, a lone sync send goes alone too,
   but off is like for like by construction), each to a topic of its own of 4
   queues on each broker; they alternate in tenths of the count; 200 of each
   first, not timed. Every answer must be SEND_OK (and COMMIT_MESSAGE) and
   each topic must then hold every message sent. msgs/s, p50 and p99.

The setups alternate within each run, their order rotating from run to run,
so that the figures compared are measured in the same minutes; each figure
is the median of ``--runs`` runs (min-max), and each ratio is the median of
the runs' own ratios (both sides of a ratio measured in the same minutes).
Prints one table with the issue's target (its goal is defined here;
``report.py`` reads it) and the JSON (date, machine, load, command).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers: this interpreter
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

import httpx  # noqa: E402
from peers_bench import (  # noqa: E402
    BATCH,
    BODY,
    load,
    log,
    percentiles,
    pymq_env,
    pymq_topics,
    stop_on_sigterm,
    stop_stray_children,
    summary,
)
from spark_bench import BODY_SQL  # noqa: E402

import connector  # noqa: E402
from connector import (  # noqa: E402
    Admin,
    LocalTransactionState,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    SendStatus,
    TransactionProducer,
)
from connector.local import LocalCluster  # noqa: E402
from connector.local.cluster import broker_names  # noqa: E402
from connector.spark import exactly_once  # noqa: E402
from connector.spark.options import WriteOptions  # noqa: E402

GUARANTEES = ("exactly_once", "at_least_once")  # deliveryGuarantee, with dashes
BROKER_COUNTS = (1, 2)  # workload 2
SENDERS = ("transactional", "plain")  # workload 3
LABELS = {
    "exactly_once": "exactly-once",
    "at_least_once": "at-least-once",
    1: "1 broker",
    2: "2 brokers",
    "transactional": "TransactionProducer",
    "plain": "Producer.send",
}
SINK_TOPICS = {"exactly_once": "TxSinkExactlyOnce", "at_least_once": "TxSinkAtLeastOnce"}
SINK_WARM_TOPIC = "TxSinkWarm"
SINK_QUEUES = 4  # per broker, as spark_bench's sink topic
SINK_PARTITIONS = 2
COMMIT_TOPICS = {1: "TxCommit1", 2: "TxCommit2"}
COMMIT_QUEUES = 8  # in all: 8 on broker-a, or 4 on each broker
COMMIT_HALVES = 8  # a half a queue
COMMIT_HALF_MESSAGES = BATCH  # 1,000: a micro-batch of 8,000 rows
COMMIT_WARM = 3  # commits of each setup before the timed ones
TX_TOPIC = "TxTransactional"
PLAIN_TOPIC = "TxPlain"
SEND_QUEUES = 4  # per broker
SEND_WARM = 200
SEND_BLOCKS = 10  # workload 3 alternates in tenths
BROKERS = tuple(broker_names(2))  # broker-a (the commits' coordinator), broker-b
WAIT_S = 30.0  # bounded waits: a topic routed, a topic holding what was sent
SIZES = ("rows", "commits", "sends")

# the target; report.py reads it from here
EXACTLY_ONCE_MIN_X_AT_LEAST_ONCE = 0.7  # the sink's exactly-once >= 0.7x at-least-once


COMMIT = LocalTransactionState.COMMIT_MESSAGE


class CommitAll:
    """A listener that commits every transaction (and every check-back)."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return COMMIT

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return COMMIT


# -- topics and what they hold -------------------------------------------------------------


def topic_on_one_broker(cluster: LocalCluster, topic: str, queues: int) -> None:
    """Create ``topic`` on ``broker-a`` only (``Admin.create_topic`` puts it on every
    master) and wait (bounded) until the NameServer routes it."""
    broker = cluster.broker(BROKERS[0])
    body = {"read_queue_nums": queues, "write_queue_nums": queues, "perm": 6}
    httpx.put(f"http://{broker.http_addr}/topics/{topic}", json=body, timeout=10).raise_for_status()
    with Admin(namesrv=cluster.namesrv_addr) as admin:
        deadline = time.monotonic() + WAIT_S
        while True:
            route = admin.namesrv.topic_route(topic)
            if route is not None and sum(q.write_queue_nums for q in route.queues) == queues:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {topic} not routed within {WAIT_S:.0f} s")
            time.sleep(0.05)


def stored(admin: Admin, topic: str) -> int:
    """Messages readable in ``topic``: the sum over its queues of max - min offset."""
    return sum(int(q["max_offset"]) - int(q["min_offset"]) for q in admin.topic_status(topic))


def check_stored(namesrv: str, topic: str, expected: int) -> None:
    """The topic holds exactly ``expected`` messages (polled, bounded: a commit's
    messages reach their queues' indexes just after it answers); else the run fails."""
    with Admin(namesrv=namesrv) as admin:
        deadline = time.monotonic() + WAIT_S
        while True:
            have = stored(admin, topic)
            if have == expected:
                return
            if have > expected or time.monotonic() > deadline:
                raise RuntimeError(f"{topic} holds {have:,} messages, not {expected:,}")
            time.sleep(0.05)


# -- workload 1: the Spark sink ------------------------------------------------------------


def sink_write(spark: Any, namesrv: str, topic: str, guarantee: str, rows: int) -> float:
    """``rows`` 100-byte bodies through ``write.format("pymq")``; seconds of the action."""
    frame = spark.range(0, rows, numPartitions=SINK_PARTITIONS).selectExpr(BODY_SQL)
    writer = (
        frame.write.format("pymq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("deliveryGuarantee", LABELS[guarantee])
        .mode("append")
    )
    t0 = time.perf_counter()
    writer.save()
    return time.perf_counter() - t0


def sink(spark: Any, namesrv: str, order: tuple[str, ...], args: argparse.Namespace) -> Any:
    for guarantee in order:  # the first write of a session is slow (see the docstring)
        sink_write(spark, namesrv, SINK_WARM_TOPIC, guarantee, args.rows)
    check_stored(namesrv, SINK_WARM_TOPIC, len(order) * args.rows)
    seconds = dict.fromkeys(order, 0.0)
    writes = dict.fromkeys(order, 0)
    for guarantee in (*order, *reversed(order)):  # A B B A: a drift within the run cancels
        topic = SINK_TOPICS[guarantee]
        took = sink_write(spark, namesrv, topic, guarantee, args.rows)
        seconds[guarantee] += took
        writes[guarantee] += 1
        check_stored(namesrv, topic, writes[guarantee] * args.rows)
        log(f"    sink {LABELS[guarantee]}: {args.rows / took:,.0f} rows/s")
    out: dict[str, Any] = {g: writes[g] * args.rows / seconds[g] for g in GUARANTEES}
    out["ratio"] = out["exactly_once"] / out["at_least_once"]
    return out


# -- workload 2: batch commits outside Spark ------------------------------------------------


def commit_queues(brokers: int) -> list[MessageQueue]:
    topic = COMMIT_TOPICS[brokers]
    per = COMMIT_QUEUES // brokers
    return [MessageQueue(topic, b, q) for b in BROKERS[:brokers] for q in range(per)]


def commit_one(
    producer: Producer, opts: WriteOptions, writer: str, batch: int, brokers: int
) -> float:
    """One micro-batch stored as halves, then committed; seconds of the commit alone."""
    halves = []
    for mq in commit_queues(brokers):
        msgs = [Message(topic=mq.topic, body=BODY) for _ in range(COMMIT_HALF_MESSAGES)]
        result = producer.send_batch(msgs, queue=mq, half=(writer, batch))
        if result.status is not SendStatus.SEND_OK:
            raise RuntimeError(f"half of batch {batch}: {result.status.value}")
        halves.append(exactly_once.half_of(result, len(msgs)))
    t0 = time.perf_counter()
    committed = exactly_once.commit(opts, writer, batch, halves)
    seconds = time.perf_counter() - t0
    if committed != COMMIT_HALVES * COMMIT_HALF_MESSAGES:
        raise RuntimeError(f"batch {batch} on {brokers} broker(s): {committed:,} committed")
    return seconds


def commits(namesrv: str, order: tuple[int, ...], args: argparse.Namespace) -> Any:
    opts = {b: WriteOptions.parse({"namesrv": namesrv, "topic": COMMIT_TOPICS[b]}) for b in order}
    writers = {b: exactly_once.new_write_id() for b in order}
    lat: dict[int, list[float]] = {b: [] for b in order}
    # the halves' group is the one the commit names (the sink's producerGroup)
    group = opts[order[0]].producer_group
    with Producer(group=group, namesrv=namesrv) as producer:
        for batch in range(COMMIT_WARM + args.commits):
            for brokers in order:
                seconds = commit_one(producer, opts[brokers], writers[brokers], batch, brokers)
                if batch >= COMMIT_WARM:
                    lat[brokers].append(seconds)
    total = (COMMIT_WARM + args.commits) * COMMIT_HALVES * COMMIT_HALF_MESSAGES
    for brokers in order:
        check_stored(namesrv, COMMIT_TOPICS[brokers], total)
        p = percentiles(lat[brokers])
        log(f"    commit, {LABELS[brokers]}: p50 {p['p50_ms']:.2f} ms, p99 {p['p99_ms']:.2f} ms")
    return {f"brokers_{b}": percentiles(lat[b]) for b in BROKER_COUNTS}


# -- workload 3: TransactionProducer vs Producer.send -----------------------------------------


def sends(namesrv: str, order: tuple[str, ...], args: argparse.Namespace) -> Any:
    tx = TransactionProducer(group="tx-bench-tx", namesrv=namesrv, listener=CommitAll())
    plain = Producer(group="tx-bench-plain", namesrv=namesrv, auto_batch=False)
    with tx, plain:

        def transactional() -> None:
            r = tx.send_message_in_transaction(Message(topic=TX_TOPIC, body=BODY))
            state = r.local_transaction_state
            if r.status is not SendStatus.SEND_OK or state is not COMMIT:
                raise RuntimeError(f"transactional send: {r.status.value}, {state.value}")

        def single() -> None:
            r = plain.send(Message(topic=PLAIN_TOPIC, body=BODY))
            if r.status is not SendStatus.SEND_OK:
                raise RuntimeError(f"send: {r.status.value}")

        send = {"transactional": transactional, "plain": single}
        for sender in order:
            for _ in range(SEND_WARM):
                send[sender]()
        lat: dict[str, list[float]] = {s: [] for s in order}
        seconds = dict.fromkeys(order, 0.0)
        per_block = args.sends // SEND_BLOCKS
        for _ in range(SEND_BLOCKS):
            for sender in order:
                one, times = send[sender], lat[sender]
                t_block = time.perf_counter()
                for _ in range(per_block):
                    t0 = time.perf_counter()
                    one()
                    times.append(time.perf_counter() - t0)
                seconds[sender] += time.perf_counter() - t_block
    count = per_block * SEND_BLOCKS
    for topic in (TX_TOPIC, PLAIN_TOPIC):
        check_stored(namesrv, topic, SEND_WARM + count)
    out: dict[str, Any] = {
        s: {"msgs_per_s": count / seconds[s], **percentiles(lat[s])} for s in SENDERS
    }
    out["ratio"] = out["transactional"]["msgs_per_s"] / out["plain"]["msgs_per_s"]
    log(f"    TransactionProducer / Producer.send: {out['ratio']:.2f}x")
    return out


# -- the runs ----------------------------------------------------------------------------


def rotated(items: tuple[Any, ...], r: int) -> tuple[Any, ...]:
    shift = r % len(items)
    return items[shift:] + items[:shift]


def one_run(base: Path, r: int, args: argparse.Namespace) -> dict[str, Any]:
    """Workloads 1, 2, 3 on one fresh cluster; the setups' orders rotate with r."""
    run: dict[str, Any] = {}
    with LocalCluster(base, brokers=2, env=pymq_env("ASYNC_FLUSH")) as c, spark_session() as spark:
        ns = c.namesrv_addr
        both = {t: SINK_QUEUES for t in (*SINK_TOPICS.values(), SINK_WARM_TOPIC)}
        both |= {TX_TOPIC: SEND_QUEUES, PLAIN_TOPIC: SEND_QUEUES}
        pymq_topics(ns, both, brokers=2)
        topic_on_one_broker(c, COMMIT_TOPICS[1], COMMIT_QUEUES)
        # on both brokers, COMMIT_QUEUES in all
        pymq_topics(ns, {COMMIT_TOPICS[2]: COMMIT_QUEUES // 2}, brokers=2)
        log(f"  run {r + 1}/{args.runs}: Spark sink, {args.rows:,} rows (load {load()})")
        run["sink"] = sink(spark, ns, rotated(GUARANTEES, r), args)
        log(f"  run {r + 1}/{args.runs}: {args.commits} commits (load {load()})")
        run["commit"] = commits(ns, rotated(BROKER_COUNTS, r), args)
        log(f"  run {r + 1}/{args.runs}: {args.sends:,} sends each (load {load()})")
        run["send"] = sends(ns, rotated(SENDERS, r), args)
    shutil.rmtree(base, ignore_errors=True)
    return run


def figures(per_run: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median (min-max) over the runs, in the shape of one run."""

    def merge(nodes: list[Any]) -> Any:
        if isinstance(nodes[0], dict):
            return {k: merge([n[k] for n in nodes]) for k in nodes[0]}
        return summary([float(n) for n in nodes])

    return dict(merge(per_run))


def checks(figs: dict[str, Any]) -> list[tuple[str, float, str, bool]]:
    """The issue's target on the median of the runs' own ratios: (what, value, goal, met)."""
    ratio = figs["sink"]["ratio"]["median"]
    goal = EXACTLY_ONCE_MIN_X_AT_LEAST_ONCE
    return [
        ("Spark sink: exactly-once / at-least-once rows/s", ratio, f">= {goal:g}x", ratio >= goal)
    ]


def print_table(results: dict[str, Any]) -> None:
    figs, a = results["figures"], results["sizes"]
    sink_, commit, send = figs["sink"], figs["commit"], figs["send"]

    def cell(fig: dict[str, float], unit: str) -> str:
        f = "{:,.2f}" if unit in ("ms", "x") else "{:,.0f}"
        return f"{f.format(fig['median'])} ({f.format(fig['min'])}-{f.format(fig['max'])})"

    def line(label: str, unit: str, *cells: str) -> None:
        print(f"{label:<44}{unit:<8}" + "".join(f"{c:>28}" for c in cells))

    print(
        f"\nTransactions on loopback, 2 brokers, 100-byte bodies, median of {results['runs']} "
        f"(min-max); {results['date']}, load {results['load_at_start']} -> "
        f"{results['load_at_end']}"
    )
    line("", "", LABELS["exactly_once"], LABELS["at_least_once"], "ratio")
    line(
        f"Spark sink, local[2], {a['rows']:,} rows", "rows/s",
        cell(sink_["exactly_once"], ""), cell(sink_["at_least_once"], ""),
        cell(sink_["ratio"], "x"),
    )  # fmt: skip
    print()
    line("", "", LABELS[1], LABELS[2])
    for field in ("p50_ms", "p99_ms"):
        line(
            f"commit of {COMMIT_HALVES} x {COMMIT_HALF_MESSAGES:,} rows, {field[:3]}", "ms",
            cell(commit["brokers_1"][field], "ms"), cell(commit["brokers_2"][field], "ms"),
        )  # fmt: skip
    print()
    line("", "", LABELS["transactional"], LABELS["plain"], "ratio")
    line(
        "single sends, 1 thread", "msgs/s", cell(send["transactional"]["msgs_per_s"], ""),
        cell(send["plain"]["msgs_per_s"], ""), cell(send["ratio"], "x"),
    )  # fmt: skip
    for field in ("p50_ms", "p99_ms"):
        line(
            f"single sends, 1 thread, {field[:3]}", "ms",
            cell(send["transactional"][field], "ms"), cell(send["plain"][field], "ms"),
        )  # fmt: skip
    print("\ntargets (on the median of the runs' own ratios):")
    for what, value, goal, met in checks(figs):
        print(f"  {what:<58}{value:>10,.2f}  {goal:<8}{'met' if met else 'MISSED'}")


def versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "pymq": connector.__version__,
        "pyspark": importlib.metadata.version("pyspark"),
    }


@contextlib.contextmanager
def spark_session() -> Iterator[Any]:
    """A SparkSession for one run, stopped before the run's cluster: its Python workers
    keep a ``Producer`` for a minute after their last task (``connector.spark.clients``),
    which would go on asking a stopped NameServer. The JVM (py4j's gateway) is started
    once and ends with this process."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pymq-tx-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.pyspark.python", sys.executable)
        .getOrCreate()
    )
    try:
        spark.sparkContext.setLogLevel("ERROR")
        yield spark
    finally:
        spark.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run (a smoke test)")
    ap.add_argument("--dir", default=None, help="where the data goes (default: a temp dir)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    args.rows, args.commits, args.sends = 500_000, 100, 5_000
    if args.quick:
        args.runs, args.rows, args.commits, args.sends = 1, 50_000, 20, 500
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    base = Path(args.dir or tempfile.mkdtemp(prefix="pymq-tx-bench-"))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "command": " ".join(["python", *sys.argv]),
        "load_at_start": load(),
        "versions": versions(),
        "runs": args.runs,
        "sizes": {k: getattr(args, k) for k in SIZES},
    }
    per_run: list[dict[str, Any]] = []
    try:
        for r in range(args.runs):
            per_run.append(one_run(base / f"run-{r}", r, args))
    except KeyboardInterrupt:
        log("interrupted: servers stopped")
        return 130
    finally:
        if len(per_run) < args.runs:  # failed or interrupted: a broker caught starting
            stop_stray_children()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    results["load_at_end"] = load()
    results["figures"] = figures(per_run)
    results["targets"] = [
        {"what": what, "value": value, "goal": goal, "met": met}
        for what, value, goal, met in checks(results["figures"])
    ]
    results["per_run"] = per_run
    print_table(results)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
