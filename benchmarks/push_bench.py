"""The push consumer next to Redis Streams consumer groups and NATS JetStream pull
consumers: same machine, same run, Python clients.

    python benchmarks/push_bench.py [--runs 3] [--quick] [--messages N] [--json-out FILE]

Needs what ``peers_bench.py`` needs (``redis-server``, ``nats-server``, the
``bench`` extra) and reuses its servers, clocks and helpers. Each run starts
every system fresh on 127.0.0.1 (pymq: ``LocalCluster`` of 1 NameServer and
1 ASYNC_FLUSH broker), the order of the systems rotating from run to run.
100-byte bodies.

1. **Backlog**: ``--messages`` stored first (not timed), then consumed by a
   group of one member with a no-op listener, the clock from the consumer's
   start to the last message. pymq: ``PushConsumer`` with its defaults
   (the adaptive pull page: 32 a pull, growing to 1000 on a backlog; a listener
   call per message, 20 consume threads),
   then with ``pull_batch_size=1000`` (the page Redis reads), then also with
   ``consume_message_batch_max_size=1000`` (the listener gets the page, as
   Redis's loop does; the no-op is still called per message), a topic of 8
   queues, ``CONSUME_FROM_FIRST_OFFSET``; Redis: ``XREADGROUP
   COUNT 1000`` from a group created at 0, the no-op called per entry, one
   ``XACK`` of the page's ids; JetStream: a durable pull consumer with
   explicit acks, ``fetch(1000)``, the no-op and ``ack()`` per message
   (JetStream gets at most ``NATS_MAX_MESSAGES``: nats-py moves ~15,000
   msgs/s here). Target: pymq >= 3x Redis.
2. **End-to-end latency** at 5,000 msgs/s (10 messages every 2 ms, 10 s, the
   first second warm-up; ``peers_bench.E2EClock``): each tick's 10 messages
   as one request (pymq ``send_batch``, a Redis pipeline of 10 ``XADD``, 10
   JetStream ``publish_async`` awaited together), consumed by the group's
   member: pymq a ``PushConsumer`` (topic of 4 queues, the listener stamps the
   arrival), Redis ``XREADGROUP BLOCK 1000`` + ``XACK``, JetStream ``fetch``
   with a 2 ms expiry and ``ack()`` (``peers_bench.NATS_FETCH_EXPIRY_S``).
   Target: pymq p99 <= 1 ms.
3. **Rebalance** (pymq; the peers have no queue ownership to move: a Redis
   group's dead consumer keeps its pending entries until someone
   ``XAUTOCLAIM``\\s them after a min-idle time the application picks, and
   JetStream redelivers unacked messages after ``ack_wait``, 30 s by default).
   a) *Kill*: a group of 2 members on a topic of 8 queues under load (~2,000
   msgs/s), one of them a process of its own (this script, ``--member``),
   ``kill -9``'d once the group is settled. "Notices": the survivor gets the
   broker's NOTIFY_CONSUMER_IDS_CHANGED, which the broker sends when the dead
   member's connection closes (the survivor's log record of it, stamped by a
   logging handler here). Measured: kill -> notice, notice -> every queue of
   the dead member consumed again by the survivor. Target: <= 2 s after the
   notice.
   b) *Join*: 2 members consuming under load, a third joins; once every
   queue is owned once and the load is balanced, the load stops and
   everything is consumed: queues that moved, and messages consumed more
   than once, with ``allocate="sticky"`` and ``"averagely"`` (offsets are
   committed every 5 s, the default).

Each figure is the median of ``--runs`` runs (min-max); ratios (pymq over the
peer) are printed in the same table. Prints the table and the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import logging
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers_bench import (  # noqa: E402
    BODY,
    E2E_TICK_MS,
    NATS_FETCH_EXPIRY_S,
    NATS_MAX_MESSAGES,
    E2EClock,
    check_prerequisites,
    load,
    log,
    nats_server,
    pymq_env,
    pymq_topics,
    redis_server,
    stop_on_sigterm,
    stop_stray_children,
    summary,
    versions,
)

from connector import ConsumeStatus, Message, Producer, PushConsumer  # noqa: E402
from connector.local import LocalCluster  # noqa: E402

SYSTEMS = ("pymq", "redis", "nats")
BACKLOG_TOPIC = "PushBacklog"
BACKLOG_QUEUES = 8
E2E_TOPIC = "PushE2E"
E2E_QUEUES = 4
REBALANCE_QUEUES = 8
LOAD_BATCH = 20  # rebalance load: a send_batch of 20 every 10 ms, ~2,000 msgs/s
LOAD_EVERY_S = 0.01
PAGE = 1000  # XREADGROUP COUNT / fetch batch
BACKLOG_MIN_X_REDIS = 3.0
E2E_MAX_P99_MS = 1.0
REBALANCE_MAX_S = 2.0
SETTLE_S = 30.0  # every wait for a group to settle is bounded by this
NOTICE_TEXT = "the brokers say group"  # PushConsumer's log record of NOTIFY_CONSUMER_IDS_CHANGED


def noop(_: object) -> None:
    """The listener's work: nothing (called per message by every system)."""


def wait_for(what: str, check: Any, timeout_s: float = SETTLE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not within {timeout_s:.0f} s: {what}")
        time.sleep(0.01)


# -- 1. backlog -------------------------------------------------------------------------


def pymq_fill(ns: str, topic: str, count: int) -> None:
    with Producer(group="push-bench", namesrv=ns) as producer:
        for _ in range(count // PAGE):
            producer.send_batch([Message(topic=topic, body=BODY) for _ in range(PAGE)])


def pymq_backlog(ns: str, count: int, group: str, **settings: Any) -> float:
    done = threading.Event()
    consumed = itertools.count(1)  # next() is atomic: the listener takes no lock

    def listener(msgs: list[Any], context: Any) -> ConsumeStatus:
        for m in msgs:
            noop(m.body)
            if next(consumed) == count:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group=group, namesrv=ns, listener=listener,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", **settings,
    )  # fmt: skip
    consumer.subscribe(BACKLOG_TOPIC)
    t0 = time.perf_counter()
    consumer.start()
    try:
        if not done.wait(600):
            raise RuntimeError(f"pymq backlog: not all {count} consumed in 600 s")
        return count / (time.perf_counter() - t0)
    finally:
        consumer.shutdown()


def redis_backlog(r: Any, count: int) -> float:
    key, group = BACKLOG_TOPIC, "push-bench"
    pipe = r.pipeline(transaction=False)
    for _ in range(count // PAGE):
        for _ in range(PAGE):
            pipe.xadd(key, {b"d": BODY})
        pipe.execute()
    r.xgroup_create(key, group, id="0")
    total = 0
    t0 = time.perf_counter()
    while total < count:
        answer: Any = r.xreadgroup(group, "c1", {key: ">"}, count=PAGE, block=1000)
        if not answer:
            raise RuntimeError(f"redis backlog: {total} of {count}, then nothing for 1 s")
        entries = answer[0][1]
        for _, fields in entries:
            noop(fields[b"d"])
        r.xack(key, group, *(entry_id for entry_id, _ in entries))
        total += len(entries)
    rate = count / (time.perf_counter() - t0)
    pending = r.xpending(key, group)["pending"]
    if pending:
        raise RuntimeError(f"redis backlog: {pending} entries still pending")
    return rate


async def nats_backlog(js: Any, count: int) -> float:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

    subject = BACKLOG_TOPIC.lower()
    await js.add_stream(name=BACKLOG_TOPIC, subjects=[subject], storage=StorageType.FILE)
    for _ in range(count):
        await js.publish_async(subject, BODY)
    await js.publish_async_completed()
    config = ConsumerConfig(
        durable_name="push-bench", ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL, max_ack_pending=-1,
    )  # fmt: skip
    psub = await js.pull_subscribe(subject, durable="push-bench", stream=BACKLOG_TOPIC,
                                   config=config)  # fmt: skip
    total = 0
    t0 = time.perf_counter()
    while total < count:
        msgs = await psub.fetch(PAGE, timeout=10)
        for m in msgs:
            noop(m.data)
            await m.ack()
        total += len(msgs)
    rate = count / (time.perf_counter() - t0)
    await psub.unsubscribe()
    return rate


# -- 2. end-to-end ----------------------------------------------------------------------


def pymq_e2e(ns: str, clock: E2EClock) -> dict[str, float]:
    def listener(msgs: list[Any], context: Any) -> ConsumeStatus:
        clock.arrived([m.body for m in msgs])
        return ConsumeStatus.CONSUME_SUCCESS

    with (
        Producer(group="push-bench", namesrv=ns) as producer,
        PushConsumer(group="push-bench-e2e", namesrv=ns, listener=listener) as consumer,
    ):
        consumer.subscribe(E2E_TOPIC)
        wait_for(
            "the e2e consumer owns every queue",
            lambda: sum(q.topic == E2E_TOPIC for q in consumer.owned_queues()) == E2E_QUEUES,
        )
        producer.send(Message(topic="PushWarm", body=BODY))  # route and connection
        clock.start()
        for tick in range(clock.ticks):
            delay = clock.delay_s(tick)
            if delay > 0:
                time.sleep(delay)
            producer.send_batch([Message(topic=E2E_TOPIC, body=b) for b in clock.bodies(tick)])
        clock.sent()
        wait_for("every e2e message", lambda: clock.received >= clock.total)
    return clock.result()


def redis_e2e(port: int, clock: E2EClock) -> dict[str, float]:
    import redis

    key, group = E2E_TOPIC, "push-bench-e2e"
    r = redis.Redis(port=port)
    r.xgroup_create(key, group, id="$", mkstream=True)
    errors: list[BaseException] = []

    def consume() -> None:
        c = redis.Redis(port=port)
        deadline = time.monotonic() + clock.ticks * E2E_TICK_MS / 1000 + 30
        try:
            while clock.received < clock.total and time.monotonic() < deadline:
                answer: Any = c.xreadgroup(group, "c1", {key: ">"}, count=PAGE, block=1000)
                if answer:
                    entries = answer[0][1]
                    clock.arrived([fields[b"d"] for _, fields in entries])
                    c.xack(key, group, *(entry_id for entry_id, _ in entries))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)
        c.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    pipe = r.pipeline(transaction=False)
    clock.start()
    for tick in range(clock.ticks):
        delay = clock.delay_s(tick)
        if delay > 0:
            time.sleep(delay)
        for body in clock.bodies(tick):
            pipe.xadd(key, {b"d": body})
        pipe.execute()
    clock.sent()
    reader.join()
    r.close()
    if errors:
        raise errors[0]
    return clock.result()


async def nats_e2e(js: Any, clock: E2EClock) -> dict[str, float]:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

    subject = E2E_TOPIC.lower()
    await js.add_stream(name=E2E_TOPIC, subjects=[subject], storage=StorageType.FILE)
    config = ConsumerConfig(
        durable_name="push-bench-e2e", ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.NEW,
    )  # fmt: skip
    sub = await js.pull_subscribe(subject, durable="push-bench-e2e", stream=E2E_TOPIC,
                                  config=config)  # fmt: skip

    async def pull() -> None:
        deadline = time.monotonic() + clock.ticks * E2E_TICK_MS / 1000 + 30
        while clock.received < clock.total and time.monotonic() < deadline:
            try:  # asyncio's TimeoutError (nats' subclasses it): nothing within the expiry
                msgs = await sub.fetch(PAGE, timeout=NATS_FETCH_EXPIRY_S)
            except asyncio.TimeoutError:
                continue
            clock.arrived([m.data for m in msgs])
            for m in msgs:
                await m.ack()

    reader = asyncio.create_task(pull())
    clock.start()
    for tick in range(clock.ticks):
        delay = clock.delay_s(tick)
        if delay > 0:
            await asyncio.sleep(delay)
        acks = [await js.publish_async(subject, body) for body in clock.bodies(tick)]
        await asyncio.gather(*acks)
    clock.sent()
    await reader
    await sub.unsubscribe()
    return clock.result()


# -- 3. rebalance -----------------------------------------------------------------------


class Load:
    """~2,000 msgs/s to ``topic``, numbered bodies, on a thread of its own."""

    def __init__(self, ns: str, topic: str) -> None:
        self.ns, self.topic = ns, topic
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with Producer(group="push-bench-load", namesrv=self.ns) as producer:
            while not self._stop.wait(LOAD_EVERY_S):
                first = self.sent
                bodies = [f"{first + i:012d}".encode() for i in range(LOAD_BATCH)]
                producer.send_batch([Message(topic=self.topic, body=b) for b in bodies])
                self.sent += LOAD_BATCH

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(30)
        return self.sent


class Tally:
    """What the in-process members consumed: counts by body, first arrival by queue."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[bytes] = Counter()
        self.first_seen: dict[tuple[str, int], float] = {}

    def listener(self, msgs: list[Any], context: Any) -> ConsumeStatus:
        now = time.monotonic()
        q = context.queue
        with self.lock:
            self.counts.update(m.body for m in msgs)
            self.first_seen.setdefault((q.topic, q.queue_id), now)
        return ConsumeStatus.CONSUME_SUCCESS

    def consumed_all(self, sent: int) -> bool:
        with self.lock:
            return len(self.counts) >= sent

    def twice(self) -> int:
        with self.lock:
            return sum(n - 1 for n in self.counts.values() if n > 1)


class NoticeClock(logging.Handler):
    """The time of the push consumers' log records of NOTIFY_CONSUMER_IDS_CHANGED."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.times: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith(NOTICE_TEXT):
            self.times.append(time.monotonic())


def member_main(params: str) -> int:
    """``--member``: a push consumer with a no-op listener in this process until killed;
    a JSON line on stdout whenever the queues it owns of the topic change."""
    p = json.loads(params)
    consumer = PushConsumer(
        group=p["group"], namesrv=p["namesrv"], listener=lambda m, c: ConsumeStatus.CONSUME_SUCCESS,
        instance_name=p["instance"], allocate=p["allocate"],
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )  # fmt: skip
    consumer.subscribe(p["topic"])
    consumer.start()
    owned: list[int] = []
    while True:  # until kill -9 (or SIGTERM, the default action)
        now = sorted(q.queue_id for q in consumer.owned_queues() if q.topic == p["topic"])
        if now != owned:
            owned = now
            print(json.dumps({"owned": owned}), flush=True)
        time.sleep(0.01)


class MemberProcess:
    def __init__(self, params: dict[str, Any]) -> None:
        self.owned: list[int] = []
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--member", json.dumps(params)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.owned = json.loads(line)["owned"]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def member(ns: str, group: str, topic: str, tally: Tally, allocate: str, name: str) -> PushConsumer:
    c = PushConsumer(
        group=group, namesrv=ns, listener=tally.listener, instance_name=name, allocate=allocate,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )  # fmt: skip
    c.subscribe(topic)
    return c.start()


def owned_ids(c: PushConsumer, topic: str) -> set[int]:
    return {q.queue_id for q in c.owned_queues() if q.topic == topic}


def pymq_kill(ns: str, run: int) -> dict[str, float]:
    topic, group = f"PushKill{run}", f"push-bench-kill-{run}"
    pymq_topics(ns, {topic: REBALANCE_QUEUES})
    notices = NoticeClock()
    push_log = logging.getLogger("connector.client.push.consumer")
    push_log.addHandler(notices)
    push_log.setLevel(logging.INFO)
    tally = Tally()
    load_ = Load(ns, topic)
    victim = MemberProcess(
        {"namesrv": ns, "group": group, "topic": topic, "instance": "victim",
         "allocate": "averagely"}
    )  # fmt: skip
    survivor = member(ns, group, topic, tally, "averagely", "survivor")
    try:
        everything = set(range(REBALANCE_QUEUES))

        def settled() -> bool:
            mine, theirs = owned_ids(survivor, topic), set(victim.owned)
            return not mine & theirs and mine | theirs == everything and len(mine) == 4

        wait_for("the group of 2 settled", settled)
        theirs = set(victim.owned)
        seen_before = len(notices.times)
        with tally.lock:  # the survivor may have held them before the victim joined
            tally.first_seen.clear()
        t_kill = time.monotonic()
        victim.kill()
        wait_for("the survivor owns every queue", lambda: owned_ids(survivor, topic) == everything)

        def resumed() -> bool:
            with tally.lock:
                return all((topic, q) in tally.first_seen for q in theirs)

        wait_for("the dead member's queues consumed again", resumed)
        with tally.lock:
            t_resumed = max(tally.first_seen[(topic, q)] for q in theirs)
        after = [t for t in notices.times[seen_before:] if t >= t_kill]
        if not after:
            raise RuntimeError("the survivor was never told the group changed")
        t_notice = after[0]
        sent = load_.stop()
        wait_for("every message consumed", lambda: tally.consumed_all(sent))
        return {
            "notice_s": t_notice - t_kill,
            "resumed_after_notice_s": t_resumed - t_notice,
            "resumed_after_kill_s": t_resumed - t_kill,
            "redelivered": tally.twice(),
        }
    finally:
        load_.stop()
        victim.kill()
        survivor.shutdown()
        push_log.removeHandler(notices)


def pymq_join(ns: str, run: int, allocate: str) -> dict[str, float]:
    topic, group = f"PushJoin{allocate}{run}", f"push-bench-join-{allocate}-{run}"
    pymq_topics(ns, {topic: REBALANCE_QUEUES})
    tally = Tally()
    load_ = Load(ns, topic)
    live: list[PushConsumer] = []
    try:

        def owners() -> dict[int, int] | None:
            out: dict[int, int] = {}
            for i, c in enumerate(live):
                for q in owned_ids(c, topic):
                    if q in out:
                        return None
                    out[q] = i
            loads = Counter(out.values())
            balanced = len(loads) == len(live) and max(loads.values()) - min(loads.values()) <= 1
            return out if len(out) == REBALANCE_QUEUES and balanced else None

        for i in range(2):
            live.append(member(ns, group, topic, tally, allocate, f"m{i}"))
        wait_for("2 members settled", lambda: owners() is not None)
        before = owners()
        # consuming for a while, offsets committed (every 5 s) as in a running group
        time.sleep(6)  # the load runs meanwhile: a duration, not a wait for a state
        live.append(member(ns, group, topic, tally, allocate, "m2"))
        wait_for("3 members settled", lambda: owners() is not None)
        after = owners()
        assert before is not None and after is not None
        sent = load_.stop()
        wait_for("every message consumed", lambda: tally.consumed_all(sent))
        return {
            "moved": sum(1 for q, i in after.items() if before.get(q) != i),
            "redelivered": tally.twice(),
            "sent": sent,
        }
    finally:
        load_.stop()
        for c in live:
            c.shutdown()


# -- runners ----------------------------------------------------------------------------


def run_pymq(base: Path, args: argparse.Namespace, run: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with LocalCluster(base, brokers=1, namesrvs=1, env=pymq_env("ASYNC_FLUSH")) as c:
        ns = c.namesrv_addr
        pymq_topics(ns, {BACKLOG_TOPIC: BACKLOG_QUEUES, E2E_TOPIC: E2E_QUEUES, "PushWarm": 4})
        pymq_fill(ns, BACKLOG_TOPIC, args.messages)
        out["backlog"] = pymq_backlog(ns, args.messages, "push-bench-backlog")
        # the page Redis and JetStream read (COUNT / fetch of 1,000)
        out["backlog_1000"] = pymq_backlog(
            ns, args.messages, "push-bench-backlog-1000", pull_batch_size=PAGE
        )
        # ... and the listener gets the page too (RocketMQ's consumeMessageBatchMaxSize)
        out["backlog_page"] = pymq_backlog(
            ns, args.messages, "push-bench-backlog-page", pull_batch_size=PAGE,
            consume_message_batch_max_size=PAGE,
        )  # fmt: skip
        out["e2e"] = pymq_e2e(ns, E2EClock(args.e2e_rate, args.e2e_seconds))
        if args.rebalance:
            out["kill"] = pymq_kill(ns, run)
            for allocate in ("sticky", "averagely"):
                out[f"join_{allocate}"] = pymq_join(ns, run, allocate)
    shutil.rmtree(base, ignore_errors=True)
    return out


def run_redis(base: Path, args: argparse.Namespace, run: int) -> dict[str, Any]:
    import redis

    out: dict[str, Any] = {}
    with redis_server(base, durable=False) as port:
        r = redis.Redis(port=port)
        out["backlog"] = redis_backlog(r, args.messages)
        out["e2e"] = redis_e2e(port, E2EClock(args.e2e_rate, args.e2e_seconds))
        r.close()
    shutil.rmtree(base, ignore_errors=True)
    return out


async def nats_all(port: int, args: argparse.Namespace) -> dict[str, Any]:
    import nats

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        return {
            "backlog": await nats_backlog(js, min(args.messages, NATS_MAX_MESSAGES)),
            "e2e": await nats_e2e(js, E2EClock(args.e2e_rate, args.e2e_seconds)),
        }
    finally:
        await nc.close()


def run_nats(base: Path, args: argparse.Namespace, run: int) -> dict[str, Any]:
    with nats_server(base) as port:
        out = asyncio.run(nats_all(port, args))
    shutil.rmtree(base, ignore_errors=True)
    return out


RUNNERS = {"pymq": run_pymq, "redis": run_redis, "nats": run_nats}


# -- report -----------------------------------------------------------------------------


def figures(per_run: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """key -> system -> summary (or figure -> summary) over the runs; and the runs' own
    ratios of pymq to Redis."""
    out: dict[str, Any] = {}
    for system in SYSTEMS:
        for key, value in per_run[0][system].items():
            values = [run[system][key] for run in per_run]
            if isinstance(value, dict):
                out.setdefault(key, {})[system] = {
                    k: summary([v[k] for v in values]) for k in value
                }
            else:
                out.setdefault(key, {})[system] = summary(values)
    for key in ("backlog", "backlog_1000", "backlog_page"):
        out[f"{key}_x_redis"] = summary(
            [run["pymq"][key] / run["redis"]["backlog"] for run in per_run]
        )
    out["e2e_p99_x_redis"] = summary(
        [run["pymq"]["e2e"]["p99_ms"] / run["redis"]["e2e"]["p99_ms"] for run in per_run]
    )
    return out


def targets(figs: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, what in (
        ("backlog_1000", "pull_batch_size=1000 (the page Redis reads)"),
        ("backlog", "its defaults (an adaptive pull page, 32-1000)"),
        ("backlog_page", "pull_batch_size=1000 and consume_message_batch_max_size=1000"),
    ):
        x = figs[f"{key}_x_redis"]["median"]
        out.append({
            "what": f"push consumer, {what}, backlog with a no-op listener, vs Redis "
                    "XREADGROUP COUNT 1000 + XACK",
            "goal": f">= {BACKLOG_MIN_X_REDIS:g}x", "value": f"{x:.2f}x",
            "met": x >= BACKLOG_MIN_X_REDIS,
        })  # fmt: skip
    p99 = figs["e2e"]["pymq"]["p99_ms"]["median"]
    out.append({
        "what": "push consumer, end-to-end p99 at 5,000 msgs/s",
        "goal": f"<= {E2E_MAX_P99_MS:g} ms", "value": f"{p99:.2f} ms",
        "met": p99 <= E2E_MAX_P99_MS,
    })  # fmt: skip
    if "kill" in figs:
        s = figs["kill"]["pymq"]["resumed_after_notice_s"]["median"]
        out.append({
            "what": "a kill -9'd member's queues consumed again, after the broker's notice",
            "goal": f"<= {REBALANCE_MAX_S:g} s", "value": f"{s:.3f} s",
            "met": s <= REBALANCE_MAX_S,
        })  # fmt: skip
    return out


def print_table(results: dict[str, Any]) -> None:
    figs = results["figures"]

    def cell(fig: dict[str, float] | None, fmt: str) -> str:
        if fig is None:
            return "-"
        return f"{fig['median']:{fmt}} ({fig['min']:{fmt}}-{fig['max']:{fmt}})"

    print(
        f"\npush consumer vs Redis Streams consumer group vs NATS JetStream pull consumer, "
        f"100-byte bodies, median of {results['runs']} (min-max); backlog "
        f"{results['sizes']['messages']:,} (nats {results['sizes']['nats_messages']:,}), "
        f"e2e {results['sizes']['e2e_rate']:,} msgs/s for {results['sizes']['e2e_seconds']:g} s"
    )
    head = f"{'workload':<48}{'unit':<7}" + "".join(f"{s:>30}" for s in SYSTEMS)
    print(head + f"{'pymq/redis':>12}")
    rows = [
        ("1 backlog, no-op listener (pymq: defaults)", "backlog", "", "msgs/s", ",.0f",
         "backlog_x_redis"),
        ("1 backlog, pymq pull_batch_size=1000", "backlog_1000", "", "msgs/s", ",.0f",
         "backlog_1000_x_redis"),
        ("1 the same, consume_message_batch_max_size=1000", "backlog_page", "", "msgs/s",
         ",.0f", "backlog_page_x_redis"),
        ("2 e2e at 5,000 msgs/s: p50", "e2e", "p50_ms", "ms", ".2f", ""),
        ("2 e2e at 5,000 msgs/s: p99", "e2e", "p99_ms", "ms", ".2f", "e2e_p99_x_redis"),
    ]  # fmt: skip
    for label, key, field, unit, fmt, ratio_key in rows:
        cells = []
        for s in SYSTEMS:
            pymq_only = key in ("backlog_1000", "backlog_page")
            fig = figs.get(key, {}).get(s if not pymq_only else "pymq")
            if pymq_only and s != "pymq":
                fig = figs["backlog"][s]  # the peers' row is the same figure
            cells.append(cell(fig[field] if fig is not None and field else fig, fmt))
        ratio = "-"
        if ratio_key:
            ratio = f"{figs[ratio_key]['median']:.2f}x"
        elif field:
            pymq, redis = figs[key]["pymq"][field]["median"], figs[key]["redis"][field]["median"]
            ratio = f"{pymq / redis:.2f}x"
        print(f"{label:<48}{unit:<7}" + "".join(f"{c:>30}" for c in cells) + f"{ratio:>12}")
    if "kill" in figs:
        k = figs["kill"]["pymq"]
        print("3a kill -9 of 1 of 2 members (pymq):")
        for name, label in (
            ("notice_s", "kill -> the survivor notified"),
            ("resumed_after_notice_s", "notice -> its queues consumed again"),
            ("resumed_after_kill_s", "kill -> its queues consumed again"),
        ):
            print(f"   {label:<40} s      {cell(k[name], '.3f')}")
        print(f"   {'messages consumed twice':<40}        {cell(k['redelivered'], ',.0f')}")
        print("3b a third member joins 2 under load (pymq):")
        for allocate in ("sticky", "averagely"):
            j = figs[f"join_{allocate}"]["pymq"]
            print(
                f"   {allocate:<10} queues moved {cell(j['moved'], '.0f')}, messages consumed "
                f"twice {cell(j['redelivered'], ',.0f')} of {j['sent']['median']:,.0f}"
            )
    print(
        "pymq/redis: the runs' own ratios' median (backlog msgs/s above 1 = pymq faster; "
        "ms above 1 = pymq slower)."
    )
    for t in results["targets"]:
        verdict = "met" if t["met"] else "MISSED"
        print(f"target: {t['what']} {t['goal']}: {t['value']} ({verdict})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run (a smoke test)")
    ap.add_argument("--messages", type=int, default=None, help="backlog (200,000; quick 50,000)")
    ap.add_argument("--no-rebalance", dest="rebalance", action="store_false",
                    help="skip the rebalance workloads (3)")  # fmt: skip
    ap.add_argument("--only", default=",".join(SYSTEMS), help="comma list of systems")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--member", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.member is not None:
        return member_main(args.member)
    problem = check_prerequisites()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    args.e2e_rate, args.e2e_seconds = 5_000, 10.0
    if args.quick:
        args.runs, args.messages, args.e2e_seconds = 1, args.messages or 50_000, 4.0
    args.messages = max(PAGE, (args.messages or 200_000) // PAGE * PAGE)
    systems = [s for s in SYSTEMS if s in args.only.split(",")]
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    base = Path(tempfile.mkdtemp(prefix="pymq-push-bench-"))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "command": " ".join(["python", *sys.argv]),
        "load_at_start": load(),
        "versions": versions(),
        "runs": args.runs,
        "sizes": {
            "messages": args.messages,
            "nats_messages": min(args.messages, NATS_MAX_MESSAGES),
            "e2e_rate": args.e2e_rate,
            "e2e_seconds": args.e2e_seconds,
        },
    }
    per_run: list[dict[str, dict[str, Any]]] = []
    try:
        for r in range(args.runs):
            order = systems[r % len(systems) :] + systems[: r % len(systems)]
            run: dict[str, dict[str, Any]] = {}
            for system in order:
                log(f"  run {r + 1}/{args.runs}: {system} (load {load()})")
                run[system] = RUNNERS[system](base / f"run-{r}" / system, args, r)
            per_run.append(run)
    except KeyboardInterrupt:
        log("interrupted: servers stopped")
        return 130
    finally:
        stop_stray_children()
        shutil.rmtree(base, ignore_errors=True)
    results["load_at_end"] = load()
    if set(systems) != set(SYSTEMS):
        print(json.dumps(per_run, indent=1))
        return 0
    results["figures"] = figures(per_run)
    results["targets"] = targets(results["figures"])
    results["per_run"] = per_run
    print_table(results)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
