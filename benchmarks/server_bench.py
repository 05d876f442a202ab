"""The broker's two edges side by side, remoting and REST: prints a table and JSON.

    python benchmarks/server_bench.py [--runs 3] [--quick] [--json-out FILE]

A NameServer and a broker as processes (``LocalCluster``; 100-byte bodies,
one topic of 8 queues, tmp store) and this process as the client. The same
workloads go to the same broker through each of its edges:

* ``remoting``: RocketMQ's remoting protocol on the broker's ``--port``,
  through pymq's client (``Producer``, ``PullConsumer``: one connection to
  the broker, many requests in flight on it);
* ``rest``: the REST API on the broker's http address through httpx
  (``httpx.Client``: keep-alive HTTP/1.1, one connection per thread), what a
  program without a RocketMQ client uses;
* ``raw``: the same REST requests written and read by this script over one
  socket (HTTP/1.1 keep-alive, answers by Content-Length): the REST edge
  without an HTTP library's cost on the client side.

Workloads (each request built inside the clock unless said):

* round trip of a trivial request, one thread: GET_MAX_OFFSET
  (``PullConsumer.max_offset``) / ``GET /topics/{t}/queues/0/offsets``; and,
  as the floor under any request, a raw TCP echo of 128 bytes between two
  threads of this process (``limits.loopback_round_trip``, no server);
* single send, one thread, one message a request: ``Producer.send`` /
  ``POST /topics/{t}/messages`` (JSON): p50, p99 and msgs/s;
* batch send, 1,000 messages a request, encoded before the clock (the
  broker and the edge; encoding a batch is the client's cost, measured by
  client_bench and peers_bench): ``Producer.send_prepared_batch`` / ``POST
  /topics/{t}/messages/batch`` with the same bytes, from 1, 2 and 4 threads
  (remoting: the threads share the producer and its one connection; REST:
  a connection each);
* pull from offset 0, 10,000 a request, as many messages as one batch-send
  pass stores: the stored records indexed in the client
  (``connector.protocol.scan.index_records``: every body addressable), from
  ``PullConsumer.pull_records`` / ``GET .../messages`` with ``Accept:
  application/x-pymq-records``; the same with every body copied out as
  ``bytes``; and as message objects, every body read: ``PullConsumer.pull``
  (``MessageExt``) / the JSON answer (``MessageView`` dicts, each body
  base64-decoded), a fifth as many messages (JSON pulls run at ~50,000
  msgs/s: a million would take 20 s an edge and a run).

All of it on an ASYNC_FLUSH broker; the sends again on a SYNC_FLUSH one. The
order of the edges rotates from run to run. Each figure is the median of
``--runs`` runs with min and max.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from limits import loopback_round_trip  # noqa: E402

from connector import Message, Producer, PullConsumer, PullStatus  # noqa: E402
from connector.errors import PyMQError  # noqa: E402
from connector.local import LocalCluster  # noqa: E402
from connector.protocol.batch import PreparedBatch, encode_batch  # noqa: E402
from connector.protocol.message import MessageQueue  # noqa: E402
from connector.protocol.msgid import UniqKeyGenerator  # noqa: E402
from connector.protocol.properties import encode_properties  # noqa: E402
from connector.protocol.record import record_size  # noqa: E402
from connector.protocol.scan import index_records  # noqa: E402
from connector.protocol.wire import H_NEXT_BEGIN_OFFSET, H_STATUS, RECORDS_CONTENT_TYPE  # noqa: E402

TOPIC = "BenchTopic"
QUEUES = 8
BODY = 100
PER_BATCH = 1000
PAGE = 10_000
THREADS = (1, 2, 4)
EDGES = ("remoting", "rest", "raw")
PULLS = ("indexed", "copied", "objects")
OBJECTS_SHARE = 5  # the objects pull reads 1/5 of what the others read
JSON_CT = {"content-type": "application/json"}
OCTET = {"content-type": "application/octet-stream"}
ACCEPT_RECORDS = {"accept": RECORDS_CONTENT_TYPE}
NO_HEADERS: Mapping[str, str] = {}


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def timed(count: int, call: Callable[[int], object]) -> dict[str, float]:
    """``call(i)`` for i in range(count), one after another: p50, p99 (ms) and calls/s."""
    lat = []
    t_all = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        call(i)
        lat.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - t_all
    lat.sort()
    return {
        "p50_ms": lat[len(lat) // 2] * 1000,
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000,
        "msgs_per_s": count / elapsed,
    }


def log(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def single_body(i: int) -> bytes:
    return (b"%08d-" % i).ljust(BODY, b"s")


# -- REST clients ----------------------------------------------------------------------


class RestClient(Protocol):
    def request(
        self, method: str, target: str, body: bytes = b"", headers: Mapping[str, str] = NO_HEADERS
    ) -> tuple[int, Mapping[str, str], bytes]: ...

    def close(self) -> None: ...


class HttpxRest:
    """httpx's blocking client: one keep-alive HTTP/1.1 connection."""

    def __init__(self, addr: str) -> None:
        self.client = httpx.Client(base_url=f"http://{addr}", timeout=30.0)

    def request(
        self, method: str, target: str, body: bytes = b"", headers: Mapping[str, str] = NO_HEADERS
    ) -> tuple[int, Mapping[str, str], bytes]:
        resp = self.client.request(method, target, content=body or None, headers=headers)
        return resp.status_code, resp.headers, resp.content

    def close(self) -> None:
        self.client.close()


class RawRest:
    """HTTP/1.1 keep-alive on one socket, by hand: a request in one write, the answer
    read by its Content-Length (the broker's server sends one with every answer).
    Header names come back in lower case."""

    def __init__(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        self.host = addr
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def request(
        self, method: str, target: str, body: bytes = b"", headers: Mapping[str, str] = NO_HEADERS
    ) -> tuple[int, Mapping[str, str], bytes]:
        lines = [f"{method} {target} HTTP/1.1", f"host: {self.host}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if body or method in ("POST", "PUT"):
            lines.append(f"content-length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if len(body) < 16384:
            self.sock.sendall(head + body)
        else:  # a batch: not copied behind the head
            sent = self.sock.sendmsg([head, body])
            if sent < len(head) + len(body):
                self.sock.sendall((head + body)[sent:])
        return self._answer()

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 18)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        self.buf += chunk

    def _answer(self) -> tuple[int, Mapping[str, str], bytes]:
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self._fill()
        status_line, *header_lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[: end + 4]
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise ConnectionError(f"an answer without content-length: {status_line}")
        length = int(headers["content-length"])
        while len(self.buf) < length:
            self._fill()
        data = bytes(self.buf[:length])
        del self.buf[:length]
        return int(status_line.split(" ", 2)[1]), headers, data

    def close(self) -> None:
        self.sock.close()


def expect_ok(status: int, body: bytes) -> None:
    if status != 200:
        raise RuntimeError(f"REST answered {status}: {body[:200]!r}")


# -- one edge: what a thread does through it ------------------------------------------


@dataclass(frozen=True, slots=True)
class Batch:
    data: bytes
    msg_ids: list[str]
    record_sizes: list[int]


class Session(Protocol):
    def trivial(self, i: int) -> None: ...
    def single(self, i: int) -> None: ...
    def batch(self, j: int, batch: Batch) -> int: ...
    def pull(self, queue_id: int, offset: int, max_nums: int, how: str) -> tuple[int, int]: ...
    def close(self) -> None: ...


class RemotingSession:
    """pymq's client; every thread shares the one producer and consumer."""

    def __init__(self, producer: Producer, consumer: PullConsumer, queues: list[MessageQueue]):
        self.producer, self.consumer, self.queues = producer, consumer, queues

    def trivial(self, i: int) -> None:
        self.consumer.max_offset(self.queues[0])

    def single(self, i: int) -> None:
        self.producer.send(Message(topic=TOPIC, body=single_body(i)))

    def batch(self, j: int, batch: Batch) -> int:
        prepared = PreparedBatch(TOPIC, batch.data, batch.msg_ids, batch.record_sizes)
        self.producer.send_prepared_batch(prepared)
        return len(batch.msg_ids)

    def pull(self, queue_id: int, offset: int, max_nums: int, how: str) -> tuple[int, int]:
        mq = self.queues[queue_id]
        if how == "objects":
            res = self.consumer.pull(mq, offset, max_nums)
            if res.status is not PullStatus.FOUND:
                return 0, offset
            read = sum(len(m.body) for m in res.messages)  # pull decodes on first read
            assert read > 0
            return len(res.messages), res.next_begin_offset
        res = self.consumer.pull_records(mq, offset, max_nums)
        if res.status is not PullStatus.FOUND:
            return 0, offset
        index = index_records(res.records)
        if how == "copied":
            index.bodies()
        return len(index), res.next_begin_offset

    def close(self) -> None:
        pass


class RestSession:
    """One REST connection (httpx or the raw socket) for one thread."""

    def __init__(self, client: RestClient) -> None:
        self.client = client

    def trivial(self, i: int) -> None:
        expect_ok(*self._call("GET", f"/topics/{TOPIC}/queues/0/offsets"))

    def single(self, i: int) -> None:
        data = orjson.dumps({"body": single_body(i).decode(), "queue_id": i % QUEUES})
        expect_ok(*self._call("POST", f"/topics/{TOPIC}/messages", data, JSON_CT))

    def batch(self, j: int, batch: Batch) -> int:
        target = f"/topics/{TOPIC}/messages/batch?queue_id={j % QUEUES}"
        status, body = self._call("POST", target, batch.data, OCTET)
        expect_ok(status, body)
        return int(orjson.loads(body)["count"])

    def pull(self, queue_id: int, offset: int, max_nums: int, how: str) -> tuple[int, int]:
        target = f"/topics/{TOPIC}/queues/{queue_id}/messages?offset={offset}&max={max_nums}"
        if how == "objects":
            status, body = self._call("GET", target)
            expect_ok(status, body)
            answer = orjson.loads(body)
            if answer["status"] != "FOUND":
                return 0, offset
            msgs = answer["messages"]
            read = sum(len(base64.b64decode(m["body_base64"])) for m in msgs)
            assert read > 0
            return len(msgs), int(answer["next_begin_offset"])
        status, headers, data = self.client.request("GET", target, b"", ACCEPT_RECORDS)
        expect_ok(status, data)
        if headers.get(H_STATUS) != "FOUND":
            return 0, offset
        index = index_records(data)
        if how == "copied":
            index.bodies()
        return len(index), int(headers[H_NEXT_BEGIN_OFFSET])

    def _call(
        self, method: str, target: str, body: bytes = b"", headers: Mapping[str, str] = NO_HEADERS
    ) -> tuple[int, bytes]:
        status, _, data = self.client.request(method, target, body, headers)
        return status, data

    def close(self) -> None:
        self.client.close()


class Edges:
    """A broker (NameServer + broker processes) and a session factory per edge."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.http_addr = cluster.brokers[0].http_addr
        ns = cluster.namesrv_addr
        with httpx.Client(base_url=f"http://{self.http_addr}", timeout=30.0) as client:
            body = {"read_queue_nums": QUEUES, "write_queue_nums": QUEUES, "perm": 6}
            resp = client.put(f"/topics/{TOPIC}", json=body)
            expect_ok(resp.status_code, resp.content)
        self.producer = Producer(group="server-bench", namesrv=ns)
        self.consumer = PullConsumer(group="server-bench", namesrv=ns)
        self.queues = self._routed_queues()

    def _routed_queues(self) -> list[MessageQueue]:
        deadline = time.monotonic() + 30  # the broker registers the topic with its next beat
        while True:
            try:
                queues = self.consumer.fetch_queues(TOPIC)
            except PyMQError:
                queues = []
            if len(queues) == QUEUES:
                return queues
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {TOPIC} not routed within 30 s")
            time.sleep(0.05)

    def session(self, edge: str) -> Session:
        if edge == "remoting":
            return RemotingSession(self.producer, self.consumer, self.queues)
        return RestSession(HttpxRest(self.http_addr) if edge == "rest" else RawRest(self.http_addr))

    def close(self) -> None:
        self.producer.shutdown()
        self.consumer.shutdown()


# -- workloads -------------------------------------------------------------------------


def make_batches(count: int) -> tuple[list[Batch], float]:
    """Distinct batches (unique bodies and UNIQ_KEYs); also the encode cost a message."""
    uniq = UniqKeyGenerator()
    topic_len = len(TOPIC.encode())
    batches = []
    t0 = time.perf_counter()
    for b in range(count):
        entries, ids, sizes = [], [], []
        for i in range(PER_BATCH):
            body = (b"%08d-%08d-" % (b, i)).ljust(BODY, b"x")
            msg_id = uniq.next_id()
            props = encode_properties({"UNIQ_KEY": msg_id})
            entries.append((body, 0, props))
            ids.append(msg_id)
            sizes.append(record_size(len(body), topic_len, len(props)))
        batches.append(Batch(encode_batch(entries), ids, sizes))
    per_msg = (time.perf_counter() - t0) / (count * PER_BATCH)
    return batches, per_msg


def batch_send(edges: Edges, edge: str, batches: list[Batch], threads: int) -> float:
    """msgs/s sending every batch once, spread over ``threads`` threads."""
    sessions = [edges.session(edge) for _ in range(threads)]  # connected before the clock
    counts = [0] * threads
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for j in range(k, len(batches), threads):
                counts[k] += sessions[k].batch(j, batches[j])
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    for s in sessions:
        s.close()
    if errors:
        raise errors[0]
    if sum(counts) != len(batches) * PER_BATCH:
        raise RuntimeError(f"{edge}: {sum(counts)} of {len(batches) * PER_BATCH} stored")
    return sum(counts) / elapsed


def pull_all(session: Session, per_queue: int, how: str) -> float:
    """The first ``per_queue`` messages of every queue, ``PAGE`` a request; msgs/s."""
    total = 0
    t0 = time.perf_counter()
    for q in range(QUEUES):
        offset = 0
        while offset < per_queue:
            n, offset = session.pull(q, offset, min(PAGE, per_queue - offset), how)
            if n == 0:
                raise RuntimeError(f"queue {q} ends before offset {per_queue}")
            total += n
    return total / (time.perf_counter() - t0)


def start_cluster(base: Path, flush: str, run: int) -> LocalCluster:
    data = base / f"{flush}-{run}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["PYMQ_LOG_LEVEL"] = "warning"
    cluster = LocalCluster(data, brokers=1, namesrvs=1, broker_args=["--flush", flush], env=env)
    return cluster.start(120)


def run_flush_mode(base: Path, flush: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every run: a fresh broker, each workload through every edge (the order rotates)."""
    per_run: list[dict[str, dict[str, Any]]] = []
    encode_us: list[float] = []
    for run in range(args.runs):
        order = EDGES[run % 3 :] + EDGES[: run % 3]
        log(f"  [{flush}] run {run + 1}/{args.runs}: edges in the order {', '.join(order)}")
        batches, encode_s = make_batches(args.batches)
        encode_us.append(encode_s * 1e6)
        # earlier runs' stores are gone and their dirty pages written back, so an
        # fsync here measures this run, not the kernel flushing the last one
        for old in base.iterdir():
            shutil.rmtree(old, ignore_errors=True)
        os.sync()
        figs: dict[str, dict[str, Any]] = {edge: {} for edge in EDGES}
        cluster = start_cluster(base, flush, run)
        edges = None
        try:
            edges = Edges(cluster)
            for edge in order:  # warm-up: routes, connections, every queue's first files
                s = edges.session(edge)
                for i in range(200):
                    s.single(i)
                if flush == "async":  # and the compiled record decoders, loaded on first use
                    s.trivial(0)
                    for how in PULLS:
                        s.pull(0, 0, 10, how)
                s.close()
            # single sends first, on a quiet store: after a million batched messages
            # the kernel is still writing back queue and index pages for a while
            for edge in order:
                s = edges.session(edge)
                figs[edge]["single"] = timed(args.singles, s.single)
                if flush == "async":
                    figs[edge]["trivial"] = timed(args.singles, s.trivial)
                s.close()
            batch_send(edges, "remoting", batches[:20], 1)  # page faults of fresh files
            for threads in THREADS:
                for edge in order:
                    key = f"batch_send_{threads}thread{'s' * (threads > 1)}"
                    figs[edge][key] = batch_send(edges, edge, batches, threads)
            if flush == "async":
                per_queue = args.batches * PER_BATCH // QUEUES
                for how in PULLS:
                    n = per_queue if how != "objects" else max(1, per_queue // OBJECTS_SHARE)
                    for edge in order:
                        s = edges.session(edge)
                        figs[edge][f"pull_{how}"] = pull_all(s, n, how)
                        s.close()
        finally:
            if edges is not None:
                edges.close()
            cluster.stop()
        per_run.append(figs)
    out: dict[str, Any] = {"client_encode_us_per_msg": statistics.median(encode_us)}
    for edge in EDGES:
        out[edge] = {}
        for key, first in per_run[0][edge].items():
            values = [r[edge][key] for r in per_run]
            if isinstance(first, dict):
                out[edge][key] = {k: summary([v[k] for v in values]) for k in first}
            else:
                out[edge][key] = summary(values)
    out["per_run"] = per_run
    return out


def print_table(results: dict[str, Any]) -> None:
    def fmt(fig: dict[str, float], unit: str) -> str:
        if unit == "ms":
            return f"{fig['median']:.3f} ({fig['min']:.3f}-{fig['max']:.3f})"
        return f"{fig['median']:,.0f} ({fig['min']:,.0f}-{fig['max']:,.0f})"

    echo = results["tcp_echo"]
    print(
        f"\nraw TCP echo, 128 B between two threads (no server): p50 "
        f"{fmt(echo['p50_ms'], 'ms')} ms, p99 {fmt(echo['p99_ms'], 'ms')} ms"
    )
    for flush in ("async", "sync"):
        r = results[flush]
        name = "ASYNC_FLUSH" if flush == "async" else "SYNC_FLUSH"
        print(f"\n{name}, median of {results['runs']} (min-max)")
        print(f"{'workload':<44}" + "".join(f"{e:>34}" for e in EDGES))
        rows: list[tuple[str, str, str, str]] = [
            ("trivial request p50, ms", "trivial", "p50_ms", "ms"),
            ("trivial request p99, ms", "trivial", "p99_ms", "ms"),
            ("single send p50, ms", "single", "p50_ms", "ms"),
            ("single send p99, ms", "single", "p99_ms", "ms"),
            ("single send, msgs/s", "single", "msgs_per_s", ""),
            *(
                (f"batch send 1,000/request, {t} thread(s)", key, "", "")
                for t in THREADS
                for key in [f"batch_send_{t}thread{'s' * (t > 1)}"]
            ),
            ("pull 10,000/request, records indexed", "pull_indexed", "", ""),
            ("pull, bodies copied out", "pull_copied", "", ""),
            ("pull, message objects", "pull_objects", "", ""),
        ]
        for label, key, field, unit in rows:
            if key not in r["remoting"]:
                continue
            cells = []
            for edge in EDGES:
                fig = r[edge][key]
                cells.append(fmt(fig[field] if field else fig, unit))
            print(f"{label:<44}" + "".join(f"{c:>34}" for c in cells))
        print(
            f"{'client batch encoding (not in the figures)':<44}"
            f"{r['client_encode_us_per_msg']:>33.2f} us/msg"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run (a smoke test)")
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    args.batches = 1000  # 1,000,000 messages a pass
    args.singles = 5000
    if args.quick:
        args.runs, args.batches, args.singles = 1, 48, 500
    base = Path(args.dir or tempfile.mkdtemp(prefix="pymq-server-bench-"))
    base.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "python": platform.python_version(),
        "command": " ".join(["python", *sys.argv]),
        "runs": args.runs,
        "edges": list(EDGES),
        "messages_per_batch_pass": args.batches * PER_BATCH,
        "singles": args.singles,
    }
    try:
        echoes = [loopback_round_trip(args.singles) for _ in range(args.runs)]
        results["tcp_echo"] = {k: summary([e[k] for e in echoes]) for k in ("p50_ms", "p99_ms")}
        for flush in ("async", "sync"):
            results[flush] = run_flush_mode(base, flush, args)
    finally:
        if not args.dir:  # a temp dir of several GB: gone with the run
            shutil.rmtree(base, ignore_errors=True)
    print_table(results)
    text = json.dumps(results, indent=1)
    print(text)
    if args.json_out:
        Path(args.json_out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
