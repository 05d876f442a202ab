"""What access control and TLS cost: ACL on, TLS on, neither; loopback, same minutes.

    python benchmarks/security_bench.py [--runs 3] [--quick] [--json-out FILE]

Three ``LocalCluster``s of one NameServer and one ASYNC_FLUSH broker run side
by side (data in temp dirs, stopped at the end, also on Ctrl-C or SIGTERM),
every process on 127.0.0.1, this process the client (pymq's ``Producer``,
100-byte bodies, a topic of 8 queues):

* ``off``: no ACL, no TLS (the defaults);
* ``acl``: ``acl_enable`` with a ``plain_acl.yml`` of a few accounts; the
  producer signs every request (HMAC-SHA1 over the ext fields and the body,
  plus pymq's signed time and request number) with a PUB account, and the
  broker checks each (signature, replay, permission);
* ``tls``: both listeners serve TLS (a CA and a server certificate made with
  the openssl command, RSA 2048); the producer verifies the broker against
  the CA. No ACL.

Measured, the shapes of ``peers_bench.py``:

1. single send: ``Producer.send`` one at a time from one thread, p50 and p99
   latency and msgs/s;
2. batched produce: ``Producer.send_batch`` of 1,000 from one thread,
   building the ``Message`` objects included; msgs/s.

3. a flood: a fourth cluster with ACL on and ``send_rate_limit`` of
   ``FLOOD_LIMIT`` sends a second per account. One client (this process)
   sends ``paced`` single sends at ``PACE_PER_S`` a second with one account,
   first alone, then while another process floods with a second account
   (sync sends as fast as it can, each refused SYSTEM_BUSY past the limit,
   with no retry); p50 and p99 of the paced sends, and how many of the
   flood's sends were refused. The machine's two cores are shared by the
   flood, the broker and the paced client, so the p99 measures that as
   well as the broker.

The three setups take turns in tenths of workloads 1-2 (rotating), so a drift
of the machine's speed within a run falls on both; each figure is the median
of ``--runs`` runs (min-max), each ratio the median of the runs' own ratios.
Targets (issue #39, defined here): ACL costs <= 10 % of batched throughput
and <= 0.02 ms of the single-send p50; TLS keeps >= 0.7x of plaintext
batched throughput; during a flood the other client's p99 stays within 2x
of its figure alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from peers_bench import (  # noqa: E402
    BATCH,
    BODY,
    WARM_TOPIC,
    load,
    log,
    percentiles,
    pymq_env,
    pymq_topics,
    pymq_warm,
    stop_on_sigterm,
    stop_stray_children,
    summary,
)

from connector import Admin, Message, Producer, SendStatus  # noqa: E402
from connector.local import LocalCluster  # noqa: E402

SETUPS = ("off", "acl", "tls")
LABELS = {"off": "ACL and TLS off", "acl": "ACL on (signed, checked)", "tls": "TLS on"}
TOPIC = "SecBench"
ADMIN = ("benchAdmin", "benchAdminSecret")
WRITER = ("benchWriter", "benchWriterSecret")
RULES = f"""
accounts:
  - accessKey: {ADMIN[0]}
    secretKey: {ADMIN[1]}
    admin: true
  - accessKey: {WRITER[0]}
    secretKey: {WRITER[1]}
    defaultTopicPerm: PUB
    defaultGroupPerm: SUB
  - accessKey: benchReader
    secretKey: benchReaderSecret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
SLICES = 10

# the targets; a report reads them from here
ACL_BATCH_MAX_COST = 0.10  # ACL costs <= 10 % of batched throughput
ACL_P50_MAX_ADDED_MS = 0.02  # and <= 0.02 ms of the single-send p50
TLS_BATCH_MIN_X = 0.7  # TLS keeps >= 0.7x of plaintext batched throughput
FLOOD_P99_MAX_X = 2.0  # a client's p99 during another's flood <= 2x its p99 alone
FLOOD_LIMIT = 500  # send_rate_limit of the flood's cluster
PACE_PER_S = 200
FLOODER = """
import sys, time
from connector import Message, Producer
from connector.errors import BrokerBusyError
ns, ak, sk, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
sent = busy = 0
with Producer(namesrv=ns, access_key=ak, secret_key=sk, retry_times_when_send_failed=0) as p:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            p.send(Message(topic=sys.argv[5], body=b"x" * 100))
            sent += 1
        except BrokerBusyError:
            busy += 1
print(sent, busy)
"""


def env_of(setup: str, base: Path) -> dict[str, str]:
    env = pymq_env("ASYNC_FLUSH")
    if setup == "tls":
        env.update(tls_env(base))
    if setup == "acl":
        acl_file = base / "plain_acl.yml"
        acl_file.write_text(RULES)
        env.update(
            PYMQ_ACL_ENABLE="true",
            PYMQ_ACL_FILE=str(acl_file),
            PYMQ_ACCESS_KEY=ADMIN[0],
            PYMQ_SECRET_KEY=ADMIN[1],
        )
    return env


def tls_env(base: Path) -> dict[str, str]:
    """A CA and a certificate for 127.0.0.1, made with openssl (in ``base``)."""
    import subprocess

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=base, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "2", "-subj", "/CN=bench CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
        "-subj", "/CN=localhost")  # fmt: skip
    (base / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")  # fmt: skip
    return {
        "PYMQ_TLS_CERT_FILE": str(base / "server.pem"),
        "PYMQ_TLS_KEY_FILE": str(base / "server.key"),
        "PYMQ_TLS_CA_FILE": str(base / "ca.pem"),
    }


def client_of(setup: str, base: Path) -> dict[str, Any]:
    """The Producer's (and Admin's) keywords for a setup."""
    if setup == "acl":
        return {"access_key": WRITER[0], "secret_key": WRITER[1]}
    if setup == "tls":
        return {"tls": True, "tls_ca_file": str(base / "ca.pem")}
    return {}


def one_run(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    clusters: dict[str, LocalCluster] = {}
    producers: dict[str, Producer] = {}
    try:
        for setup in SETUPS:
            (base / setup).mkdir(parents=True)
            clusters[setup] = LocalCluster(
                base / setup / "cluster", brokers=1, env=env_of(setup, base / setup)
            ).start()
            ns = clusters[setup].namesrv_addr
            _topics(ns, setup, base / setup)
            producers[setup] = Producer(
                group="sec-bench", namesrv=ns, **client_of(setup, base / setup)
            )
            producers[setup].start()
            pymq_warm(producers[setup])
        lat: dict[str, list[float]] = {s: [] for s in SETUPS}
        single_s = dict.fromkeys(SETUPS, 0.0)
        batch_s = dict.fromkeys(SETUPS, 0.0)
        per_slice_single = args.singles // SLICES
        per_slice_batches = args.messages // BATCH // SLICES
        for i in range(SLICES):
            order = SETUPS[i % len(SETUPS) :] + SETUPS[: i % len(SETUPS)]  # rotating
            for setup in order:
                p = producers[setup]
                t0 = time.perf_counter()
                for _ in range(per_slice_single):
                    s0 = time.perf_counter()
                    r = p.send(Message(topic=TOPIC, body=BODY))
                    lat[setup].append(time.perf_counter() - s0)
                    _check(r.status, setup)
                single_s[setup] += time.perf_counter() - t0
            for setup in order:
                p = producers[setup]
                t0 = time.perf_counter()
                for _ in range(per_slice_batches):
                    batch = [Message(topic=TOPIC, body=BODY) for _ in range(BATCH)]
                    _check(p.send_batch(batch).status, setup)
                batch_s[setup] += time.perf_counter() - t0
        out: dict[str, Any] = {}
        for setup in SETUPS:
            pct = percentiles(lat[setup])
            out[setup] = {
                "single": {
                    "msgs_per_s": len(lat[setup]) / single_s[setup],
                    "p50_ms": pct["p50_ms"],
                    "p99_ms": pct["p99_ms"],
                },
                "batch": per_slice_batches * SLICES * BATCH / batch_s[setup],
            }
        return out
    finally:
        for p in producers.values():
            p.shutdown()
        for c in clusters.values():
            c.stop()


def _fresh(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def _topics(ns: str, setup: str, base: Path) -> None:
    if setup == "off":
        pymq_topics(ns, {TOPIC: 8, WARM_TOPIC: 8})
        return
    keys = client_of(setup, base)
    if setup == "acl":
        keys = {"access_key": ADMIN[0], "secret_key": ADMIN[1]}
    with Admin(namesrv=ns, **keys) as admin:
        for topic in (TOPIC, WARM_TOPIC):
            admin.create_topic(topic, read_queue_nums=8, write_queue_nums=8)
        deadline = time.monotonic() + 30
        while not all(_routed(admin, t) for t in (TOPIC, WARM_TOPIC)):
            if time.monotonic() > deadline:
                raise RuntimeError("topics not routed within 30 s")
            time.sleep(0.05)


def _routed(admin: Any, topic: str) -> bool:
    route = admin.namesrv.topic_route(topic)
    return route is not None and sum(q.write_queue_nums for q in route.queues) == 8


def _check(status: SendStatus, setup: str) -> None:
    if status is not SendStatus.SEND_OK:
        raise RuntimeError(f"{setup}: a send answered {status.value}")


def flood_run(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Workload 3: a paced client's latency alone, then during another account's flood."""
    import subprocess

    env = env_of("acl", base)
    env["PYMQ_SEND_RATE_LIMIT"] = str(FLOOD_LIMIT)
    with LocalCluster(base / "cluster", brokers=1, env=env) as cluster:
        ns = cluster.namesrv_addr
        _topics(ns, "acl", base)
        with Producer(group="sec-paced", namesrv=ns, access_key=ADMIN[0],
                      secret_key=ADMIN[1]) as paced:  # fmt: skip
            pymq_warm(paced)
            alone = _paced(paced, args.paced)
            seconds = args.paced / PACE_PER_S + 5
            flooder = subprocess.Popen(
                [sys.executable, "-c", FLOODER, ns, WRITER[0], WRITER[1], str(seconds), TOPIC],
                stdout=subprocess.PIPE, text=True,
                env={**os.environ, "PYTHONPATH": str(HERE.parent)},
            )  # fmt: skip
            try:
                time.sleep(2.0)  # the flood at full speed before the clock starts
                flooded = _paced(paced, args.paced)
            finally:
                out, _ = flooder.communicate(timeout=seconds + 60)
        sent, busy = (int(x) for x in out.split())
    return {"alone": alone, "flooded": flooded, "flood_sent": sent, "flood_busy": busy}


def _paced(p: Producer, count: int) -> dict[str, float]:
    lat = []
    start = time.perf_counter()
    for i in range(count):
        due = start + i / PACE_PER_S
        while time.perf_counter() < due:
            time.sleep(max(0.0, due - time.perf_counter()))
        t0 = time.perf_counter()
        _check(p.send(Message(topic=TOPIC, body=BODY)).status, "paced")
        lat.append(time.perf_counter() - t0)
    return percentiles(lat)


def figures(per_run: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for setup in SETUPS:
        runs = [r[setup] for r in per_run]
        out[setup] = {
            "single": {
                k: summary([r["single"][k] for r in runs])
                for k in ("msgs_per_s", "p50_ms", "p99_ms")
            },
            "batch": summary([r["batch"] for r in runs]),
        }
    out["acl_batch_ratio"] = statistics.median(
        r["acl"]["batch"] / r["off"]["batch"] for r in per_run
    )
    out["acl_p50_added_ms"] = statistics.median(
        r["acl"]["single"]["p50_ms"] - r["off"]["single"]["p50_ms"] for r in per_run
    )
    out["tls_batch_ratio"] = statistics.median(
        r["tls"]["batch"] / r["off"]["batch"] for r in per_run
    )
    out["tls_p50_added_ms"] = statistics.median(
        r["tls"]["single"]["p50_ms"] - r["off"]["single"]["p50_ms"] for r in per_run
    )
    floods = [r["flood"] for r in per_run if "flood" in r]
    if floods:
        out["flood"] = {
            f"{when}_{k}": summary([f[when][k] for f in floods])
            for when in ("alone", "flooded") for k in ("p50_ms", "p99_ms")
        }  # fmt: skip
        out["flood"]["busy"] = summary([f["flood_busy"] for f in floods])
        out["flood"]["sent"] = summary([f["flood_sent"] for f in floods])
        out["flood_p99_x"] = statistics.median(
            f["flooded"]["p99_ms"] / f["alone"]["p99_ms"] for f in floods
        )
    return out


def checks(fig: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    cost = 1 - fig["acl_batch_ratio"]
    added = fig["acl_p50_added_ms"]
    return [
        ("ACL: batched throughput lost", f"{cost * 100:.1f} %",
         f"<= {ACL_BATCH_MAX_COST * 100:.0f} %", cost <= ACL_BATCH_MAX_COST),
        ("ACL: single-send p50 added", f"{added:+.3f} ms",
         f"<= {ACL_P50_MAX_ADDED_MS} ms", added <= ACL_P50_MAX_ADDED_MS),
        ("TLS: batched throughput kept", f"{fig['tls_batch_ratio']:.2f}x",
         f">= {TLS_BATCH_MIN_X}x", fig["tls_batch_ratio"] >= TLS_BATCH_MIN_X),
        ("flood: another client's p99", f"{fig.get('flood_p99_x', float('nan')):.2f}x alone",
         f"<= {FLOOD_P99_MAX_X}x", fig.get("flood_p99_x", 99.0) <= FLOOD_P99_MAX_X),
    ]  # fmt: skip


def cell(s: dict[str, float], fmt: str = "{:,.0f}") -> str:
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}-{fmt.format(s['max'])})"


def print_table(results: dict[str, Any]) -> None:
    fig = results["figures"]
    print(f"\n{'':<28}" + "".join(f"{LABELS[s]:>30}" for s in SETUPS))
    rows = [
        ("single send p50 ms", lambda f: cell(f["single"]["p50_ms"], "{:.3f}")),
        ("single send p99 ms", lambda f: cell(f["single"]["p99_ms"], "{:.3f}")),
        ("single sends msgs/s", lambda f: cell(f["single"]["msgs_per_s"])),
        (f"send_batch of {BATCH} msgs/s", lambda f: cell(f["batch"])),
    ]
    for name, get in rows:
        print(f"{name:<28}" + "".join(f"{get(fig[s]):>30}" for s in SETUPS))
    flood = fig.get("flood")
    if flood:
        print(f"\npaced client ({PACE_PER_S}/s), p50 / p99 ms: alone "
              f"{cell(flood['alone_p50_ms'], '{:.3f}')} / {cell(flood['alone_p99_ms'], '{:.3f}')}; "
              f"during a flood {cell(flood['flooded_p50_ms'], '{:.3f}')} / "
              f"{cell(flood['flooded_p99_ms'], '{:.3f}')}; the flood: "
              f"{cell(flood['sent'])} sent, {cell(flood['busy'])} refused SYSTEM_BUSY")  # fmt: skip
    print()
    for t in results["targets"]:
        verdict = "met" if t["met"] else "MISSED"
        print(f"{t['what']:<32} {t['value']:>10}  target {t['goal']:<10} {verdict}")
    print()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run (a smoke test)")
    ap.add_argument("--dir", default=None, help="where the data goes (default: a temp dir)")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args()
    args.singles, args.messages, args.paced = 10_000, 1_000_000, 2_000
    if args.quick:
        args.runs, args.singles, args.messages, args.paced = 1, 2_000, 200_000, 400
    signal.signal(signal.SIGTERM, stop_on_sigterm)
    base = Path(args.dir or tempfile.mkdtemp(prefix="pymq-sec-bench-"))
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus, {platform.platform()}",
        "command": " ".join(["python", *sys.argv]),
        "load_at_start": load(),
        "runs": args.runs,
        "sizes": {"singles": args.singles, "messages": args.messages, "paced": args.paced},
    }
    per_run: list[dict[str, Any]] = []
    try:
        for r in range(args.runs):
            log(f"run {r + 1}/{args.runs}")
            run = one_run(base / f"run-{r}", args)
            run["flood"] = flood_run(_fresh(base / f"flood-{r}"), args)
            per_run.append(run)
    except KeyboardInterrupt:
        log("interrupted: servers stopped")
        return 130
    finally:
        if len(per_run) < args.runs:
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
    if args.json_out:
        Path(args.json_out).write_text(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
