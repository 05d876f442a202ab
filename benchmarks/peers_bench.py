"""pymq next to Redis Streams and NATS JetStream: same machine, same run, Python clients.

    python benchmarks/peers_bench.py [--runs 3] [--quick] [--messages N] [--parts core,6,8]
                                     [--json-out FILE]

Needs the Debian packages ``redis-server`` and ``nats-server`` (exits 2 with
the package to install when one is missing) and the ``bench`` extra
(``pip install -e '.[bench]'``: redis-py with hiredis, the parser redis-py
recommends, and nats-py).

Every run starts each system fresh on 127.0.0.1, on a free port, with its
data in a temp dir, and stops it at the end (also on Ctrl-C or SIGTERM):

* pymq: ``LocalCluster`` of 1 NameServer and 1 broker, ASYNC_FLUSH; a second
  cluster with a SYNC_FLUSH broker for the durable workload;
* redis-server with ``--save "" --appendonly no``; a second one with
  ``--appendonly yes --appendfsync always`` for the durable workload;
* nats-server ``-js -sd <tmp>`` (file storage, the default), streams with
  default settings.

Workloads, 100-byte bodies, one client process (this one):

1. batched produce, one thread: pymq ``Producer.send_batch`` of 1,000
   (building the ``Message`` objects included), redis-py pipeline of 1,000
   XADD (``transaction=False``), JetStream ``publish_async`` (nats-py's window
   of outstanding acks, 4,000 by default).
   Per-message asynchronous produce, one thread, every message with its own
   result and every result awaited before the clock stops: pymq
   ``send_async`` (a future each; the producer gathers async sends of a topic
   into batch requests while two are on the wire), JetStream
   ``publish_async`` (an ack future each, ``publish_async_completed``);
   redis-py has no per-message asynchronous send.
2. one synchronous message at a time, one thread: pymq ``Producer.send``,
   XADD, ``await js.publish``: msgs/s and p50/p99 latency. Next to it, the
   floors, measured in each system's own minutes: the round trip of a
   trivial request (pymq GET_MAX_OFFSET through ``PullConsumer.max_offset``,
   redis PING, NATS PING/PONG through ``flush``) and a raw TCP echo of 128
   bytes between two threads of this process (``limits.loopback_round_trip``,
   no server). pymq busy-polls by default (broker and client
   ``busy_poll_us`` 100); as extra pymq rows, the single send and the trivial
   request on a cluster and client with it off (``busy_poll_us=0``).
3. durable produce, 64 concurrent producers: SYNC_FLUSH broker with 64
   threads sharing one ``Producer`` (it is thread-safe) calling ``send``
   (sends made while others are on the wire gather into batch requests,
   RocketMQ 5's autoBatch; as an extra pymq row, the same with
   ``auto_batch=False``: a request a message);
   redis with appendfsync always, 64 threads each with its own connection;
   JetStream (default file storage) with 64 asyncio tasks awaiting
   ``js.publish`` on one connection. Not the same promise: pymq and redis
   answer after fsync; JetStream answers once the message is written to its
   file (strace of this workload: one pwrite per message and no fsync).
4. consume everything workload 1 stored, from the start: pymq
   ``PullConsumer.pull`` (decoded ``MessageExt`` objects, what the README
   shows) 10,000 a request, and ``pull_records`` + ``index_records`` (bodies
   addressable without a Python object per message); redis XRANGE pages of
   10,000; a JetStream pull consumer (AckPolicy none, like the other two:
   nobody acks a replay) fetching 10,000 at a time. Every consumer reads
   each message's body (pymq's ``pull`` decodes fields on first read, so
   not reading them would flatter it). nats-py publishes and
   fetches ~15,000 msgs/s here, so NATS gets at most 300,000 messages (a
   million would take over a minute each way).
5. end-to-end latency at a fixed rate, 5,000 msgs/s as 10 messages every
   2 ms, for 10 s: each message carries its send time (taken just before it
   is sent) and the consumer takes it off on arrival. pymq: one
   ``send_async`` per message (every future checked: those done at each tick,
   the rest at the end; only futures in flight are kept) to a topic
   of 4 queues, consumed by a thread per queue, each long-polling
   ``PullConsumer.pull(wait_ms=1000)`` on its queue; redis: a pipeline of 10
   XADD a tick, ``XREAD BLOCK COUNT 1000`` on the stream; JetStream: 10
   ``publish_async`` a tick awaited together, ``fetch(1000)`` with a 2 ms
   expiry (a fetch returns when its batch is full or the request expires:
   with 1 s, p50 was 50-1,000 ms; 2 ms was NATS's best here). Also, as a
   reference row, a JetStream push subscription (callback per message); and
   pymq again with one ``send_batch`` of the tick's 10 messages (the
   producer the peers have: what the per-message sends add), and with
   the consumer threads replaced by a chain of ``pull_async`` long polls a
   queue, each answer read on the connection's reader thread (RocketMQ's
   push consumer's design: one thread hop less). The first second is
   warm-up.

6. body size: workloads 1 and 4 again with 1 KiB and 16 KiB bodies
   (100,000 x 1 KiB and 20,000 x 16 KiB by default: ~100 and ~330 MB, each
   step well under 30 s), every system on a fresh server. Batches (pymq
   ``send_batch``, redis pipeline; JetStream keeps its ack window) are 1,000
   messages of 1 KiB and 200 of 16 KiB: 200 x 16 KiB is ~3.3 MB, under pymq's
   4 MiB request limit. Pages (pull / XRANGE / fetch) are 10,000 of 1 KiB and
   1,024 of 16 KiB (16 MiB). Bodies are hex text (compresses ~2:1, like
   text). The producer zlib-compresses bodies over
   ``compress_msg_body_over_howmuch`` (4096) on single sends only: a
   ``send_batch`` is never compressed (as in RocketMQ, whose batches skip
   compression), so the 16 KiB batched rows store raw bodies. The compression
   path is measured by single synchronous sends of 16 KiB bodies (1,000,
   one thread): every system, and pymq again with compression off and with
   ``compress_type="ZSTD"`` at level 1 (zlib level 5 is RocketMQ's default).
8. scale, 100-byte bodies, batched produce as in workload 1 (256,000
   messages; JetStream 64,000): (a) pymq with 1 and with 2 brokers (a topic
   of 8 queues on each broker; ``send_batch`` round-robins over all queues of
   both), from 1 thread and from 2 threads sharing one ``Producer``; (b) queue
   count 1, 16, 256: pymq one topic of that many queues (each batch of 1,000
   goes to the next queue: at 256 every queue gets one batch); redis that
   many stream keys, each pipeline of 1,000 XADD spreading its messages
   round-robin over them; JetStream one stream with that many subjects
   (``name.0`` ... ``name.N-1``, published round-robin): one stream is one
   log with per-subject indexes, as a pymq topic is one CommitLog with
   per-queue ConsumeQueues (N streams would be N logs). Before the clock each
   system stores one message in every queue / stream key / subject: the
   figure is steady-state throughput, not the cost of creating queues (a
   pymq queue's first message creates its ConsumeQueue file, a directory
   fsync of a few ms).

``--parts core,6,8`` picks workloads 1-5 (``core``), 6 and 8 (default: all).
Each figure is the median of ``--runs`` runs with min and max; the order of
the systems rotates from run to run. Prints one table (ratio = pymq / best
peer) and the JSON (date, machine, command, load, versions).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import connector  # noqa: E402
from connector import (  # noqa: E402
    Admin,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from connector.local import LocalCluster  # noqa: E402
from connector.protocol.scan import index_records  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from limits import loopback_round_trip  # noqa: E402

BODY = b"x" * 100
BATCH = 1000  # messages per send_batch / pipeline
PAGE = 10_000  # messages per pull / XRANGE / fetch
PRODUCERS = 64  # workload 3
E2E_TICK_MS = 2
E2E_WARMUP_S = 1.0
E2E_STAMP = struct.Struct(">qq")  # perf_counter_ns at send, sequence number
E2E_QUEUES = 4  # pymq's e2e topic: a consumer thread long-polls each queue
# nats-py's fetch returns when its batch is full or the pull request expires: a short
# expiry is what gives a JetStream pull consumer a low latency (1 s: p50 of 50-1,000 ms)
NATS_FETCH_EXPIRY_S = 0.002
# nats-py publishes and fetches ~15,000 msgs/s here: 1,000,000 would take over a minute
NATS_MAX_MESSAGES = 300_000
SYSTEMS = ("pymq", "redis", "nats")
PARTS = ("core", "6", "8")  # workloads 1-5, 6 (body size), 8 (brokers, queues)
SIZES = (
    "messages", "nats_messages", "async_messages", "singles", "durable_per_producer",
    "e2e_rate", "e2e_seconds", "sized_messages", "sized_singles", "scale_messages",
    "nats_scale_messages",
)  # fmt: skip
# workload 6: body bytes -> messages per send_batch / pipeline: 200 x 16 KiB is ~3.3 MB,
# under pymq's 4 MiB request limit
SIZED_BATCH = {1024: 1000, 16384: 200}
SIZED_MESSAGES = {1024: 100_000, 16384: 20_000}  # ~100 MB and ~330 MB a step
SIZED_PAGE_BYTES = 16 << 20  # pull / XRANGE / fetch pages of 16 MiB at most
COMPRESS_OVER = 4096  # Producer(compress_msg_body_over_howmuch=...), its default
QUEUE_COUNTS = (1, 16, 256)  # workload 8
# workload 8: 256 batches of 1,000, so that at 256 queues every queue gets one batch
SCALE_MESSAGES = 256_000
NATS_MAX_SCALE = 64_000
# Debian package of each server binary
SERVERS = {"redis-server": "redis-server", "nats-server": "nats-server"}
# pymq topics = redis stream keys = NATS stream names (their subjects in lower case)
BATCH_TOPIC = "PeersBatch"  # workloads 1 and 4
SINGLE_TOPIC = "PeersSingle"  # send_async, workload 2
DURABLE_TOPIC = "PeersDurable"  # workload 3
E2E_TOPIC = "PeersE2E"  # workload 5 (pymq: E2E_QUEUES queues)
E2E_PUSH_TOPIC = "PeersE2EPush"  # workload 5, JetStream push subscription
WARM_TOPIC = "PeersWarm"  # warm-up traffic before the clocks start
BROKERS_TOPIC = "PeersBrokers"  # workload 8a


def size_tag(size: int) -> str:
    return f"{size // 1024}KiB"


def sized_topic(size: int) -> str:
    return f"PeersSize{size_tag(size)}"  # workload 6


def queues_topic(queues: int) -> str:
    return f"PeersQueues{queues}"  # workload 8b


def sized_body(size: int) -> bytes:
    """Hex text of ``size`` bytes: zlib packs it about 2:1, as it does text."""
    return random.Random(size).randbytes(size // 2).hex().encode()


def sized_page(size: int) -> int:
    return min(PAGE, SIZED_PAGE_BYTES // size)


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def percentiles(lat_s: list[float]) -> dict[str, float]:
    lat = sorted(lat_s)
    return {
        "p50_ms": lat[len(lat) // 2] * 1000,
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
    }


def log(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


# -- servers --------------------------------------------------------------------------


def server_binary(name: str) -> str | None:
    # nats-server lands in /usr/sbin, which is not on every user's PATH
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PeerServer:
    """A redis-server or nats-server child process; ready when its log says so."""

    def __init__(self, name: str, argv: list[str], log_path: Path, ready_text: str) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.ready_text = ready_text
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 30.0) -> PeerServer:
        with open(self.log_path, "ab") as out:
            # own session: a Ctrl-C reaches only this script, whose finally stops us
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while self.ready_text not in self.log_path.read_text(errors="replace"):
            if self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace").strip().splitlines()[-3:]
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: {tail}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} not ready within {timeout_s:.0f} s")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@contextlib.contextmanager
def redis_server(data: Path, *, durable: bool) -> Iterator[int]:
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    persistence = (
        ["--appendonly", "yes", "--appendfsync", "always"]
        if durable
        else ["--appendonly", "no"]
    )  # fmt: skip
    argv = [
        str(server_binary("redis-server")), "--port", str(port), "--bind", "127.0.0.1",
        "--dir", str(data), "--save", "", *persistence, "--daemonize", "no",
    ]  # fmt: skip
    server = PeerServer("redis-server", argv, data / "server.log", "Ready to accept connections")
    try:
        server.start()
        yield port
    finally:
        server.stop()


@contextlib.contextmanager
def nats_server(data: Path) -> Iterator[int]:
    data.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [
        str(server_binary("nats-server")), "-a", "127.0.0.1", "-p", str(port),
        "-js", "-sd", str(data / "jetstream"),
    ]  # fmt: skip
    server = PeerServer("nats-server", argv, data / "server.log", "Server is ready")
    try:
        server.start()
        yield port
    finally:
        server.stop()


# -- shared shapes ---------------------------------------------------------------------


def run_threads(count: int, work: Callable[[int], None]) -> float:
    """Run ``work(i)`` on ``count`` threads released together; wall seconds."""
    barrier = threading.Barrier(count + 1)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        barrier.wait()
        try:
            work(i)
        except Exception as exc:  # noqa: BLE001 - re-raised in the main thread below
            errors.append(exc)

    pool = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(count)]
    for t in pool:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return elapsed


def timed_singles(count: int, send: Callable[[], object]) -> dict[str, float]:
    lat = []
    t_all = time.perf_counter()
    for _ in range(count):
        t0 = time.perf_counter()
        send()
        lat.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - t_all
    return {"msgs_per_s": count / elapsed, **percentiles(lat)}


class E2EClock:
    """The fixed-rate schedule of workload 5 and the latencies the consumer sees."""

    def __init__(self, rate: int, seconds: float) -> None:
        self.per_tick = max(1, rate * E2E_TICK_MS // 1000)
        self.ticks = int(seconds * 1000 / E2E_TICK_MS)
        self.total = self.per_tick * self.ticks
        self.warmup = int(rate * E2E_WARMUP_S)
        self.latencies: list[float] = []
        self.received = 0
        self.t0 = 0.0
        self.sent_s = 0.0
        self._lock = threading.Lock()  # consumers of several queues report arrivals

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def delay_s(self, tick: int) -> float:
        return self.t0 + tick * E2E_TICK_MS / 1000 - time.perf_counter()

    def bodies(self, tick: int) -> list[bytes]:
        now = time.perf_counter_ns()
        first = tick * self.per_tick
        return [E2E_STAMP.pack(now, first + i).ljust(len(BODY), b"e") for i in range(self.per_tick)]

    def body(self, seq: int) -> bytes:
        """Message ``seq``, stamped now: for a system that sends each message alone."""
        return E2E_STAMP.pack(time.perf_counter_ns(), seq).ljust(len(BODY), b"e")

    def sent(self) -> None:
        self.sent_s = time.perf_counter() - self.t0

    def arrived(self, bodies: list[bytes]) -> None:
        now = time.perf_counter_ns()
        with self._lock:
            for body in bodies:
                stamp, seq = E2E_STAMP.unpack_from(body)
                if seq >= self.warmup:
                    self.latencies.append((now - stamp) / 1e9)
            self.received += len(bodies)

    def result(self) -> dict[str, float]:
        if self.received != self.total:
            raise RuntimeError(f"e2e: {self.received} of {self.total} messages arrived")
        return {**percentiles(self.latencies), "sent_msgs_per_s": self.total / self.sent_s}


# -- pymq ------------------------------------------------------------------------------


def pymq_env(flush: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(PYMQ_LOG_LEVEL="warning", PYMQ_FLUSH_DISK_TYPE=flush)
    return env


def pymq_topics(namesrv: str, topics: dict[str, int], *, brokers: int = 1) -> None:
    """Create the topics (``queues`` on every broker) and wait (bounded) until the
    NameServer routes them."""
    with Admin(namesrv=namesrv) as admin:
        for topic, queues in topics.items():
            admin.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)
        deadline = time.monotonic() + 30
        for topic, queues in topics.items():
            while True:
                route = admin.namesrv.topic_route(topic)
                routed = 0 if route is None else sum(q.write_queue_nums for q in route.queues)
                if routed == queues * brokers:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {topic} not routed within 30 s")
                time.sleep(0.05)


def pymq_consume(
    consumer: PullConsumer, topic: str, expected: int, *, records: bool, page: int = PAGE
) -> float:
    total = read_bytes = 0  # every system's consumer reads every body
    t0 = time.perf_counter()
    for mq in consumer.fetch_queues(topic):
        offset = 0
        while True:
            if records:
                res = consumer.pull_records(mq, offset, page)
                n = len(index_records(res.records)) if res.status is PullStatus.FOUND else 0
            else:
                res = consumer.pull(mq, offset, page)
                n = len(res.messages)
                read_bytes += sum(len(m.body) for m in res.messages)
            if res.status is not PullStatus.FOUND:
                break
            total += n
            offset = res.next_begin_offset
    elapsed = time.perf_counter() - t0
    if total != expected or (not records and read_bytes == 0 and expected):
        raise RuntimeError(f"pymq consume: read {total} of {expected}")
    return total / elapsed


def pymq_e2e(
    producer: Producer,
    consumer: PullConsumer,
    clock: E2EClock,
    *,
    batched: bool = False,
    callbacks: bool = False,
) -> dict[str, float]:
    """One ``send_async`` per message (``batched``: one ``send_batch`` a tick, as the
    peers send); a consumer thread long-polling each queue (``callbacks``: a chain of
    ``pull_async`` long polls a queue, read on the connection's reader thread)."""
    queues = consumer.fetch_queues(E2E_TOPIC)
    starts = [consumer.max_offset(mq) for mq in queues]  # before the first send
    deadline = time.monotonic() + clock.ticks * E2E_TICK_MS / 1000 + 30
    errors: list[BaseException] = []
    chains_ended = threading.Semaphore(0)

    def chain(mq: MessageQueue, offset: int) -> None:
        def answered(res: PullResult | None, error: BaseException | None) -> None:
            try:
                if error is not None:
                    raise error
                assert res is not None
                after = offset
                if res.status is PullStatus.FOUND:
                    clock.arrived([m.body for m in res.messages])
                    after = res.next_begin_offset
                if clock.received < clock.total and time.monotonic() < deadline:
                    chain(mq, after)
                    return
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                errors.append(exc)
            chains_ended.release()

        consumer.pull_async(mq, offset, answered, 1000, wait_ms=1000)

    def consume(mq: MessageQueue, offset: int) -> None:
        try:
            while clock.received < clock.total and time.monotonic() < deadline:
                res = consumer.pull(mq, offset, 1000, wait_ms=1000)
                if res.status is PullStatus.FOUND:
                    clock.arrived([m.body for m in res.messages])
                    offset = res.next_begin_offset
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    readers = [
        threading.Thread(target=consume, args=(mq, start), daemon=True)
        for mq, start in zip(queues, starts, strict=True)
    ]
    if callbacks:
        readers = []
        for mq, start in zip(queues, starts, strict=True):
            chain(mq, start)
    for t in readers:
        t.start()
    # every send's result is checked, as an application would: those answered by the
    # next tick at once, the rest at the end (the futures in flight, not all of them, stay
    # alive: 50,000 kept to the end made the collector's full passes part of the figure)
    pending: deque[Future[SendResult]] = deque()
    failed = 0
    clock.start()
    for tick in range(clock.ticks):
        delay = clock.delay_s(tick)
        if delay > 0:
            time.sleep(delay)
        if batched:
            producer.send_batch([Message(topic=E2E_TOPIC, body=b) for b in clock.bodies(tick)])
            continue
        while pending and pending[0].done():
            failed += pending.popleft().result().status is not SendStatus.SEND_OK
        first = tick * clock.per_tick
        for seq in range(first, first + clock.per_tick):
            pending.append(producer.send_async(Message(topic=E2E_TOPIC, body=clock.body(seq))))
    clock.sent()
    for t in readers:
        t.join()
    if callbacks:
        for _ in queues:  # each chain ends by the deadline or a long poll later
            chains_ended.acquire(timeout=max(deadline - time.monotonic(), 0) + 5)
    if errors:
        raise errors[0]
    failed += sum(f.result(30).status is not SendStatus.SEND_OK for f in pending)
    if failed:
        raise RuntimeError(f"e2e: {failed} sends not SEND_OK")
    return clock.result()


def pymq_batches(producer: Producer, topic: str, body: bytes, count: int, batch: int) -> float:
    """``count`` messages as ``send_batch`` calls of ``batch``, building the ``Message``
    objects included (as an application does); msgs/s."""
    t0 = time.perf_counter()
    for _ in range(count // batch):
        producer.send_batch([Message(topic=topic, body=body) for _ in range(batch)])
    return count / (time.perf_counter() - t0)


def pymq_warm(producer: Producer, batches: int = 5) -> None:
    """Routes, connections, fresh file pages, before any clock starts."""
    for _ in range(200):
        producer.send(Message(topic=WARM_TOPIC, body=BODY))
    for _ in range(batches):
        producer.send_batch([Message(topic=WARM_TOPIC, body=BODY) for _ in range(BATCH)])


def run_pymq(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "core" in args.parts:
        out.update(pymq_core(base, args))
    if "6" in args.parts:
        os.sync()
        out.update(pymq_sizes(base / "sizes", args))
    if "8" in args.parts:
        os.sync()
        out.update(pymq_scale(base, args))
    return out


def pymq_sizes(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Workload 6: batched produce and consume of 1 KiB and 16 KiB bodies; 16 KiB single
    sends, compressed (the default over 4 KiB: zlib level 5), with zstd level 1, and not."""
    out: dict[str, Any] = {}
    with LocalCluster(base, brokers=1, namesrvs=1, env=pymq_env("ASYNC_FLUSH")) as c:
        ns = c.namesrv_addr
        topics = {sized_topic(size): 8 for size in SIZED_BATCH}
        pymq_topics(ns, {**topics, SINGLE_TOPIC: 8, WARM_TOPIC: 8})
        with (
            Producer(group="peers-bench", namesrv=ns) as producer,
            # compression off: the same single sends, raw
            Producer(group="peers-bench-raw", namesrv=ns, compress_msg_body_over_howmuch=1 << 30)
            as raw,
            Producer(group="peers-bench", namesrv=ns, compress_type="ZSTD", compress_level=1)
            as zstd,
            PullConsumer(group="peers-bench", namesrv=ns) as consumer,
        ):  # fmt: skip
            pymq_warm(producer)
            pymq_consume(consumer, WARM_TOPIC, 200 + 5 * BATCH, records=True)
            for size, batch in SIZED_BATCH.items():
                tag, topic, n = size_tag(size), sized_topic(size), args.sized_messages[size]
                body = sized_body(size)
                out[f"batch_{tag}"] = pymq_batches(producer, topic, body, n, batch)
                page = sized_page(size)
                out[f"consume_{tag}"] = pymq_consume(consumer, topic, n, records=False, page=page)
                out[f"consume_records_{tag}"] = pymq_consume(
                    consumer, topic, n, records=True, page=page
                )
            big = sized_body(16384)
            for p in (producer, raw, zstd):
                p.send(Message(topic=SINGLE_TOPIC, body=big))  # route and connection
            out["single_16KiB"] = timed_singles(
                args.sized_singles, lambda: producer.send(Message(topic=SINGLE_TOPIC, body=big))
            )
            out["single_16KiB_raw"] = timed_singles(
                args.sized_singles, lambda: raw.send(Message(topic=SINGLE_TOPIC, body=big))
            )
            out["single_16KiB_zstd"] = timed_singles(
                args.sized_singles, lambda: zstd.send(Message(topic=SINGLE_TOPIC, body=big))
            )
    shutil.rmtree(base, ignore_errors=True)
    return out


def pymq_threaded_batches(producer: Producer, topic: str, count: int, threads: int) -> float:
    per_thread = count // threads // BATCH

    def work(_: int) -> None:
        for _ in range(per_thread):
            producer.send_batch([Message(topic=topic, body=BODY) for _ in range(BATCH)])

    return per_thread * BATCH * threads / run_threads(threads, work)


def pymq_scale(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Workload 8: batched produce on 1 and 2 brokers, and to topics of 1, 16, 256 queues."""
    out: dict[str, Any] = {}
    n = args.scale_messages
    for brokers in (1, 2):
        data = base / f"brokers-{brokers}"
        with LocalCluster(data, brokers=brokers, namesrvs=1, env=pymq_env("ASYNC_FLUSH")) as c:
            ns = c.namesrv_addr
            topics = {BROKERS_TOPIC: 8, WARM_TOPIC: 8}
            if brokers == 1:
                topics.update({queues_topic(q): q for q in QUEUE_COUNTS})
            pymq_topics(ns, topics, brokers=brokers)
            with Producer(group="peers-bench", namesrv=ns) as producer:
                pymq_warm(producer, batches=8 * brokers)  # every queue of every broker
                out[f"brokers_{brokers}"] = pymq_batches(producer, BROKERS_TOPIC, BODY, n, BATCH)
                out[f"brokers_{brokers}_2threads"] = pymq_threaded_batches(
                    producer, BROKERS_TOPIC, n, 2
                )
                if brokers == 1:
                    with PullConsumer(group="peers-bench", namesrv=ns) as consumer:
                        for q in QUEUE_COUNTS:  # every queue's files exist before the clock
                            for mq in consumer.fetch_queues(queues_topic(q)):
                                producer.send(Message(topic=mq.topic, body=BODY), queue=mq)
                    for q in QUEUE_COUNTS:
                        out[f"queues_{q}"] = pymq_batches(producer, queues_topic(q), BODY, n, BATCH)
        shutil.rmtree(data, ignore_errors=True)
        os.sync()
    return out


def pymq_async(producer: Producer, count: int) -> float:
    """``count`` ``send_async`` calls from one thread, then every future's result;
    msgs/s. Each result is checked after the clock (SEND_OK, a queue offset of its own)."""
    t0 = time.perf_counter()
    futures = [producer.send_async(Message(topic=SINGLE_TOPIC, body=BODY)) for _ in range(count)]
    results = [f.result(120) for f in futures]
    rate = count / (time.perf_counter() - t0)
    placed = {
        (r.queue.broker_name, r.queue.queue_id, r.queue_offset)
        for r in results
        if r.status is SendStatus.SEND_OK
    }
    if len(placed) != count:
        raise RuntimeError(f"send_async: {count - len(placed)} of {count} not stored alone")
    return rate


def pymq_durable(producer: Producer, per_producer: int) -> float:
    """``PRODUCERS`` threads, each ``per_producer`` sync sends; msgs/s."""

    def durable(_: int) -> None:
        for _ in range(per_producer):
            producer.send(Message(topic=DURABLE_TOPIC, body=BODY))

    return PRODUCERS * per_producer / run_threads(PRODUCERS, durable)


def pymq_asleep(base: Path, singles: int) -> dict[str, Any]:
    """Workload 2 with busy polling off on both ends (broker and client
    ``busy_poll_us=0``): every answer wakes a sleeping thread, for scale."""
    env = {**pymq_env("ASYNC_FLUSH"), "PYMQ_BUSY_POLL_US": "0"}
    with LocalCluster(base, brokers=1, namesrvs=1, env=env) as c:
        pymq_topics(c.namesrv_addr, {SINGLE_TOPIC: 8, WARM_TOPIC: 8})
        with (
            Producer(group="peers-bench", namesrv=c.namesrv_addr, busy_poll_us=0) as producer,
            PullConsumer(group="peers-bench", namesrv=c.namesrv_addr, busy_poll_us=0) as consumer,
        ):
            pymq_warm(producer, batches=0)
            mq = consumer.fetch_queues(SINGLE_TOPIC)[0]
            for _ in range(200):
                consumer.max_offset(mq)
            out = {
                "trivial_asleep": timed_singles(singles, lambda: consumer.max_offset(mq)),
                "single_asleep": timed_singles(
                    singles, lambda: producer.send(Message(topic=SINGLE_TOPIC, body=BODY))
                ),
            }
    shutil.rmtree(base, ignore_errors=True)
    return out


def pymq_core(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with LocalCluster(base / "async", brokers=1, namesrvs=1, env=pymq_env("ASYNC_FLUSH")) as c:
        ns = c.namesrv_addr
        pymq_topics(ns, {BATCH_TOPIC: 8, SINGLE_TOPIC: 8, WARM_TOPIC: 8, E2E_TOPIC: E2E_QUEUES})
        with (
            Producer(group="peers-bench", namesrv=ns) as producer,
            PullConsumer(group="peers-bench", namesrv=ns) as consumer,
        ):
            pymq_warm(producer)
            out["batch"] = pymq_batches(producer, BATCH_TOPIC, BODY, args.messages, BATCH)

            # the connection's reader thread and the timeout timer start with the first
            # async send: before the clock
            warm_async = [
                producer.send_async(Message(topic=WARM_TOPIC, body=BODY)) for _ in range(1000)
            ]
            for f in warm_async:
                f.result(60)
            out["async"] = pymq_async(producer, args.async_messages)

            # and the compiled record index loaded before the clock
            warm = 200 + 5 * BATCH + len(warm_async)
            pymq_consume(consumer, WARM_TOPIC, warm, records=True)
            out["consume"] = pymq_consume(consumer, BATCH_TOPIC, args.messages, records=False)
            out["consume_records"] = pymq_consume(
                consumer, BATCH_TOPIC, args.messages, records=True
            )
            out["echo"] = loopback_round_trip(args.singles)
            mq = consumer.fetch_queues(SINGLE_TOPIC)[0]
            for _ in range(200):
                consumer.max_offset(mq)
            out["trivial"] = timed_singles(args.singles, lambda: consumer.max_offset(mq))
            out["single"] = timed_singles(
                args.singles, lambda: producer.send(Message(topic=SINGLE_TOPIC, body=BODY))
            )
            out["e2e"] = pymq_e2e(producer, consumer, E2EClock(args.e2e_rate, args.e2e_seconds))
            out["e2e_batch"] = pymq_e2e(
                producer, consumer, E2EClock(args.e2e_rate, args.e2e_seconds), batched=True
            )
            out["e2e_callback"] = pymq_e2e(
                producer, consumer, E2EClock(args.e2e_rate, args.e2e_seconds), callbacks=True
            )
    shutil.rmtree(base / "async", ignore_errors=True)
    out.update(pymq_asleep(base / "asleep", args.singles))
    os.sync()  # the durable run measures its own fsyncs, not the writeback of the above
    with LocalCluster(base / "sync", brokers=1, namesrvs=1, env=pymq_env("SYNC_FLUSH")) as c:
        pymq_topics(c.namesrv_addr, {DURABLE_TOPIC: 8})
        for key, auto_batch in (("durable", True), ("durable_unbatched", False)):
            with Producer(
                group="peers-bench", namesrv=c.namesrv_addr, auto_batch=auto_batch
            ) as producer:
                for _ in range(200):
                    producer.send(Message(topic=DURABLE_TOPIC, body=BODY))
                out[key] = pymq_durable(producer, args.durable_per_producer)
    shutil.rmtree(base / "sync", ignore_errors=True)
    return out


# -- redis -----------------------------------------------------------------------------


def redis_e2e(port: int, clock: E2EClock) -> dict[str, float]:
    import redis

    key = E2E_TOPIC

    def consume() -> None:
        r = redis.Redis(port=port)
        last: bytes | str = "0-0"
        deadline = time.monotonic() + clock.ticks * E2E_TICK_MS / 1000 + 30
        while clock.received < clock.total and time.monotonic() < deadline:
            answer: Any = r.xread({key: last}, count=1000, block=1000)
            if answer:
                entries = answer[0][1]
                clock.arrived([fields[b"d"] for _, fields in entries])
                last = entries[-1][0]
        r.close()

    r = redis.Redis(port=port)
    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    clock.start()
    pipe = r.pipeline(transaction=False)
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
    return clock.result()


def redis_warm(r: Any) -> None:
    pipe = r.pipeline(transaction=False)
    for _ in range(200):
        r.xadd(WARM_TOPIC, {b"d": BODY})
    for _ in range(5):
        for _ in range(BATCH):
            pipe.xadd(WARM_TOPIC, {b"d": BODY})
        pipe.execute()


def redis_batches(r: Any, keys: list[str], body: bytes, count: int, batch: int) -> float:
    """Pipelines (no transaction) of ``batch`` XADD, round-robin over ``keys``; msgs/s."""
    pipe = r.pipeline(transaction=False)
    fields = {b"d": body}
    t0 = time.perf_counter()
    if len(keys) == 1:
        (key,) = keys
        for _ in range(count // batch):
            for _ in range(batch):
                pipe.xadd(key, fields)
            pipe.execute()
    else:
        spread = len(keys)
        for b in range(count // batch):
            first = b * batch
            for i in range(first, first + batch):
                pipe.xadd(keys[i % spread], fields)
            pipe.execute()
    return count / (time.perf_counter() - t0)


def redis_consume(r: Any, key: str, expected: int, page_size: int = PAGE) -> float:
    total, read_bytes, last = 0, 0, b"-"
    t0 = time.perf_counter()
    while True:
        page: Any = r.xrange(key, min=last, max="+", count=page_size)
        if not page:
            break
        total += len(page)
        read_bytes += sum(len(fields[b"d"]) for _, fields in page)
        last = b"(" + page[-1][0]
    rate = total / (time.perf_counter() - t0)
    if total != expected or (expected and read_bytes == 0):
        raise RuntimeError(f"redis consume: read {total} of {expected}")
    return rate


def run_redis(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "core" in args.parts:
        out.update(redis_core(base, args))
    if "6" in args.parts:
        os.sync()
        out.update(redis_sizes(base / "sizes", args))
    if "8" in args.parts:
        os.sync()
        out.update(redis_scale(base / "scale", args))
    return out


def redis_sizes(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    import redis

    out: dict[str, Any] = {}
    with redis_server(base, durable=False) as port:
        r = redis.Redis(port=port)
        redis_warm(r)
        for size, batch in SIZED_BATCH.items():
            tag, key, n = size_tag(size), sized_topic(size), args.sized_messages[size]
            out[f"batch_{tag}"] = redis_batches(r, [key], sized_body(size), n, batch)
            out[f"consume_{tag}"] = redis_consume(r, key, n, sized_page(size))
        big = sized_body(16384)
        r.xadd(SINGLE_TOPIC, {b"d": big})
        out["single_16KiB"] = timed_singles(
            args.sized_singles, lambda: r.xadd(SINGLE_TOPIC, {b"d": big})
        )
        r.close()
    shutil.rmtree(base, ignore_errors=True)
    return out


def redis_scale(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    import redis

    out: dict[str, Any] = {}
    with redis_server(base, durable=False) as port:
        r = redis.Redis(port=port)
        redis_warm(r)
        for q in QUEUE_COUNTS:
            keys = [f"{queues_topic(q)}-{i}" for i in range(q)]
            for key in keys:  # every stream exists before the clock, as pymq's queues do
                r.xadd(key, {b"d": BODY})
            out[f"queues_{q}"] = redis_batches(r, keys, BODY, args.scale_messages, BATCH)
        r.close()
    shutil.rmtree(base, ignore_errors=True)
    return out


def redis_core(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    import redis

    out: dict[str, Any] = {}
    with redis_server(base / "plain", durable=False) as port:
        r = redis.Redis(port=port)
        redis_warm(r)
        out["batch"] = redis_batches(r, [BATCH_TOPIC], BODY, args.messages, BATCH)
        out["consume"] = redis_consume(r, BATCH_TOPIC, args.messages)

        out["echo"] = loopback_round_trip(args.singles)
        out["trivial"] = timed_singles(args.singles, r.ping)
        out["single"] = timed_singles(args.singles, lambda: r.xadd(SINGLE_TOPIC, {b"d": BODY}))
        out["e2e"] = redis_e2e(port, E2EClock(args.e2e_rate, args.e2e_seconds))
        r.close()
    shutil.rmtree(base / "plain", ignore_errors=True)
    os.sync()
    with redis_server(base / "durable", durable=True) as port:
        clients = [redis.Redis(port=port) for _ in range(PRODUCERS)]
        for c in clients:  # one connection each, opened before the clock
            c.xadd(WARM_TOPIC, {b"d": BODY})

        def durable(i: int) -> None:
            c = clients[i]
            for _ in range(args.durable_per_producer):
                c.xadd(DURABLE_TOPIC, {b"d": BODY})

        elapsed = run_threads(PRODUCERS, durable)
        out["durable"] = PRODUCERS * args.durable_per_producer / elapsed
        for c in clients:
            c.close()
    shutil.rmtree(base / "durable", ignore_errors=True)
    return out


# -- NATS JetStream --------------------------------------------------------------------


async def nats_workloads(port: int, args: argparse.Namespace) -> dict[str, Any]:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

    out: dict[str, Any] = {}
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        for name in (BATCH_TOPIC, SINGLE_TOPIC, WARM_TOPIC):
            await js.add_stream(name=name, subjects=[name.lower()], storage=StorageType.FILE)
        warm = WARM_TOPIC.lower()
        for _ in range(200):
            await js.publish(warm, BODY)
        for _ in range(5 * BATCH):
            await js.publish_async(warm, BODY)
        await js.publish_async_completed()

        subject, n = BATCH_TOPIC.lower(), args.nats_messages
        t0 = time.perf_counter()
        for _ in range(n):
            await js.publish_async(subject, BODY)
        await js.publish_async_completed()
        out["batch"] = n / (time.perf_counter() - t0)

        replay = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
        psub = await js.pull_subscribe(subject, stream=BATCH_TOPIC, config=replay)
        total = read_bytes = 0
        t0 = time.perf_counter()
        while total < n:
            msgs = await psub.fetch(PAGE, timeout=10)
            total += len(msgs)
            read_bytes += sum(len(m.data) for m in msgs)
        out["consume"] = total / (time.perf_counter() - t0)
        if total != n:
            raise RuntimeError(f"nats consume: read {total} of {n}")
        await psub.unsubscribe()

        single = SINGLE_TOPIC.lower()
        t0 = time.perf_counter()
        acks = [await js.publish_async(single, BODY) for _ in range(args.async_messages)]
        await js.publish_async_completed()
        out["async"] = args.async_messages / (time.perf_counter() - t0)
        placed = {(await ack).seq for ack in acks}  # each message's own ack, after the clock
        if len(placed) != args.async_messages:
            raise RuntimeError(f"nats publish_async: {len(placed)} of {args.async_messages}")

        out["echo"] = loopback_round_trip(args.singles)
        out["trivial"] = await nats_timed(args.singles, nc.flush)
        out["single"] = await nats_timed(args.singles, lambda: js.publish(single, BODY))

        out["e2e"] = await nats_e2e(js, E2EClock(args.e2e_rate, args.e2e_seconds), push=False)
        out["e2e_push"] = await nats_e2e(js, E2EClock(args.e2e_rate, args.e2e_seconds), push=True)
    finally:
        await nc.close()
    return out


async def nats_timed(count: int, call: Callable[[], Any]) -> dict[str, float]:
    """``await call()`` ``count`` times, one after another: msgs/s, p50 and p99."""
    lat = []
    t_all = time.perf_counter()
    for _ in range(count):
        t0 = time.perf_counter()
        await call()
        lat.append(time.perf_counter() - t0)
    return {"msgs_per_s": count / (time.perf_counter() - t_all), **percentiles(lat)}


async def nats_e2e(js: Any, clock: E2EClock, *, push: bool) -> dict[str, float]:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

    stream = E2E_PUSH_TOPIC if push else E2E_TOPIC
    subject = stream.lower()
    await js.add_stream(name=stream, subjects=[subject], storage=StorageType.FILE)
    config = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
    done = asyncio.Event()

    async def on_message(msg: Any) -> None:
        clock.arrived([msg.data])
        if clock.received >= clock.total:
            done.set()

    async def pull() -> None:
        deadline = time.monotonic() + clock.ticks * E2E_TICK_MS / 1000 + 30
        while clock.received < clock.total and time.monotonic() < deadline:
            try:  # asyncio's TimeoutError (nats' subclasses it): nothing within the expiry
                msgs = await sub.fetch(1000, timeout=NATS_FETCH_EXPIRY_S)
            except asyncio.TimeoutError:
                continue
            clock.arrived([m.data for m in msgs])
        done.set()

    if push:
        sub = await js.subscribe(subject, stream=stream, cb=on_message, config=config)
    else:
        sub = await js.pull_subscribe(subject, stream=stream, config=config)
        reader = asyncio.create_task(pull())
    clock.start()
    for tick in range(clock.ticks):
        delay = clock.delay_s(tick)
        if delay > 0:
            await asyncio.sleep(delay)
        acks = [await js.publish_async(subject, body) for body in clock.bodies(tick)]
        await asyncio.gather(*acks)
    clock.sent()
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(done.wait(), 30)
    if not push:
        await reader
    await sub.unsubscribe()
    return clock.result()


async def nats_durable(port: int, args: argparse.Namespace) -> float:
    import nats
    from nats.js.api import StorageType

    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        subject = DURABLE_TOPIC.lower()
        await js.add_stream(name=DURABLE_TOPIC, subjects=[subject], storage=StorageType.FILE)
        for _ in range(200):
            await js.publish(subject, BODY)

        async def producer() -> None:
            for _ in range(args.durable_per_producer):
                await js.publish(subject, BODY)

        t0 = time.perf_counter()
        await asyncio.gather(*(producer() for _ in range(PRODUCERS)))
        return float(PRODUCERS * args.durable_per_producer / (time.perf_counter() - t0))
    finally:
        await nc.close()


async def nats_warm(js: Any) -> None:
    from nats.js.api import StorageType

    await js.add_stream(name=WARM_TOPIC, subjects=[WARM_TOPIC.lower()], storage=StorageType.FILE)
    for _ in range(200):
        await js.publish(WARM_TOPIC.lower(), BODY)
    for _ in range(5 * BATCH):
        await js.publish_async(WARM_TOPIC.lower(), BODY)
    await js.publish_async_completed()


async def nats_publish(js: Any, subjects: list[str], body: bytes, count: int) -> float:
    """``publish_async`` round-robin over ``subjects`` (nats-py's window of outstanding
    acks), then wait for every ack; msgs/s."""
    spread = len(subjects)
    t0 = time.perf_counter()
    for i in range(count):
        await js.publish_async(subjects[i % spread], body)
    await js.publish_async_completed()
    return count / (time.perf_counter() - t0)


async def nats_consume(js: Any, stream: str, expected: int, page: int) -> float:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    replay = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
    psub = await js.pull_subscribe(stream.lower(), stream=stream, config=replay)
    total = 0
    t0 = time.perf_counter()
    while total < expected:
        total += len(await psub.fetch(page, timeout=10))
    rate = total / (time.perf_counter() - t0)
    await psub.unsubscribe()
    if total != expected:
        raise RuntimeError(f"nats consume: read {total} of {expected}")
    return rate


async def nats_sizes(port: int, args: argparse.Namespace) -> dict[str, Any]:
    import nats
    from nats.js.api import StorageType

    out: dict[str, Any] = {}
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        await nats_warm(js)
        for size in SIZED_BATCH:
            tag, stream, n = size_tag(size), sized_topic(size), args.sized_messages[size]
            await js.add_stream(name=stream, subjects=[stream.lower()], storage=StorageType.FILE)
            out[f"batch_{tag}"] = await nats_publish(js, [stream.lower()], sized_body(size), n)
            out[f"consume_{tag}"] = await nats_consume(js, stream, n, sized_page(size))
        single = SINGLE_TOPIC.lower()
        await js.add_stream(name=SINGLE_TOPIC, subjects=[single], storage=StorageType.FILE)
        big = sized_body(16384)
        await js.publish(single, big)
        lat = []
        t_all = time.perf_counter()
        for _ in range(args.sized_singles):
            t0 = time.perf_counter()
            await js.publish(single, big)
            lat.append(time.perf_counter() - t0)
        out["single_16KiB"] = {
            "msgs_per_s": args.sized_singles / (time.perf_counter() - t_all),
            **percentiles(lat),
        }
    finally:
        await nc.close()
    return out


async def nats_scale(port: int, args: argparse.Namespace) -> dict[str, Any]:
    import nats
    from nats.js.api import StorageType

    out: dict[str, Any] = {}
    nc = await nats.connect(f"nats://127.0.0.1:{port}")
    try:
        js = nc.jetstream()
        await nats_warm(js)
        for q in QUEUE_COUNTS:
            stream = queues_topic(q)  # one stream, q subjects
            prefix = stream.lower()
            await js.add_stream(name=stream, subjects=[f"{prefix}.*"], storage=StorageType.FILE)
            subjects = [f"{prefix}.{i}" for i in range(q)]
            for subject in subjects:  # every subject used before the clock, as pymq's queues
                await js.publish(subject, BODY)
            out[f"queues_{q}"] = await nats_publish(js, subjects, BODY, args.nats_scale_messages)
    finally:
        await nc.close()
    return out


def run_nats(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "core" in args.parts:
        with nats_server(base / "plain") as port:
            out.update(asyncio.run(nats_workloads(port, args)))
        shutil.rmtree(base / "plain", ignore_errors=True)
        os.sync()
        with nats_server(base / "durable") as port:
            out["durable"] = asyncio.run(nats_durable(port, args))
        shutil.rmtree(base / "durable", ignore_errors=True)
    for part, name, workloads in (("6", "sizes", nats_sizes), ("8", "scale", nats_scale)):
        if part in args.parts:
            os.sync()
            with nats_server(base / name) as port:
                out.update(asyncio.run(workloads(port, args)))
            shutil.rmtree(base / name, ignore_errors=True)
    return out


# -- report ----------------------------------------------------------------------------

RUNNERS: dict[str, Callable[[Path, argparse.Namespace], dict[str, Any]]] = {
    "pymq": run_pymq,
    "redis": run_redis,
    "nats": run_nats,
}

# (label, workload key, figure inside it or "", unit, pymq-only row compared with this key)
ROWS: list[tuple[str, str, str, str, str]] = [
    ("1 batched produce", "batch", "", "msgs/s", ""),
    ("1 per-message async produce, 1 thread, every result awaited", "async", "", "msgs/s", ""),
    ("2 single sync send, 1 thread", "single", "msgs_per_s", "msgs/s", ""),
    ("2 single sync send: p50", "single", "p50_ms", "ms", ""),
    ("2 single sync send: p99", "single", "p99_ms", "ms", ""),
    ("2 pymq single sync send, busy polling off: p50", "single_asleep", "p50_ms", "ms", "single"),
    ("2 pymq single sync send, busy polling off: p99", "single_asleep", "p99_ms", "ms", "single"),
    ("2 pymq trivial round trip, busy polling off: p50", "trivial_asleep", "p50_ms", "ms",
     "trivial"),
    ("2 floor: trivial request round trip: p50", "trivial", "p50_ms", "ms", ""),
    ("2 floor: trivial request round trip: p99", "trivial", "p99_ms", "ms", ""),
    ("2 floor: raw TCP echo, no server: p50", "echo", "p50_ms", "ms", ""),
    ("2 floor: raw TCP echo, no server: p99", "echo", "p99_ms", "ms", ""),
    ("3 durable, 64 producers", "durable", "", "msgs/s", ""),
    ("3 pymq durable, 64 producers, auto_batch=False (vs row 3)", "durable_unbatched", "", "msgs/s",
     "durable"),
    ("4 consume from start (pymq: pull)", "consume", "", "msgs/s", ""),
    ("4 pymq pull_records + index (vs row 4)", "consume_records", "", "msgs/s", "consume"),
    ("5 e2e at fixed rate: p50", "e2e", "p50_ms", "ms", ""),
    ("5 e2e at fixed rate: p99", "e2e", "p99_ms", "ms", ""),
    ("5 e2e: rate the producer kept up", "e2e", "sent_msgs_per_s", "msgs/s", ""),
    ("5 pymq e2e, a send_batch of 10 a tick: p50", "e2e_batch", "p50_ms", "ms", "e2e"),
    ("5 pymq e2e, a send_batch of 10 a tick: p99", "e2e_batch", "p99_ms", "ms", "e2e"),
    ("5 pymq e2e, consumed by pull_async chains: p50", "e2e_callback", "p50_ms", "ms", "e2e"),
    ("5 pymq e2e, consumed by pull_async chains: p99", "e2e_callback", "p99_ms", "ms", "e2e"),
    ("5 e2e, JetStream push subscription: p50", "e2e_push", "p50_ms", "ms", ""),
    ("5 e2e, JetStream push subscription: p99", "e2e_push", "p99_ms", "ms", ""),
    ("6 batched produce, 1 KiB", "batch_1KiB", "", "msgs/s", ""),
    ("6 consume from start, 1 KiB (pymq: pull)", "consume_1KiB", "", "msgs/s", ""),
    ("6 pymq pull_records + index, 1 KiB", "consume_records_1KiB", "", "msgs/s", "consume_1KiB"),
    ("6 batched produce, 16 KiB (not compressed)", "batch_16KiB", "", "msgs/s", ""),
    ("6 consume from start, 16 KiB (pymq: pull)", "consume_16KiB", "", "msgs/s", ""),
    ("6 pymq pull_records + index, 16 KiB", "consume_records_16KiB", "", "msgs/s",
     "consume_16KiB"),
    ("6 single send 16 KiB (pymq: zlib)", "single_16KiB", "msgs_per_s", "msgs/s", ""),
    ("6 single send 16 KiB: p50", "single_16KiB", "p50_ms", "ms", ""),
    ("6 single send 16 KiB: p99", "single_16KiB", "p99_ms", "ms", ""),
    ("6 pymq single send 16 KiB, no compression", "single_16KiB_raw", "msgs_per_s", "msgs/s",
     "single_16KiB"),
    ("6 pymq single 16 KiB, no compression: p50", "single_16KiB_raw", "p50_ms", "ms",
     "single_16KiB"),
    ("6 pymq single send 16 KiB, zstd level 1", "single_16KiB_zstd", "msgs_per_s", "msgs/s",
     "single_16KiB"),
    ("6 pymq single 16 KiB, zstd level 1: p50", "single_16KiB_zstd", "p50_ms", "ms",
     "single_16KiB"),
    ("8a pymq 1 broker, 1 thread (vs row 1)", "brokers_1", "", "msgs/s", "batch"),
    ("8a pymq 1 broker, 2 threads (vs row 1)", "brokers_1_2threads", "", "msgs/s", "batch"),
    ("8a pymq 2 brokers, 1 thread (vs row 1)", "brokers_2", "", "msgs/s", "batch"),
    ("8a pymq 2 brokers, 2 threads (vs row 1)", "brokers_2_2threads", "", "msgs/s", "batch"),
    ("8b batched produce, 1 queue", "queues_1", "", "msgs/s", ""),
    ("8b batched produce, 16 queues", "queues_16", "", "msgs/s", ""),
    ("8b batched produce, 256 queues", "queues_256", "", "msgs/s", ""),
]  # fmt: skip


def figures(per_run: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """workload -> system -> summary (or figure -> summary) over the runs."""
    out: dict[str, dict[str, Any]] = {}
    for system in SYSTEMS:
        for key in per_run[0][system]:
            values = [run[system][key] for run in per_run]
            fig: Any
            if isinstance(values[0], dict):
                fig = {k: summary([v[k] for v in values]) for k in values[0]}
            else:
                fig = summary(values)
            out.setdefault(key, {})[system] = fig
    return out


def print_table(results: dict[str, Any]) -> None:
    figs = results["figures"]

    def pick(key: str, field: str, system: str) -> dict[str, float] | None:
        fig = figs.get(key, {}).get(system)
        if fig is None:
            return None
        return fig[field] if field else fig  # type: ignore[no-any-return]

    def cell(fig: dict[str, float] | None, unit: str) -> str:
        if fig is None:
            return "-"
        if unit == "ms":
            return f"{fig['median']:.2f} ({fig['min']:.2f}-{fig['max']:.2f})"
        return f"{fig['median']:,.0f} ({fig['min']:,.0f}-{fig['max']:,.0f})"

    a = results["sizes"]
    sized = ", ".join(f"{n:,} x {size_tag(int(s))}" for s, n in a["sized_messages"].items())
    print(
        f"\npymq vs Redis Streams vs NATS JetStream, 100-byte bodies, median of "
        f"{results['runs']} (min-max); {a['messages']:,} batched / consumed "
        f"(nats {a['nats_messages']:,}), "
        f"{a['async_messages']:,} async, {a['singles']:,} single, "
        f"{PRODUCERS}x{a['durable_per_producer']:,} durable, "
        f"e2e {a['e2e_rate']:,} msgs/s for {a['e2e_seconds']:g} s; "
        f"6: {sized}, {a['sized_singles']:,} single; "
        f"8: {a['scale_messages']:,} (nats {a['nats_scale_messages']:,})"
    )
    head = f"{'workload':<60}{'unit':<7}" + "".join(f"{s:>33}" for s in SYSTEMS)
    print(head + f"{'pymq/best':>11}")
    for label, key, field, unit, versus in ROWS:
        cells = {s: pick(key, field, s) for s in SYSTEMS}
        if all(c is None for c in cells.values()):
            continue  # a part not run
        peers = [pick(versus or key, field, s) for s in SYSTEMS[1:]]
        medians = [p["median"] for p in peers if p is not None]
        ratio = "-"
        if cells["pymq"] is not None and medians:
            best = max(medians) if unit == "msgs/s" else min(medians)
            ratio = f"{cells['pymq']['median'] / best:.2f}x"
        row = f"{label:<60}{unit:<7}" + "".join(f"{cell(cells[s], unit):>33}" for s in SYSTEMS)
        print(row + f"{ratio:>11}")
    print(
        "pymq/best: pymq's median over the best peer's; msgs/s above 1 = pymq faster, "
        "ms above 1 = pymq slower.\n"
        "3: pymq and redis fsync before they answer; JetStream answers after writing its file, "
        "with no fsync.\n"
        f"6: pymq compresses bodies over {COMPRESS_OVER} bytes (zlib) on single sends only: "
        "the 16 KiB single sends take the compression path, send_batch never compresses.\n"
        "8b: redis spreads each pipeline over that many stream keys, JetStream over that many "
        "subjects of one stream."
    )


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "pymq": connector.__version__}
    for binary in SERVERS:
        text = subprocess.run(
            [str(server_binary(binary)), "--version"], capture_output=True, text=True, check=True
        ).stdout
        m = re.search(r"v=(\S+)|v(\d+\.\d+\.\d+)", text)
        out[binary] = next(g for g in m.groups() if g) if m else text.strip()
    for dist in ("redis", "hiredis", "nats-py"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f}, {five:.2f}, {fifteen:.2f}"


def check_prerequisites() -> str | None:
    missing = [pkg for binary, pkg in SERVERS.items() if server_binary(binary) is None]
    if missing:
        return f"error: {' and '.join(missing)} not found; apt-get install {' '.join(missing)}"
    try:
        import nats  # noqa: F401
        import redis  # noqa: F401
    except ImportError as exc:
        return f"error: {exc.name} is not installed; pip install -e '.[bench]'"
    return None


def stop_stray_children() -> None:
    """Stop child processes still running: LocalCluster does not stop a broker
    interrupted while it starts (it is not in ``cluster.brokers`` yet)."""
    me = os.getpid()
    stray = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            state, ppid = stat.read_text().rsplit(")", 1)[1].split()[:2]
            if int(ppid) == me and state != "Z":
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                stray.append(int(stat.parent.name))
                log(f"stopping a child still running: {stray[-1]} {cmdline[:120].decode()}")
    for pid in stray:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for pid in stray:
        # a child is not reaped until waited for, so its pid cannot have been reused here
        while True:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            except ChildProcessError:  # reaped elsewhere (its Popen)
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.05)


def stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: servers stop


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run (a smoke test)")
    ap.add_argument(
        "--messages", type=int, default=None, help="workloads 1 and 4 (1,000,000; quick 100,000)"
    )
    ap.add_argument("--dir", default=None, help="where the data goes (default: a temp dir)")
    ap.add_argument(
        "--parts", default=",".join(PARTS), help="comma list of: core (workloads 1-5), 6, 8"
    )
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    args.parts = set(filter(None, args.parts.split(",")))
    if not args.parts or not args.parts <= set(PARTS):
        ap.error(f"--parts: a comma list of {', '.join(PARTS)}")
    problem = check_prerequisites()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    args.async_messages, args.singles, args.durable_per_producer = 200_000, 5_000, 300
    args.e2e_rate, args.e2e_seconds = 5_000, 10.0
    args.sized_messages, args.sized_singles = dict(SIZED_MESSAGES), 1_000
    args.scale_messages = SCALE_MESSAGES
    if args.quick:
        # 100,000: the first few hundred thousand messages a broker stores go slower
        args.runs, args.messages = 1, args.messages or 100_000
        args.async_messages, args.singles, args.durable_per_producer = 20_000, 500, 20
        args.e2e_seconds = 3.0
        args.sized_messages = {s: n // 10 for s, n in SIZED_MESSAGES.items()}
        args.sized_singles, args.scale_messages = 200, SCALE_MESSAGES // 8
    args.messages = max(BATCH, (args.messages or 1_000_000) // BATCH * BATCH)
    args.nats_messages = min(args.messages, NATS_MAX_MESSAGES)
    args.nats_scale_messages = min(args.scale_messages, NATS_MAX_SCALE)
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    base = Path(args.dir or tempfile.mkdtemp(prefix="pymq-peers-bench-"))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "command": " ".join(["python", *sys.argv]),
        "load_at_start": load(),
        "versions": versions(),
        "runs": args.runs,
        "sizes": {k: getattr(args, k) for k in SIZES},
        "parts": sorted(args.parts),
        "body_bytes": {"core": len(BODY), "8": len(BODY), **{size_tag(s): s for s in SIZED_BATCH}},
    }
    per_run: list[dict[str, dict[str, Any]]] = []
    try:
        for r in range(args.runs):
            order = SYSTEMS[r % 3 :] + SYSTEMS[: r % 3]
            run: dict[str, dict[str, Any]] = {}
            for system in order:
                log(f"  run {r + 1}/{args.runs}: {system} (load {load()})")
                run[system] = RUNNERS[system](base / f"run-{r}" / system, args)
            per_run.append(run)
    except KeyboardInterrupt:
        log("interrupted: servers stopped")
        return 130
    finally:
        stop_stray_children()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    results["load_at_end"] = load()
    results["figures"] = figures(per_run)
    results["per_run"] = per_run
    print_table(results)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
