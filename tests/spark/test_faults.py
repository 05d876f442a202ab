"""format("pymq") under faults, with real processes: a 100,000-message round trip, a
broker killed (-9) under a streaming write, the ETL driver killed (-9) and restarted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from connector import Message, Producer, PullConsumer
from connector.local import LocalCluster

JOBS = Path(__file__).resolve().parents[2] / "jobs"


@pytest.fixture(scope="module")
def fault_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two brokers that flush before they answer, so an acknowledged send survives kill -9."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["PYMQ_REGISTER_NAME_SERVER_PERIOD_MS"] = "500"
    env["PYMQ_FLUSH_DISK_TYPE"] = "SYNC_FLUSH"
    with LocalCluster(
        tmp_path_factory.mktemp("fault-cluster"), brokers=2, namesrvs=1, env=env
    ) as c:
        yield c


def make_topic(
    cluster: LocalCluster, topic: str, *, queues: int = 4, brokers: tuple[str, ...] = ()
) -> None:
    """The topic on the named brokers (all by default); waits until the route shows it."""
    chosen = [b for b in cluster.brokers if not brokers or b.name in brokers]
    for b in chosen:
        r = httpx.put(
            f"http://{b.http_addr}/topics/{topic}",
            json={"read_queue_nums": queues, "write_queue_nums": queues, "perm": 6},
            timeout=10,
        )
        assert r.status_code == 200, r.text
    wait_for_route(cluster, topic, {b.name: b.addr for b in chosen})


def wait_for_route(cluster: LocalCluster, topic: str, addrs: dict[str, str]) -> None:
    """Poll the NameServer until ``topic``'s route has exactly these brokers at these addresses."""
    ns = cluster.namesrvs[0].http_addr
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = httpx.get(f"http://{ns}/routes/{topic}", timeout=10)
        if r.status_code == 200:
            route = r.json()
            seen = {b["broker_name"]: b["addrs"].get("0") for b in route["brokers"]}
            queued = {q["broker_name"] for q in route["queues"]}
            if queued == set(addrs) and all(seen.get(n) == a for n, a in addrs.items()):
                return
        time.sleep(0.05)
    raise AssertionError(f"the route of {topic} never showed {addrs}")


def fill(ns: str, topic: str, bodies: list[bytes]) -> None:
    with Producer(group="faults-fill", namesrv=ns) as producer:
        for k in range(0, len(bodies), 500):
            producer.send_batch([Message(topic=topic, body=b) for b in bodies[k : k + 500]])


def stored_counts(ns: str, topic: str) -> dict[str, int]:
    """Messages stored per broker (sum of the queues' max offsets)."""
    out: dict[str, int] = {}
    with PullConsumer(group="faults-watch", namesrv=ns) as consumer:
        for mq in consumer.fetch_queues(topic):
            out[mq.broker_name] = out.get(mq.broker_name, 0) + consumer.max_offset(mq)
    return out


def read_topic(spark: Any, ns: str, topic: str) -> Any:
    return spark.read.format("pymq").option("namesrv", ns).option("topic", topic).load()


# -- 100,000 messages through the batch sink and back ------------------------------------


def test_round_trip_100k(spark: Any, fault_cluster: LocalCluster) -> None:
    ns = fault_cluster.namesrv_addr
    topic = "FaultRoundTrip"
    make_topic(fault_cluster, topic)
    n = 100_000
    t0 = time.perf_counter()
    spark.range(0, n, numPartitions=2).selectExpr(
        "cast(concat('rt-', id) as binary) as body"
    ).write.mode("append").format("pymq").option("namesrv", ns).option("topic", topic).save()
    wrote = time.perf_counter() - t0
    # one pass in Spark: n rows, n distinct bodies, each exactly 'rt-<id>' with id in [0, n)
    # is the same multiset as what was written
    t1 = time.perf_counter()
    stats = (
        read_topic(spark, ns, topic)
        .selectExpr("cast(body as string) as s")
        .selectExpr("s", "try_cast(substr(s, 4) as long) as id")
        .selectExpr(
            "count(*) as rows",
            "count(distinct s) as distinct_bodies",
            "min(id) as lo",
            "max(id) as hi",
            "sum(if(id is null or s != concat('rt-', id), 1, 0)) as malformed",
            "count(distinct id) as distinct_ids",
        )
        .collect()[0]
    )
    read = time.perf_counter() - t1
    print(f"\nround trip of {n:,} messages: write {wrote:.1f} s, read {read:.1f} s")
    assert stats.rows == n and stats.distinct_bodies == n and stats.distinct_ids == n
    assert (stats.lo, stats.hi, stats.malformed) == (0, n - 1, 0)
    assert all(v > 0 for v in stored_counts(ns, topic).values())


# -- a broker killed under a streaming write ----------------------------------------------


def test_streaming_write_survives_broker_kill(
    spark: Any, fault_cluster: LocalCluster, tmp_path: Path
) -> None:
    cluster = fault_cluster
    ns = cluster.namesrv_addr
    # the source lives on broker-a only (so the read side is untouched by the kill);
    # the sink spans both brokers, and broker-b dies while micro-batches write to it
    make_topic(cluster, "FaultStreamIn", queues=2, brokers=("broker-a",))
    make_topic(cluster, "FaultStreamOut")
    n, per_trigger = 6000, 750
    fill(ns, "FaultStreamIn", [b"s-%d" % i for i in range(n)])
    source = (
        spark.readStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "FaultStreamIn")
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", str(per_trigger))
        .load()
    )
    query = (
        source.select("body")
        .writeStream.format("pymq")
        .option("namesrv", ns)
        .option("topic", "FaultStreamOut")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        # micro-batches run one after another: more than two batches' rows in the sink means
        # batches 0 and 1 are committed and batch 2's tasks are sending right now
        deadline = time.monotonic() + 180
        while True:
            assert query.isActive, f"the query ended before the kill: {query.exception()}"
            before_kill = stored_counts(ns, "FaultStreamOut")
            if sum(before_kill.values()) > 2 * per_trigger and before_kill.get("broker-b", 0):
                break
            assert time.monotonic() < deadline, "the streaming write made no progress"
            time.sleep(0.02)
        finished_before_kill = {p["batchId"] for p in query.recentProgress}
        cluster.broker("broker-b").kill()
        assert query.awaitTermination(300), "the query did not finish"
    finally:
        if query.isActive:
            query.stop()
        if not cluster.broker("broker-b").running:  # the module's next tests need it
            cluster.restart_broker("broker-b", crash=True)  # dead: this only starts it again
    assert query.exception() is None  # the producers avoided the dead broker: no failure
    later = [p for p in query.recentProgress if p["batchId"] not in finished_before_kill]
    # whole micro-batches ran after the kill (how many depends on how fast the machine
    # got through the ones before it while the sink was being polled)
    assert sum(p["numInputRows"] for p in later) >= per_trigger
    assert sum(p["numInputRows"] for p in query.recentProgress) == n  # every batch committed

    wait_for_route(cluster, "FaultStreamOut", {b.name: b.addr for b in cluster.brokers})
    rows = read_topic(spark, ns, "FaultStreamOut").select("body", "brokerName").collect()
    counts = Counter(bytes(r.body) for r in rows)
    on_b = sum(1 for r in rows if r.brokerName == "broker-b")
    duplicates = sum(c - 1 for c in counts.values())
    print(
        f"\nbroker-b killed during micro-batch {min(p['batchId'] for p in later)}: "
        f"{len(later)} micro-batches finished after the kill; "
        f"sink holds {len(rows):,} rows for {n:,} source rows "
        f"({duplicates} duplicates, {on_b:,} rows on broker-b, "
        f"{before_kill['broker-b']:,} seen there before the kill)"
    )
    assert set(counts) == {b"s-%d" % i for i in range(n)}  # every committed row, nothing else
    assert on_b >= before_kill["broker-b"]  # what broker-b had stored survived kill -9


# -- the ETL driver killed (-9) and restarted from its checkpoint -------------------------


def job_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def alive(pid: int) -> bool:
    """Running (not exited, not a zombie nobody reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_etl_driver_kill_and_restart(
    spark: Any, fault_cluster: LocalCluster, tmp_path: Path
) -> None:
    ns = fault_cluster.namesrv_addr
    make_topic(fault_cluster, "FaultEtlIn", queues=1)  # a task per broker and micro-batch
    make_topic(fault_cluster, "FaultEtlOut")
    n, per_trigger = 12_000, 2000
    fill(ns, "FaultEtlIn", [b"etl-%d" % i for i in range(n)])
    args = [
        sys.executable,
        str(JOBS / "etl.py"),
        "--namesrv",
        ns,
        "--source-topic",
        "FaultEtlIn",
        "--sink-topic",
        "FaultEtlOut",
        "--checkpoint",
        str(tmp_path / "ck"),
        "--max-per-trigger",
        str(per_trigger),
    ]
    log = tmp_path / "etl-first-run.log"
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as out:
        driver = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env=job_env(), start_new_session=True
        )
    try:
        deadline = time.monotonic() + 240
        # micro-batches run one after another: once the sink holds more than one batch's
        # rows, batch 0 is in the checkpoint's commit log and batch 1 is being written
        while True:
            assert driver.poll() is None, log.read_text()[-3000:]
            copied = sum(stored_counts(ns, "FaultEtlOut").values())
            if copied > per_trigger:
                break
            assert time.monotonic() < deadline, "the ETL copied nothing\n" + log.read_text()[-3000:]
            time.sleep(0.05)
        tree = descendants(driver.pid)
        os.killpg(driver.pid, signal.SIGKILL)  # the driver, its JVM, and what shares its group
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait(30)
    assert copied < n, "the first run finished before it could be killed"
    # PySpark's worker daemons sit in their own process groups; they exit once the JVM is gone
    deadline = time.monotonic() + 60
    while (left := {p for p in tree if alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:  # not expected; ours to clean up if it happens
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the killed driver still running: {sorted(left)}"

    first_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    second = subprocess.run(
        [*args, "--available-now"],
        capture_output=True,
        text=True,
        timeout=300,
        env=job_env(),
        check=False,
    )
    second_s = time.perf_counter() - t1
    assert second.returncode == 0, second.stderr[-3000:]
    m = re.search(r"etl stopped after ([\d,]+) rows in this run", second.stdout)
    assert m, second.stdout
    resumed_rows = int(m.group(1).replace(",", ""))
    # it went on from the checkpoint (at least batch 0 committed), not from the start
    assert 0 < resumed_rows <= n - per_trigger

    source = {
        r.msgId: bytes(r.body)
        for r in read_topic(spark, ns, "FaultEtlIn").select("msgId", "body").collect()
    }
    assert len(source) == n
    sink = (
        read_topic(spark, ns, "FaultEtlOut")
        .selectExpr("properties['etl_source_msg_id'] as src", "body")
        .collect()
    )
    copies = Counter(r.src for r in sink)
    assert all(source.get(r.src) == bytes(r.body) for r in sink)  # unchanged, from that source
    missing = set(source) - set(copies)
    duplicates = sum(c - 1 for c in copies.values())
    print(
        f"\netl killed after {first_s:.1f} s with {copied:,} of {n:,} rows copied; the restart "
        f"copied {resumed_rows:,} in {second_s:.1f} s; sink {len(sink):,} rows, "
        f"{len(missing)} missing, {duplicates} duplicates"
    )
    assert not missing
