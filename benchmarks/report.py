"""Turn the benchmarks' JSON into one Markdown report and one table on the terminal.

    python benchmarks/report.py [--results benchmarks/results] [--doc docs/benchmarks.md]
                                [--headline]

Reads what ``run_all.py`` left in the results dir (``run.json``, and
``limits``, ``store``, ``server``, ``client``, ``spark``, ``peers``, ``ha``,
``tx`` ``.json``; a missing one is reported as not run) and writes the
report: the machine, the date, the exact commands, pymq against the targets
and the best peer, the physical limits and pymq's figures as a fraction of
them, every figure as median (min-max), and what was noisy. The targets are
issue #23's, each next to the peer it names, measured in the same run; the
replication targets (goals defined in ``ha_bench``), each against another
setup of the same ``ha_bench`` run (SYNC_MASTER vs ASYNC_MASTER vs no slave)
or Redis in the same minutes; and the transactions target (goal defined in
``tx_bench``), the exactly-once Spark sink against the at-least-once one of
the same run, checked on the runs' own ratios. The broker's two edges
(remoting through pymq's client, REST through httpx and through a raw
socket) side by side come from ``server_bench``. ``--headline`` prints only the tables the README's
"Benchmarks" section shows: the targets next to the peers, and remoting vs
REST.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import ha_bench  # noqa: E402
import tx_bench  # noqa: E402
from peers_bench import BATCH_TOPIC, ROWS, SYSTEMS  # noqa: E402

from connector.protocol.msgid import UniqKeyGenerator  # noqa: E402
from connector.protocol.record import record_size  # noqa: E402

STEPS = (
    "start", "limits", "store", "server", "client", "spark", "peers", "push", "ha", "tx",
    "security",
)  # fmt: skip
NOISY = 1.3  # max / min above this is called noisy
PEER_NAMES = {"pymq": "pymq", "redis": "Redis Streams", "nats": "NATS JetStream"}
Fig = dict[str, float]  # median, min, max


def load(results: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("run", *STEPS):
        path = results / f"{name}.json"
        if path.exists():
            out[name] = json.loads(path.read_text())
    return out


# -- formatting ------------------------------------------------------------------------


def num(x: float, unit: str = "") -> str:
    if unit == "ms":
        return f"{x:.2f}" if x >= 0.1 else f"{x:.3f}"
    if unit == "x":
        return f"{x:.2f}x"
    if unit == "%":
        return f"{x:.0f} %" if x >= 1 else f"{x:.1f} %"
    return f"{x:,.0f}"


def cell(fig: Fig | None, unit: str = "") -> str:
    if fig is None:
        return "-"
    if fig["min"] == fig["max"]:
        return num(fig["median"], unit)
    return f"{num(fig['median'], unit)} ({num(fig['min'], unit)}-{num(fig['max'], unit)})"


def table(head: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def terminal(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    out = ["  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


# -- peers -----------------------------------------------------------------------------


def peer_fig(data: dict[str, Any], key: str, field: str, system: str) -> Fig | None:
    fig = data.get("peers", {}).get("figures", {}).get(key, {}).get(system)
    if fig is None:
        return None
    return fig[field] if field else fig  # type: ignore[no-any-return]


def best_peer(
    data: dict[str, Any], key: str, field: str = "", *, higher: bool = True
) -> tuple[str, Fig] | None:
    found = [(s, peer_fig(data, key, field, s)) for s in SYSTEMS[1:]]
    have = [(s, f) for s, f in found if f is not None]
    if not have:
        return None
    pick = max if higher else min
    return pick(have, key=lambda sf: sf[1]["median"])


def peers_rows(data: dict[str, Any]) -> list[list[str]]:
    rows = []
    for label, key, field, unit, versus in ROWS:
        cells = {s: peer_fig(data, key, field, s) for s in SYSTEMS}
        if all(c is None for c in cells.values()):
            continue
        ratio = "-"
        best = best_peer(data, versus or key, field, higher=unit != "ms")
        if cells["pymq"] is not None and best is not None:
            ratio = num(cells["pymq"]["median"] / best[1]["median"], "x")
        rows.append([label, unit, *(cell(cells[s], unit) for s in SYSTEMS), ratio])
    return rows


# -- targets ---------------------------------------------------------------------------


@dataclass
class Target:
    key: str  # what the headline refers to it by
    what: str
    measured: str
    versus: str
    ratio: str
    verdict: str


def verdict(fig: Fig, goal: float, *, higher: bool) -> str:
    """Met or missed by the median; and whether every run, or the best run, did."""

    def meets(x: float) -> bool:
        return x >= goal if higher else x <= goal

    worst, best = (fig["min"], fig["max"]) if higher else (fig["max"], fig["min"])
    if meets(fig["median"]):
        return "met" if meets(worst) else "met by the median (not by every run)"
    return "**missed** (the best run meets it)" if meets(best) else "**missed**"


def ratio_fig(fig: Fig, by: float) -> Fig:
    return {k: v / by for k, v in fig.items()}


def peer_of(data: dict[str, Any], key: str, field: str, peer: str) -> tuple[str, Fig] | None:
    """The peer a target names ("redis", "nats"), or the best one ("best")."""
    if peer == "best":
        return best_peer(data, key, field, higher=not field.endswith("_ms"))
    fig = peer_fig(data, key, field, peer)
    return None if fig is None else (peer, fig)


def targets(data: dict[str, Any]) -> list[Target]:
    """Issue #23's targets, each against the figure measured in this run (the peers'
    in the same minutes). A goal on a ratio is checked on pymq's runs over the peer's
    median."""
    out: list[Target] = []

    def add(
        key: str,
        what: str,
        fig: Fig | None,
        unit: str,
        *,
        goal: float | None = None,
        higher: bool = True,
        peer: tuple[str, Fig] | None = None,
        ratio_goal: float | None = None,
        note: str = "(for scale)",
    ) -> None:
        if fig is None:
            out.append(Target(key, what, "-", "-", "-", "not measured"))
            return
        versus = ratio = ""
        shown = num(fig["median"], unit) if unit == "x" else f"{cell(fig, unit)} {unit}"
        if peer is not None:
            system, pf = peer
            name = PEER_NAMES.get(system, system)  # a peer, or a setup of the same system
            versus = f"{name} {cell(pf, unit)}" + (" ms" if unit == "ms" else "")
            ratio = num(fig["median"] / pf["median"], "x")
        if ratio_goal is not None:
            if peer is None:
                out.append(Target(key, what, shown, "-", "-", "not measured (no peer figure)"))
                return
            result = verdict(ratio_fig(fig, peer[1]["median"]), ratio_goal, higher=higher)
        elif goal is not None:
            result = verdict(fig, goal, higher=higher)
        else:
            result = note
        out.append(Target(key, what, shown, versus, ratio, result))

    def pymq(key: str, field: str = "") -> Fig | None:
        return peer_fig(data, key, field, "pymq")

    for field, goal in (("p50_ms", 0.15), ("p99_ms", 0.4)):
        add(
            f"single_{field[:3]}",
            f"single sync send (`Producer.send`, 1 thread) {field[:3]} <= {goal} ms",
            pymq("single", field),
            "ms",
            goal=goal,
            higher=False,
            peer=peer_of(data, "single", field, "redis"),
        )
    add(
        "floor_trivial",
        "... the floor: a trivial request's round trip p50 (pymq GET_MAX_OFFSET; Redis PING)",
        pymq("trivial", "p50_ms"),
        "ms",
        peer=peer_of(data, "trivial", "p50_ms", "redis"),
        note="(the floor)",
    )
    for key, field, label in (
        ("single_asleep", "p50_ms", "single sync send p50"),
        ("single_asleep", "p99_ms", "single sync send p99"),
        ("trivial_asleep", "p50_ms", "trivial request's round trip p50"),
    ):
        add(
            f"{key}_{field[:3]}",
            f"... {label} with busy polling off (broker and client `busy_poll_us=0`)",
            pymq(key, field),
            "ms",
            peer=peer_of(data, key.removesuffix("_asleep"), field, "redis"),
            note="(for scale)",
        )
    add(
        "floor_echo",
        "... the floor: raw TCP echo p50 (two threads of the benchmark, no server)",
        pymq("echo", "p50_ms"),
        "ms",
        note="(the floor)",
    )
    async_fig = pymq("async")
    add(
        "async_rate",
        "per-message `send_async`, 1 thread, every future awaited >= 150,000 msgs/s",
        async_fig,
        "msgs/s",
        goal=150_000,
    )
    add(
        "async_ratio",
        "per-message `send_async` >= 3.5x NATS JetStream `publish_async`",
        async_fig,
        "msgs/s",
        peer=peer_of(data, "async", "", "nats"),
        ratio_goal=3.5,
    )
    batch = pymq("batch")
    add(
        "batch_rate",
        "`send_batch` of 1,000 (`Message`s built in the loop) >= 600,000 msgs/s",
        batch,
        "msgs/s",
        goal=600_000,
    )
    add(
        "batch_ratio",
        "`send_batch` of 1,000 >= 3x Redis pipelined XADD",
        batch,
        "msgs/s",
        peer=peer_of(data, "batch", "", "redis"),
        ratio_goal=3,
    )
    server = data.get("server", {}).get("async", {}).get("remoting", {})
    add(
        "batch_broker",
        "... for scale: broker alone over remoting, batches encoded before the clock "
        "(server_bench)",
        server.get("batch_send_1thread"),
        "msgs/s",
    )
    for key, api in (
        ("consume", "`pull` (message objects)"),
        ("consume_records", "`pull_records` + index"),
    ):
        add(
            f"pull_{key}",
            f"consume from the start, {api} >= 1,500,000 msgs/s",
            pymq(key),
            "msgs/s",
            goal=1_500_000,
            peer=peer_of(data, "consume", "", "best"),
        )
    add(
        "e2e_p99",
        "end-to-end at 5,000 msgs/s (`send_async` -> long-poll `pull`) p99 <= 1 ms",
        pymq("e2e", "p99_ms"),
        "ms",
        goal=1.0,
        higher=False,
        peer=peer_of(data, "e2e", "p99_ms", "best"),
    )
    add(
        "e2e_p50",
        "... end-to-end p50",
        pymq("e2e", "p50_ms"),
        "ms",
        peer=peer_of(data, "e2e", "p50_ms", "best"),
        note="",
    )
    add(
        "e2e_batch_p99",
        "... end-to-end p99 with one `send_batch` of 10 a tick (the peers' producer) instead",
        pymq("e2e_batch", "p99_ms"),
        "ms",
        peer=peer_of(data, "e2e", "p99_ms", "best"),
        note="",
    )
    redis_durable = peer_of(data, "durable", "", "redis")
    add(
        "durable",
        "durable: SYNC_FLUSH broker, 64 producer threads, sync sends >= 2x Redis "
        "appendfsync always",
        pymq("durable"),
        "msgs/s",
        peer=redis_durable,
        ratio_goal=2,
    )
    add(
        "durable_unbatched",
        "... the same producers with `auto_batch=False` (a request a message)",
        pymq("durable_unbatched"),
        "msgs/s",
        peer=redis_durable,
    )
    spark = data.get("spark", {})
    # the Spark connector issue's targets: sinks and source against a Redis Streams data
    # source; the ceilings stay as the limit, and the source has a target against its own
    for key, what, goal in (
        ("sink", 'Spark sink `write.format("pymq")`', None),
        ("stream_sink", 'Spark stream sink `writeStream.format("pymq")`', None),
        ("source", 'Spark source `read.format("pymq")`', 0.9),
    ):
        ratio = spark.get(f"{key}_ratio")
        fig = None if ratio is None else {"median": ratio, "min": ratio, "max": ratio}
        if goal is None:
            add(f"spark_{key}", f"{what}: fraction of its Python ceiling (the limit)", fig, "x")
        else:
            add(
                f"spark_{key}",
                f"{what} >= {goal} of its Python ceiling (its own batches replayed)",
                fig, "x", goal=goal,
            )  # fmt: skip
    for key, what, goal in (
        ("sink", 'Spark sink `write.format("pymq")` vs a Redis Streams sink', 2),
        ("source", 'Spark source `read.format("pymq")` vs a Redis Streams source', 3),
    ):
        if f"{key}_redis" in spark:
            add(
                f"spark_{key}_vs_redis",
                f"{what} (rows/s)",
                spark.get(f"{key}_pymq"),
                "rows/s",
                peer=("redis", spark[f"{key}_redis"]),
                ratio_goal=goal,
            )
    if "source_pymq_jvm" in spark and "source_redis" in spark:
        add(
            "spark_source_jvm_vs_redis",
            'Spark source `read.format("pymq-jvm")` (read in the JVM) vs a Redis Streams source'
            " (rows/s)",
            spark["source_pymq_jvm"],
            "rows/s",
            peer=("redis", spark["source_redis"]),
            ratio_goal=3,
        )
    ha_targets(data.get("ha", {}), add, out)
    out += tx_targets(data.get("tx", {}))
    out += security_targets(data.get("security", {}))
    out += push_targets(data.get("push", {}))
    out += start_targets(data.get("start", {}))
    return out


def ha_fig(ha: dict[str, Any], setup: str, key: str, field: str = "") -> Fig | None:
    """A figure of ``ha_bench``: ``setup`` "none", "async", "sync", "redis" or "catchup"."""
    fig = ha.get("figures", {}).get(setup, {}).get(key)
    if fig is None:
        return None
    return fig[field] if field else fig  # type: ignore[no-any-return]


def ha_targets(ha: dict[str, Any], add: Callable[..., None], out: list[Target]) -> None:
    """The replication issue's targets (goals from ``ha_bench``), each against a setup
    measured in the same run of ``ha_bench``, or Redis in the same minutes."""
    sync_p99 = ha_bench.SYNC_P99_MAX_X_ASYNC
    for key, what, setup, field, versus, goal in (
        ("ha_sync_p99", f"HA: SYNC_MASTER + 1 slave, single sync send p99 <= {sync_p99:g}x "
         "ASYNC_MASTER + 1 slave's", "sync", "p99_ms", "async", sync_p99),
        ("ha_sync_p50", "... single sync send p50, SYNC_MASTER vs ASYNC_MASTER", "sync",
         "p50_ms", "async", None),
        ("ha_async_p99", "... single sync send p99, ASYNC_MASTER + 1 slave vs no slave",
         "async", "p99_ms", "none", None),
    ):  # fmt: skip
        other = ha_fig(ha, versus, "single", field)
        add(
            key, what, ha_fig(ha, setup, "single", field), "ms",
            peer=None if other is None else (ha_bench.LABELS[versus], other),
            ratio_goal=goal, higher=False,
        )  # fmt: skip
    none_batch = ha_fig(ha, "none", "batch")
    add(
        "ha_sync_batch",
        f"HA: SYNC_MASTER + 1 slave, `send_batch` of 1,000 >= "
        f"{ha_bench.SYNC_BATCH_MIN_X_NONE:g}x no slave",
        ha_fig(ha, "sync", "batch"),
        "msgs/s",
        peer=None if none_batch is None else (ha_bench.LABELS["none"], none_batch),
        ratio_goal=ha_bench.SYNC_BATCH_MIN_X_NONE,
    )
    redis = ha_fig(ha, "redis", "durable")
    for key, what, setup, goal in (
        ("ha_sync_durable", "HA: SYNC_MASTER + SYNC_FLUSH + 1 slave, 64 producer threads >= "
         f"{ha_bench.SYNC_DURABLE_MIN_X_REDIS:g}x Redis appendfsync always", "sync",
         ha_bench.SYNC_DURABLE_MIN_X_REDIS),
        ("ha_none_durable", "... SYNC_FLUSH alone (no slave), same run", "none", None),
    ):  # fmt: skip
        fig = ha_fig(ha, setup, "durable")
        if redis is None and fig is not None:
            why = f"not measured: no Redis figure ({ha.get('redis_missing') or 'see ha.log'})"
            out.append(Target(key, what, f"{cell(fig)} msgs/s", "-", "-", why))
            continue
        peer = None if redis is None else (ha_bench.LABELS["redis"], redis)
        add(key, what, fig, "msgs/s", peer=peer, ratio_goal=goal)
    add(
        "ha_catchup",
        f"HA: a new slave catches up with its master's log >= "
        f"{ha_bench.CATCHUP_MIN_MB_S:g} MB/s (connected -> lag 0)",
        ha_fig(ha, "catchup", "mb_per_s"),
        "MB/s",
        goal=ha_bench.CATCHUP_MIN_MB_S,
    )


def tx_targets(tx: dict[str, Any]) -> list[Target]:
    """The transactions issue's target (goal from ``tx_bench``): the exactly-once sink
    against the at-least-once one measured in the same minutes, checked on the runs'
    own ratios (each run wrote both)."""
    goal = tx_bench.EXACTLY_ONCE_MIN_X_AT_LEAST_ONCE
    what = f"TX: Spark sink `deliveryGuarantee=exactly-once` >= {goal:g}x at-least-once"
    sink = tx.get("figures", {}).get("sink")
    if sink is None:
        return [Target("tx_sink", what, "-", "-", "-", "not measured")]
    versus = f"{tx_bench.LABELS['at_least_once']} {cell(sink['at_least_once'])}"
    return [
        Target(
            "tx_sink", what, f"{cell(sink['exactly_once'])} rows/s", versus,
            cell(sink["ratio"], "x"), verdict(sink["ratio"], goal, higher=True),
        )
    ]  # fmt: skip


def security_targets(sec: dict[str, Any]) -> list[Target]:
    """The security issue's targets (goals in ``security_bench``), as that script judged
    them on the medians of the runs' own differences and ratios."""
    out = []
    for i, t in enumerate(sec.get("targets", [])):
        out.append(
            Target(f"security_{i}", f"SEC: {t['what']} {t['goal']}", t["value"], "ACL and TLS off",
                   "", "met" if t["met"] else "**missed**")
        )  # fmt: skip
    return out


def push_targets(push: dict[str, Any]) -> list[Target]:
    """The push consumer's targets (goals in ``push_bench``), as that script judged them
    on the medians (a ratio: the runs' own ratios)."""
    out = []
    for i, t in enumerate(push.get("targets", [])):
        out.append(
            Target(f"push_{i}", f"PUSH: {t['what']} {t['goal']}", t["value"], "", "",
                   "met" if t["met"] else "**missed**")
        )  # fmt: skip
    return out


def start_targets(start: dict[str, Any]) -> list[Target]:
    """Starting after ``pip install`` (goals in ``first_start``), as it judged them."""
    return [
        Target(f"start_{i}", f"START: {t['what']} {t['goal']}", t["value"], "", "",
               "met" if t["met"] else "**missed**")
        for i, t in enumerate(start.get("targets", []))
    ]  # fmt: skip


def push_lines(push: dict[str, Any]) -> list[str]:
    """The push benchmark's table: its figures, median (min-max), with the ratios to
    Redis the script computed from each run's own figures."""
    figs = push.get("figures", {})
    if "backlog" not in figs:
        return []

    def show(fig: Fig | None, unit: str = "") -> str:
        return "-" if fig is None else cell(fig, unit)

    def peer(key: str, system: str, field: str = "") -> Any:
        fig = figs.get(key, {}).get(system)
        return fig[field] if fig is not None and field else fig

    rows = [
        ["backlog, no-op listener, msgs/s (pymq: its defaults, pull page 32-1000)",
         show(peer("backlog", "pymq")), show(peer("backlog", "redis")),
         show(peer("backlog", "nats")), show(figs.get("backlog_x_redis"), "x")],
        ["backlog, no-op listener, msgs/s (pymq: pull_batch_size 1000)",
         show(peer("backlog_1000", "pymq")), show(peer("backlog", "redis")),
         show(peer("backlog", "nats")), show(figs.get("backlog_1000_x_redis"), "x")],
        ["the same, consume_message_batch_max_size 1000 (the listener gets the page)",
         show(peer("backlog_page", "pymq")), show(peer("backlog", "redis")),
         show(peer("backlog", "nats")), show(figs.get("backlog_page_x_redis"), "x")],
        ["end-to-end at 5,000 msgs/s, p50 ms", show(peer("e2e", "pymq", "p50_ms"), "ms"),
         show(peer("e2e", "redis", "p50_ms"), "ms"), show(peer("e2e", "nats", "p50_ms"), "ms"),
         ""],
        ["end-to-end at 5,000 msgs/s, p99 ms", show(peer("e2e", "pymq", "p99_ms"), "ms"),
         show(peer("e2e", "redis", "p99_ms"), "ms"), show(peer("e2e", "nats", "p99_ms"), "ms"),
         show(figs.get("e2e_p99_x_redis"), "x")],
    ]  # fmt: skip
    kill = peer("kill", "pymq")
    if kill is not None:
        for field, label in (
            ("notice_s", "kill -9 of 1 of 2 members -> the survivor notified, ms"),
            ("resumed_after_notice_s", "notified -> the dead member's queues consumed again, ms"),
        ):
            in_ms = {k: v * 1000 for k, v in kill[field].items()}
            rows.append([label, show(in_ms, "ms"), "", "", ""])
        rows.append(["kill -9: messages consumed twice", show(kill["redelivered"]), "", "", ""])
        for allocate in ("sticky", "averagely"):
            j = peer(f"join_{allocate}", "pymq")
            if j is not None:
                rows.append(
                    [
                        f"a 3rd member joins 2 under load, {allocate}: queues moved",
                        show(j["moved"]),
                        "",
                        "",
                        "",
                    ]
                )
                rows.append(
                    [
                        f"a 3rd member joins 2 under load, {allocate}: consumed twice",
                        show(j["redelivered"]),
                        "",
                        "",
                        "",
                    ]
                )
    return [
        f"Median of {push['runs']} run(s) (min-max), measured {push['date']} (load "
        f"{push['load_at_start']} at its start, {push.get('load_at_end', '?')} at its end). "
        "What each workload does: the script's docstring. ratio: pymq over Redis's consumer "
        "group, the median of each run's own ratio (ms: above 1 = pymq slower).",
        "",
        *table(["what", "pymq", "Redis Streams", "NATS JetStream", "ratio"], rows),
    ]


SECURITY_HEAD = ["what", "ACL and TLS off", "ACL on", "TLS on"]


def security_rows(sec: dict[str, Any], *, ranges: bool = True) -> list[list[str]]:
    figs = sec.get("figures", {})
    if not {"off", "acl", "tls"} <= figs.keys():
        return []

    def show(fig: Fig, unit: str = "") -> str:
        return cell(fig, unit) if ranges else num(fig["median"], unit)

    rows = []
    for label, get, unit in (
        ("single send p50, ms", lambda f: f["single"]["p50_ms"], "ms"),
        ("single send p99, ms", lambda f: f["single"]["p99_ms"], "ms"),
        ("single sends, msgs/s", lambda f: f["single"]["msgs_per_s"], ""),
        ("`send_batch` of 1,000, msgs/s", lambda f: f["batch"], ""),
    ):
        rows.append([label, *(show(get(figs[s]), unit) for s in ("off", "acl", "tls"))])
    return rows


def short(result: str) -> str:
    return (
        result.replace("**", "")
        .replace(" (not by every run)", "")
        .replace(" (the best run meets it)", " (best run meets it)")
    )


# -- the headline: targets next to the peers --------------------------------------------

# (label, peers' workload key, field, unit, ratio against: "redis" / "nats" / "best",
#  target text, the targets it stands for)
HEADLINE: list[tuple[str, str, str, str, str, str, tuple[str, ...]]] = [
    ("single sync send, 1 thread, p50 ms", "single", "p50_ms", "ms", "redis", "<= 0.15 ms",
     ("single_p50",)),
    ("single sync send, 1 thread, p99 ms", "single", "p99_ms", "ms", "redis", "<= 0.4 ms",
     ("single_p99",)),
    ("floor: trivial request round trip, p50 ms (GET_MAX_OFFSET, PING, PING)", "trivial",
     "p50_ms", "ms", "redis", "", ()),
    ("floor: raw TCP echo, no server, p50 ms", "echo", "p50_ms", "ms", "redis", "", ()),
    ("per-message async produce, 1 thread, msgs/s (`send_async`, -, `publish_async`)",
     "async", "", "msgs/s", "nats", ">= 150,000 and >= 3.5x NATS", ("async_rate", "async_ratio")),
    ("batched produce, 1,000 a batch, 100 B, msgs/s", "batch", "", "msgs/s", "redis",
     ">= 600,000 and >= 3x Redis", ("batch_rate", "batch_ratio")),
    ("consume from the start, msgs/s (pymq: `pull`, objects)", "consume", "", "msgs/s", "best",
     ">= 1,500,000", ("pull_consume",)),
    ("consume from the start, msgs/s (pymq: `pull_records`)", "consume_records", "", "msgs/s",
     "best", ">= 1,500,000", ("pull_consume_records",)),
    ("end-to-end at 5,000 msgs/s, long-poll consume, p99 ms", "e2e", "p99_ms", "ms", "best",
     "<= 1 ms", ("e2e_p99",)),
    ("end-to-end at 5,000 msgs/s, p50 ms", "e2e", "p50_ms", "ms", "best", "", ()),
    ("end-to-end p99 ms, pymq sending a `send_batch` of 10 a tick", "e2e_batch", "p99_ms", "ms",
     "best", "", ()),
    ("end-to-end p99 ms, pymq consuming with `pull_async` chains", "e2e_callback", "p99_ms", "ms",
     "best", "", ()),
    ("durable produce, 64 producer threads, msgs/s (ratio: vs Redis, the peer that fsyncs)",
     "durable", "", "msgs/s", "redis", ">= 2x Redis", ("durable",)),
    ("batched produce, 16 KiB, msgs/s", "batch_16KiB", "", "msgs/s", "best", "", ()),
    ("batched produce, 256 queues, msgs/s", "queues_256", "", "msgs/s", "best", "", ()),
]  # fmt: skip


def combined(found: list[Target], *, markdown: bool) -> str:
    if not found:
        return ""
    results = [t.verdict if markdown else short(t.verdict) for t in found]
    if all(r.startswith("met") for r in results) and len(found) > 1:
        return "met"
    if len(found) == 1:
        return results[0]
    parts = [
        ("ratio" if "ratio" in t.key else "rate") + " " + r
        for t, r in zip(found, results, strict=True)
    ]
    return "; ".join(parts)


def headline(data: dict[str, Any], *, markdown: bool = True) -> tuple[list[str], list[list[str]]]:
    head = ["workload", "pymq", "Redis Streams", "NATS JetStream", "ratio", "target", "verdict"]
    by_key = {t.key: t for t in targets(data)}
    rows = []
    for label, key, field, unit, against, target, keys in HEADLINE:
        cells = [peer_fig(data, key, field, s) for s in SYSTEMS]
        if all(c is None for c in cells):
            continue
        peer = peer_of(data, key, field, against)
        if key in ("consume_records", "e2e_batch", "e2e_callback"):  # pymq only: by the peers'
            versus = "consume" if key == "consume_records" else "e2e"
            peer = peer_of(data, versus, field, against)
            cells[1:] = [peer_fig(data, versus, field, s) for s in SYSTEMS[1:]]
        ratio = "-"
        if cells[0] is not None and peer is not None and key != "echo":  # echo: no server
            ratio = num(cells[0]["median"] / peer[1]["median"], "x")
            if against != "best":
                ratio += f" vs {PEER_NAMES[peer[0]].split()[0]}"
        shown = [num(c["median"], "ms" if unit == "ms" else "") if c else "-" for c in cells]
        found = [by_key[k] for k in keys if k in by_key]
        rows.append([label, *shown, ratio, target, combined(found, markdown=markdown)])
    spark = data.get("spark", {})
    for key, label in (
        ("sink", 'Spark sink `write.format("pymq")`, rows/s'),
        ("stream_sink", 'Spark stream sink `writeStream.format("pymq")`, rows/s'),
        ("source", 'Spark source `read.format("pymq")`, rows/s'),
    ):
        fig = spark.get(f"{key}_pymq")
        t = by_key.get(f"spark_{key}")
        if fig is None or t is None:
            continue
        result = t.verdict if markdown else short(t.verdict)
        goal = ">= 0.9x its ceiling" if key == "source" else "(ceiling: the limit)"
        redis = spark.get(f"{key}_redis")
        vs = by_key.get(f"spark_{key}_vs_redis")
        if redis is not None and vs is not None:  # the target against the Redis source/sink
            rows.append(
                [label, num(fig["median"]), num(redis["median"]), "-", f"{vs.ratio} vs Redis",
                 f">= {2 if key == 'sink' else 3}x Redis",
                 vs.verdict if markdown else short(vs.verdict)]
            )  # fmt: skip
        rows.append(
            [label, num(fig["median"]), "-", "-", f"{t.measured} of ceiling", goal,
             result if key == "source" else ""]
        )  # fmt: skip
    jvm, redis = spark.get("source_pymq_jvm"), spark.get("source_redis")
    vs = by_key.get("spark_source_jvm_vs_redis")
    if jvm is not None and redis is not None and vs is not None:
        rows.append(
            ['Spark source `read.format("pymq-jvm")`, rows/s', num(jvm["median"]),
             num(redis["median"]), "-", f"{vs.ratio} vs Redis", ">= 3x Redis",
             vs.verdict if markdown else short(vs.verdict)]
        )  # fmt: skip
    return head, rows


# -- remoting vs REST ------------------------------------------------------------------

EDGE_HEAD = [
    "workload (ASYNC_FLUSH unless said)",
    "remoting (pymq client)",
    "REST (httpx)",
    "REST (raw socket)",
    "remoting faster by: vs httpx",
    "vs raw socket",
]
# (label, flush mode, workload key, field, unit)
EDGE_ROWS: list[tuple[str, str, str, str, str]] = [
    ("trivial request round trip p50, ms (GET_MAX_OFFSET / GET offsets)", "async", "trivial",
     "p50_ms", "ms"),
    ("single sync send p50, ms", "async", "single", "p50_ms", "ms"),
    ("single sync send p99, ms", "async", "single", "p99_ms", "ms"),
    ("single sync send, 1 thread, msgs/s", "async", "single", "msgs_per_s", ""),
    ("batch send 1,000 a request (encoded before the clock), 1 thread, msgs/s", "async",
     "batch_send_1thread", "", ""),
    ("batch send, 4 threads, msgs/s", "async", "batch_send_4threads", "", ""),
    ("pull 10,000 a request, records indexed, msgs/s", "async", "pull_indexed", "", ""),
    ("pull, every body copied out, msgs/s", "async", "pull_copied", "", ""),
    ("pull as message objects, msgs/s (`pull` / JSON)", "async", "pull_objects", "", ""),
    ("SYNC_FLUSH single sync send p50, ms", "sync", "single", "p50_ms", "ms"),
    ("SYNC_FLUSH batch send, 1 thread, msgs/s", "sync", "batch_send_1thread", "", ""),
]  # fmt: skip


def edge_rows(data: dict[str, Any], *, ranges: bool = True) -> list[list[str]]:
    """The same workloads through the broker's remoting and REST edges (server_bench)."""
    server = data.get("server", {})
    rows = []
    for label, flush, key, field, unit in EDGE_ROWS:
        figs: list[Fig | None] = []
        for edge in ("remoting", "rest", "raw"):
            fig = server.get(flush, {}).get(edge, {}).get(key)
            figs.append(None if fig is None else (fig[field] if field else fig))
        if figs[0] is None:
            continue
        remoting = figs[0]["median"]
        speedups = []
        for other in figs[1:]:
            if other is None:
                speedups.append("-")
                continue
            x = other["median"] / remoting if unit == "ms" else remoting / other["median"]
            speedups.append(num(x, "x"))
        shown = [(cell(f, unit) if ranges else num(f["median"], unit)) if f else "-" for f in figs]
        rows.append([label, *shown, *speedups])
    return rows


def edge_note(data: dict[str, Any]) -> str:
    echo = data.get("server", {}).get("tcp_echo")
    floor = ""
    if echo:
        floor = (
            f" Raw TCP echo between two threads of the benchmark (no server), same run: "
            f"p50 {cell(echo['p50_ms'], 'ms')} ms, p99 {cell(echo['p99_ms'], 'ms')} ms."
        )
    return (
        "One broker, the same requests through each edge: remoting with pymq's client "
        "(`Producer`, `PullConsumer`), REST with httpx and with the benchmark's own HTTP/1.1 "
        "over a socket (no client library). Faster by: the rate ratio, or for latencies "
        "REST's over remoting's." + floor
    )


# -- physical limits -------------------------------------------------------------------


def w1_record_bytes(body: int, topic: str) -> int:
    """Stored bytes of one message a Producer sends with no tags/keys: the record
    with its UNIQ_KEY property."""
    uniq = len(UniqKeyGenerator().next_id())
    return record_size(body, len(topic), len(b"UNIQ_KEY\x01\x02") + uniq)


def limit_rows(data: dict[str, Any]) -> tuple[list[list[str]], list[list[str]]]:
    lim = data.get("limits")
    if lim is None:
        return [], []
    disk, lo = lim["disk"], lim["loopback"]
    limits = [
        ["disk sequential write", cell(disk["seq_write_mb_s"]) + " MB/s", disk["tool"]],
        ["disk fdatasync of 4 KiB, p50", cell(disk["fdatasync_ms_p50"], "ms") + " ms", ""],
        ["disk fdatasync of 4 KiB, p99", cell(disk["fdatasync_ms_p99"], "ms") + " ms", ""],
        ["loopback TCP bandwidth", cell(lo["mb_s"]) + " MB/s", lo["tool"]],
        ["loopback round trip, p50", cell(lo["round_trip_ms_p50"], "ms") + " ms", ""],
        ["loopback round trip, p99", cell(lo["round_trip_ms_p99"], "ms") + " ms", ""],
    ]
    disk_mb = disk["seq_write_mb_s"]["median"]
    lo_mb = lo["mb_s"]["median"]
    fsync_rate = 1000 / disk["fdatasync_ms_p50"]["median"]
    rtt = lo["round_trip_ms_p50"]["median"]
    fractions: list[list[str]] = []

    def share(what: str, mb_s: float, of: str, limit: float) -> None:
        fractions.append([what, f"{mb_s:,.0f} MB/s", of, num(100 * mb_s / limit, "%")])

    record = w1_record_bytes(100, BATCH_TOPIC)
    batch = peer_fig(data, "batch", "", "pymq")
    if batch is not None:
        stored = batch["median"] * record / 1e6
        share(
            f"1 batched produce, 100 B bodies (~{record} B stored a message)",
            stored,
            "disk write",
            disk_mb,
        )
        share(
            "1 batched produce, 100 B bodies: body bytes",
            batch["median"] * 100 / 1e6,
            "loopback",
            lo_mb,
        )
    for size in (1024, 16384):
        tag = f"{size // 1024}KiB"
        fig = peer_fig(data, f"batch_{tag}", "", "pymq")
        if fig is not None:
            mb = fig["median"] * size / 1e6
            share(f"6 batched produce, {size // 1024} KiB bodies", mb, "disk write", disk_mb)
            share(f"6 batched produce, {size // 1024} KiB bodies", mb, "loopback", lo_mb)
        fig = peer_fig(data, f"consume_records_{tag}", "", "pymq")
        if fig is not None:
            mb = fig["median"] * size / 1e6
            share(f"6 consume, {size // 1024} KiB bodies (`pull_records`)", mb, "loopback", lo_mb)
    fig = peer_fig(data, "consume_records", "", "pymq")
    if fig is not None:
        share(
            "4 consume, 100 B bodies (`pull_records`; ~record bytes)",
            fig["median"] * record / 1e6,
            "loopback",
            lo_mb,
        )
    server = data.get("server", {}).get("async", {}).get("remoting", {}).get("batch_send_1thread")
    if server is not None:
        share(
            "broker alone, batch send over remoting (server_bench, ~record bytes)",
            server["median"] * record / 1e6,
            "disk write",
            disk_mb,
        )
    store = data.get("store", {}).get("batch_append")
    if store is not None:
        share(
            "store in-process batch append (~235 B a record)",
            store["median"] * 235 / 1e6,
            "disk write",
            disk_mb,
        )
    catchup = data.get("ha", {}).get("figures", {}).get("catchup", {}).get("mb_per_s")
    if catchup is not None:
        share("HA: a new slave's catch-up (log bytes)", catchup["median"], "loopback", lo_mb)
        share("HA: a new slave's catch-up (log bytes)", catchup["median"], "disk write", disk_mb)
    durable = peer_fig(data, "durable", "", "pymq")
    if durable is not None:
        fractions.append(
            [
                "3 durable produce, 64 producers (SYNC_FLUSH)",
                f"{durable['median']:,.0f} msgs/s",
                f"one fdatasync at a time: {fsync_rate:,.0f}/s",
                num(100 * durable["median"] / fsync_rate, "%"),
            ]
        )
    one = data.get("store", {}).get("sync_1_writer")
    if one is not None:
        fractions.append(
            [
                "store SYNC_FLUSH, 1 writer (one fdatasync a message)",
                f"{one['median']:,.0f} msgs/s",
                f"one fdatasync at a time: {fsync_rate:,.0f}/s",
                num(100 * one["median"] / fsync_rate, "%"),
            ]
        )
    single = peer_fig(data, "single", "p50_ms", "pymq")
    if single is not None:
        fractions.append(
            [
                "2 single synchronous send, p50",
                f"{single['median']:.3f} ms",
                f"loopback round trip p50 {rtt:.3f} ms",
                f"{single['median'] / rtt:.0f}x the round trip",
            ]
        )
    return limits, fractions


# -- the other benchmarks --------------------------------------------------------------


def store_rows(s: dict[str, Any]) -> list[list[str]]:
    rows = []
    for key, label, target in (
        ("batch_append", "batch append, 1,000 a call, ASYNC_FLUSH", ">= 1,000,000"),
        ("read_bodies", "read by offset, 1,000 a call, to bodies", ">= 2,000,000"),
        (
            "sync_64_tasks",
            "SYNC_FLUSH, 64 asyncio writers (uvloop, GroupAppender, group commit)",
            ">= 50,000",
        ),
        ("sync_64_tasks_unbatched", "SYNC_FLUSH, 64 asyncio writers each appending alone", ""),
        ("sync_64_threads", "SYNC_FLUSH, 64 thread writers", ""),
        ("sync_1_writer", "SYNC_FLUSH, 1 writer", ""),
    ):
        if key in s:
            rows.append([label, cell(s[key]) + " msgs/s", target])
    for rec in s.get("recovery", []):
        rows.append(
            [
                f"recovery after {rec['mode']}, {rec['log_mb']} MB log",
                f"{rec['seconds'] * 1000:.0f} ms ({rec['scanned_records']:,} records scanned)",
                "",
            ]
        )
    return rows


def server_rows(s: dict[str, Any]) -> list[list[str]]:
    """Every figure of server_bench, an edge a column."""
    rows = []
    labels = [
        ("trivial", "p50_ms", "trivial request round trip p50, ms", "ms"),
        ("trivial", "p99_ms", "trivial request round trip p99, ms", "ms"),
        ("single", "p50_ms", "single send p50, ms", "ms"),
        ("single", "p99_ms", "single send p99, ms", "ms"),
        ("single", "msgs_per_s", "single send, 1 thread, msgs/s", ""),
        ("batch_send_1thread", "", "batch send 1,000/request, 1 thread, msgs/s", ""),
        ("batch_send_2threads", "", "batch send 1,000/request, 2 threads, msgs/s", ""),
        ("batch_send_4threads", "", "batch send 1,000/request, 4 threads, msgs/s", ""),
        ("pull_indexed", "", "pull 10,000/request, records indexed, msgs/s", ""),
        ("pull_copied", "", "pull, every body copied out, msgs/s", ""),
        ("pull_objects", "", "pull as message objects, msgs/s", ""),
    ]
    for flush in ("async", "sync"):
        r = s.get(flush)
        if r is None:
            continue
        name = flush.upper() + "_FLUSH"
        for key, field, label, unit in labels:
            figs = [r.get(edge, {}).get(key) for edge in ("remoting", "rest", "raw")]
            if all(f is None for f in figs):
                continue
            rows.append(
                [f"{name} {label}", *(cell(f[field] if field else f, unit) if f else "-"
                                      for f in figs)]
            )  # fmt: skip
        rows.append(
            [f"{name} client batch encoding (not in the figures)",
             f"{r['client_encode_us_per_msg']:.2f} us/msg", "", ""]
        )  # fmt: skip
    return rows


def client_rows(s: dict[str, Any]) -> list[list[str]]:
    rows = [
        [label, cell(s[key]) + " msgs/s"]
        for key, label in (
            ("sync_1", "`send`, 1 thread"),
            ("sync_8", "`send`, 8 threads"),
            ("async", "`send_async`, 1 thread, every future awaited"),
            ("batch", "`send_batch` of 1,000 (building the Messages included)"),
        )
        if key in s
    ]
    for key, what in (("cpu_split", "`send`"), ("cpu_split_async", "`send_async`")):
        if key in s:
            c = s[key]
            rows.append(
                [
                    f"{what}: wall / client CPU / broker CPU a message",
                    f"{c['wall_us_per_msg']:.1f} / {c['client_cpu_us_per_msg']:.1f} / "
                    f"{c['broker_cpu_us_per_msg']:.1f} us",
                ]
            )
    return rows


def spark_rows(s: dict[str, Any]) -> list[list[str]]:
    rows = [
        [label, cell(s[key]) + " rows/s"]
        for key, label in (
            ("sink_pymq", 'sink `write.format("pymq")`'),
            ("sink_pymq_sharded", "... the same with a `shardingKey` column (1,000 keys)"),
            ("sink_noop_arrow", "sink ceiling: no-op Python Arrow writer"),
            ("stream_sink_pymq", 'stream sink `writeStream.format("pymq")` from a Python source'),
            ("stream_sink_noop_arrow", "stream sink ceiling: same source, no-op Arrow writer"),
            ("source_pymq", 'source `read.format("pymq")` -> noop'),
            (
                "source_pymq_redis_columns",
                "... the same reading the Redis source's 4 columns (a schema given to the read)",
            ),
            ("source_pymq_jvm", 'source `read.format("pymq-jvm")` (read in the JVM) -> noop'),
            ("source_replay_arrow", "source ceiling: pymq's own batches replayed from memory"),
            ("source_memory_arrow", "source ceiling: synthetic in-memory Python Arrow source"),
            ("source_memory_arrow_redis_schema", "... the same with the Redis source's schema"),
            ("sink_redis", "sink peer: Redis Streams Python data source (pipelined XADD)"),
            ("source_redis", "source peer: Redis Streams Python data source (XRANGE pages)"),
            ("jvm", "JVM only: range -> noop"),
        )
        if key in s
    ]
    for key, label, goal in (
        ("sink_ratio", "sink / ceiling (the limit)", None),
        ("stream_sink_ratio", "stream sink / ceiling (the limit)", None),
        ("source_ratio", "source / ceiling of its own rows replayed (target >= 0.9)", 0.9),
        ("source_synthetic_ratio", "source / synthetic in-memory ceiling (for scale)", None),
        ("sink_vs_redis", "pymq sink / Redis Streams sink (target >= 2)", 2),
        ("source_vs_redis", "pymq source / Redis Streams source (target >= 3)", 3),
        ("source_redis_columns_vs_redis", "... reading the Redis source's 4 columns", None),
        ("source_jvm_vs_redis", "pymq-jvm source / Redis Streams source (target >= 3)", 3),
        ("sink_redis_ratio", "Redis Streams sink / ceiling (for scale)", None),
        ("source_redis_ratio", "Redis Streams source / its schema's ceiling (for scale)", None),
    ):
        if key in s:
            met = "" if goal is None else ": met" if s[key] >= goal else ": **missed**"
            rows.append([label, f"{s[key]:.2f}{met}"])
    # CPU microseconds per row by process: where a job's time goes
    for job, roles in s.get("cpu_us_per_row", {}).items():
        parts = ", ".join(f"{role.replace('_', ' ')} {us:.2f}" for role, us in roles.items())
        rows.append([f"CPU us/row, {job.replace('_', ' ')}", parts])
    return rows


HA_COLUMNS = ("none", "async", "sync", "redis")
HA_HEAD = ["what", "unit", *(ha_bench.LABELS[s] for s in HA_COLUMNS)]


def ha_rows(ha: dict[str, Any], *, ranges: bool = True) -> list[list[str]]:
    """``ha_bench``'s figures, a setup a column (Redis: the durable row only)."""

    def show(fig: Fig | None, unit: str) -> str:
        if fig is None:
            return "-"
        return cell(fig, unit) if ranges else num(fig["median"], unit)

    rows = []
    for label, key, field, unit in (
        ("single sync send, 1 thread, p50", "single", "p50_ms", "ms"),
        ("single sync send, 1 thread, p99", "single", "p99_ms", "ms"),
        ("single sync send, 1 thread", "single", "msgs_per_s", "msgs/s"),
        ("`send_batch` of 1,000, 1 thread", "batch", "", "msgs/s"),
        ("slave's lag when the batch clock stopped", "lag_after_batch_bytes", "", "bytes"),
        ("durable: SYNC_FLUSH, 64 producer threads", "durable", "", "msgs/s"),
    ):
        figs = [ha_fig(ha, s, key, field) for s in HA_COLUMNS]
        if all(f is None for f in figs):
            continue
        rows.append([label, unit, *(show(f, "ms" if unit == "ms" else "") for f in figs)])
    return rows


TX_HEAD = ["what", "unit", "median (min-max)", "against, same run", "ratio"]


def tx_rows(tx: dict[str, Any], *, ranges: bool = True) -> list[list[str]]:
    """``tx_bench``'s figures: each next to what it is compared with."""
    figs = tx.get("figures", {})
    if not {"sink", "commit", "send"} <= figs.keys():
        return []

    def show(fig: Fig, unit: str = "") -> str:
        return cell(fig, unit) if ranges else num(fig["median"], unit)

    sink, commit, send = figs["sink"], figs["commit"], figs["send"]
    label = tx_bench.LABELS
    halves = f"{tx_bench.COMMIT_HALVES} halves of {tx_bench.COMMIT_HALF_MESSAGES:,} rows"
    rows = [
        ['Spark sink `write.format("pymq")`, `deliveryGuarantee=exactly-once`', "rows/s",
         show(sink["exactly_once"]), f"{label['at_least_once']}: {show(sink['at_least_once'])}",
         show(sink["ratio"], "x")],
    ]  # fmt: skip
    for brokers in tx_bench.BROKER_COUNTS:
        for field in ("p50_ms", "p99_ms"):
            rows.append(
                [f"commit of a micro-batch ({halves}), {label[brokers]}, {field[:3]}", "ms",
                 show(commit[f"brokers_{brokers}"][field], "ms"), "", ""]
            )  # fmt: skip
    rows.append(
        ["`TransactionProducer.send_message_in_transaction`, 1 thread", "msgs/s",
         show(send["transactional"]["msgs_per_s"]),
         f"`Producer.send` (auto_batch off): {show(send['plain']['msgs_per_s'])}",
         show(send["ratio"], "x")]
    )  # fmt: skip
    for field in ("p50_ms", "p99_ms"):
        rows.append(
            [f"... its latency, {field[:3]}", "ms", show(send["transactional"][field], "ms"),
             f"`Producer.send`: {show(send['plain'][field], 'ms')}", ""]
        )  # fmt: skip
    return rows


def ha_catchup_text(ha: dict[str, Any]) -> str:
    c = ha.get("figures", {}).get("catchup")
    if c is None:
        return ""
    return (
        f"A new slave catching up with a master's {c['mb']['median']:,.0f} MB log "
        f"({ha_bench.CATCHUP_BODY_BYTES // 1024} KiB messages, the master idle): "
        f"{cell(c['mb_per_s'])} MB/s from the first reading connected to lag 0, which took "
        f"{cell(c['seconds'], 'ms')} s; {cell(c['from_start_s'], 'ms')} s from the slave's "
        "process start to lag 0."
    )


# -- noise -----------------------------------------------------------------------------


def summaries(node: Any, path: str) -> Iterator[tuple[str, Fig]]:
    if isinstance(node, dict):
        if {"median", "min", "max"} <= node.keys():
            yield path, node
            return
        for k, v in node.items():
            if k != "per_run":
                yield from summaries(v, f"{path}.{k}" if path else str(k))


def noisy(data: dict[str, Any]) -> tuple[list[list[str]], int, int]:
    """Figures whose max / min is above NOISY; and how many figures had a spread."""
    rows, counted, single = [], 0, 0
    for step in STEPS:
        for path, fig in summaries(data.get(step, {}), step):
            if fig["min"] <= 0:
                continue
            if fig["min"] == fig["max"]:
                single += 1
                continue
            counted += 1
            spread = fig["max"] / fig["min"]
            if spread > NOISY:
                rows.append(
                    [f"`{path}`", f"{spread:.2f}", cell(fig, "ms" if "_ms" in path else "")]
                )
    rows.sort(key=lambda r: -float(r[1]))
    return rows, counted, single


def noisy_by_step(rows: list[list[str]]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        step = r[0].strip("`").split(".")[0]
        counts[step] = counts.get(step, 0) + 1
    return ", ".join(f"{step} {n}" for step, n in sorted(counts.items(), key=lambda x: -x[1]))


# -- the report ------------------------------------------------------------------------


def runs_of(step: dict[str, Any]) -> str:
    if "runs" in step:
        return str(step["runs"])
    argv = str(step.get("command", "")).split()  # store_bench keeps only its command line
    if "--runs" in argv and argv.index("--runs") + 1 < len(argv):
        return argv[argv.index("--runs") + 1]
    return "?"


def scale_rows(data: dict[str, Any]) -> list[list[str]]:
    """Workload 8b: throughput at 1, 16, 256 queues and what is left at 256."""
    rows = []
    for system in SYSTEMS:
        figs = [peer_fig(data, f"queues_{q}", "", system) for q in (1, 16, 256)]
        if any(f is None for f in figs):
            continue
        first, last = figs[0], figs[-1]
        assert first is not None and last is not None
        kept = num(100 * last["median"] / first["median"], "%")
        rows.append([PEER_NAMES[system], *(cell(f) for f in figs), kept])
    return rows


def broker_rows(data: dict[str, Any]) -> list[list[str]]:
    """Workload 8a: pymq with 1 and 2 brokers."""
    rows = []
    for suffix, label in (("", "1 client thread"), ("_2threads", "2 client threads")):
        one = peer_fig(data, f"brokers_1{suffix}", "", "pymq")
        two = peer_fig(data, f"brokers_2{suffix}", "", "pymq")
        if one is not None and two is not None:
            rows.append([label, cell(one), cell(two), num(two["median"] / one["median"], "x")])
    return rows


def sizes_text(sizes: dict[str, Any]) -> str:
    def one(v: Any) -> str:
        if isinstance(v, dict):
            return ", ".join(f"{n:,} x {int(k) // 1024} KiB" for k, n in v.items())
        return f"{v:,}" if isinstance(v, int) else f"{v:g}"

    return "; ".join(f"{k} {one(v)}" for k, v in sizes.items())


def machine_lines(data: dict[str, Any]) -> list[str]:
    m = data.get("limits", {}).get("machine")
    peers = data.get("peers", {})
    lines = []
    if m:
        lines += [
            f"- CPU: {m['cpu']}, {m['cores']} cores; RAM {m['ram_gib']} GiB",
            f"- kernel: {m['kernel']}; Python {m['python']}",
            f"- data disk: {m['disk']} (benchmarks' data under `{m['data_dir']}`)",
        ]
    if "versions" in peers:
        v = peers["versions"]
        lines.append(
            "- peers: " + ", ".join(f"{k} {x}" for k, x in v.items() if k not in ("python", "pymq"))
        )
    if "load_at_start" in peers:
        lines.append(
            f"- load average during the peers benchmark: {peers['load_at_start']} at its start, "
            f"{peers.get('load_at_end', '?')} at its end"
        )
    return lines


def markdown(data: dict[str, Any]) -> str:
    run = data.get("run", {})
    quick = run.get("quick", False)
    md = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`benchmarks/run_all.py`, then `benchmarks/report.py` from "
        "the JSON in `benchmarks/results/`); do not edit by hand, run it again.",
        "",
    ]
    if quick:
        md += [
            "**A quick (smoke) run: small sizes, mostly one run per figure; not a measurement "
            "to quote.**",
            "",
        ]
    # a partial run (run_all --only) leaves the other steps' JSON from an earlier run:
    # when each figure was measured is said, step by step
    started = {
        step: d["date"]
        for step, d in data.items()
        if step != "run" and isinstance(d, dict) and "date" in d
    }
    md += [
        f"Run of {run.get('date', '?')} to {run.get('finished', '?')}.",
        "",
        "When each step's figures were measured (a partial run keeps the other steps' "
        "results): " + ", ".join(f"{step} {when}" for step, when in sorted(started.items())) + ".",
        "",
        "## Machine",
        "",
        *machine_lines(data),
        "",
        "## Commands",
        "",
        "```",
        "make bench" + (" QUICK=1" if quick else "") + f"   # {run.get('command', '')}",
    ]
    for s in run.get("steps", []):
        status = "" if s["exit_code"] == 0 else f"   # FAILED: exit {s['exit_code']}"
        md.append(f"{s['command']}   # {s['seconds']:.0f} s{status}")
    md += ["```", ""]
    missing = [s for s in STEPS if s not in data]
    if missing:
        md += [f"Not in this report (not run, or failed): {', '.join(missing)}.", ""]
    md += [
        "Every figure is the median of the runs with the min and max in parentheses. "
        "The machine is shared and its speed swings up to 2x from minute to minute: "
        "compare figures measured in the same run (the ratios) more than absolute ones.",
        "",
        "## pymq against its targets",
        "",
        "Issue #23's targets, each measured in this run next to the peer it names (Redis "
        "Streams or NATS JetStream, each through its Python client, "
        "`benchmarks/peers_bench.py`, in the same minutes). ratio: pymq's median over the "
        "peer's (for ms, above 1 = pymq slower); a goal on a ratio is checked on pymq's runs "
        "over the peer's median. Verdicts go by the median. The rows that start with HA are the "
        "replication targets (`benchmarks/ha_bench.py`): each against another setup of the "
        "same run, or Redis with appendfsync always in the same minutes. The row that starts "
        "with TX is the transactions target (`benchmarks/tx_bench.py`): the exactly-once sink "
        "against the at-least-once one of the same run, its ratio the runs' own ratios.",
        "",
    ]
    md += table(
        ["target", "pymq", "peer", "ratio", "verdict"],
        [[t.what, t.measured, t.versus, t.ratio, t.verdict] for t in targets(data)],
    )
    head, rows = headline(data)
    md += [
        "",
        "## Headline",
        "",
        "Medians; the tables the README shows (`python benchmarks/report.py --headline`). "
        "ratio: pymq over the peer the target names (else the best peer); for ms, above 1 = "
        "pymq slower.",
        "",
        *table(head, rows),
    ]
    edges = edge_rows(data, ranges=False)
    if edges:
        md += ["", "Remoting vs the REST edge (`benchmarks/server_bench.py`), medians:", ""]
        md += [*table(EDGE_HEAD, edges), "", edge_note(data)]
    limits, fractions = limit_rows(data)
    if limits:
        md += [
            "",
            "## Physical limits, measured in the same run",
            "",
            "`benchmarks/limits.py`: the disk under the benchmarks' data dir and loopback TCP.",
            "",
            *table(["limit", "median (min-max)", "how"], limits),
            "",
            "pymq's figures as a fraction of them (medians; bytes are body bytes unless said):",
            "",
            *table(["pymq figure", "as rate", "limit", "fraction"], fractions),
        ]
    if "peers" in data:
        p = data["peers"]
        md += [
            "",
            "## pymq next to Redis Streams and NATS JetStream (`benchmarks/peers_bench.py`)",
            "",
            f"Median of {p['runs']} run(s) (min-max). Sizes: {sizes_text(p['sizes'])}. "
            "What each workload does: the script's docstring. 6: pymq compresses bodies over "
            "4 KiB on single sends only (`compress_msg_body_over_howmuch`, 4096; zlib level 5 "
            "unless the row says zstd); `send_batch` is "
            "never compressed, so the 16 KiB batched rows are raw bodies and the 16 KiB single "
            "sends are the compression path. 8b: redis spreads each pipeline over that many "
            "stream keys, JetStream over that many subjects of one stream. 3: pymq and redis "
            "answer after fsync, JetStream after writing its file (no fsync).",
            "",
            *table(["workload", "unit", *SYSTEMS, "pymq/best"], peers_rows(data)),
        ]
        scale = scale_rows(data)
        if scale:
            md += [
                "",
                "Workload 8, does throughput hold as queues (and brokers) grow? Batched produce, "
                "100 B bodies, msgs/s:",
                "",
                *table(["system", "1 queue", "16 queues", "256 queues", "256 vs 1"], scale),
            ]
        brokers = broker_rows(data)
        if brokers:
            md += [
                "",
                "pymq with 1 and 2 brokers (a topic of 8 queues on each), batched produce, msgs/s:",
                "",
                *table(["producer", "1 broker", "2 brokers", "2 vs 1"], brokers),
            ]
    if "ha" in data:
        ha = data["ha"]
        redis = (
            f"Redis: redis-server {ha['versions'].get('redis-server', '?')} with appendfsync "
            "always, 64 threads each with its own connection."
            if ha_fig(ha, "redis", "durable") is not None
            else f"Redis appendfsync always: not measured ({ha.get('redis_missing')})."
        )
        sizes = ha["sizes"]
        md += [
            "",
            "## Replication: SYNC_MASTER vs ASYNC_MASTER vs no slave (`benchmarks/ha_bench.py`)",
            "",
            f"Median of {ha['runs']} run(s) (min-max), measured {ha['date']} (load "
            f"{ha['load_at_start']} at its start, {ha.get('load_at_end', '?')} at its end). "
            "Each setup a fresh NameServer and master (and slave) on loopback, pymq's "
            f"`Producer`, 100 B bodies: {sizes['singles']:,} single sends, "
            f"{sizes['messages']:,} batched (ASYNC_FLUSH brokers); "
            f"64 x {sizes['durable_per_producer']:,} durable sends (SYNC_FLUSH brokers). "
            "The setups alternate within each run; every send measured answered SEND_OK "
            "(a SYNC_MASTER: once its in-sync slave had the bytes). " + redis,
            "",
            *table(HA_HEAD, ha_rows(ha)),
            "",
            ha_catchup_text(ha),
        ]
    if "tx" in data:
        tx = data["tx"]
        sizes = tx["sizes"]
        md += [
            "",
            "## Transactions: the exactly-once sink, batch commits, `TransactionProducer` "
            "(`benchmarks/tx_bench.py`)",
            "",
            f"Median of {tx['runs']} run(s) (min-max), measured {tx['date']} (load "
            f"{tx['load_at_start']} at its start, {tx.get('load_at_end', '?')} at its end). "
            "Each run a fresh NameServer and 2 brokers on loopback, 100 B bodies; the setups "
            "alternate within each run; a ratio is the median of the runs' own ratios. Sink: "
            f"Spark local[2], {sizes['rows']:,} rows in 2 partitions, each guarantee twice a "
            "run (A B B A), timed from the action's start to its end (for exactly-once: every "
            "request stored as a half, then the driver's batch commit); the topic then held "
            "exactly the rows written. Commits: "
            f"{sizes['commits']} micro-batches per setup, each stored as halves first, the "
            "clock on `connector.spark.exactly_once.commit` only (what the sink's driver "
            "calls: a `Producer` opened, the cluster asked, one batch commit per broker). "
            f"Sends: {sizes['sends']:,} each, one thread, every answer SEND_OK.",
            "",
            *table(TX_HEAD, tx_rows(tx)),
        ]
    if "push" in data:
        md += ["", "## Push consumer (`benchmarks/push_bench.py`)", "", *push_lines(data["push"])]
    if "security" in data:
        sec = data["security"]
        md += [
            "",
            "## Access control and TLS (`benchmarks/security_bench.py`)",
            "",
            f"Median of {sec['runs']} run(s) (min-max), measured {sec['date']} (load "
            f"{sec['load_at_start']} at its start, {sec.get('load_at_end', '?')} at its end). "
            "Three clusters of one NameServer and one broker side by side on loopback, 100 B "
            "bodies: no ACL and no TLS; ACL on (every request signed by the producer and "
            "checked by the broker); TLS on (RSA 2048, the producer verifying the broker). "
            "They take turns in tenths of each workload.",
            "",
            *table(SECURITY_HEAD, security_rows(sec)),
        ]
    for step, title, rows_of, head2 in (
        (
            "server",
            "The broker's edges, remoting and REST (`benchmarks/server_bench.py`)",
            server_rows,
            ["what", "remoting (pymq client)", "REST (httpx)", "REST (raw socket)"],
        ),
        (
            "client",
            "Producer (`benchmarks/client_bench.py`)",
            client_rows,
            ["what", "median (min-max)"],
        ),
        (
            "store",
            "Store, in-process (`benchmarks/store_bench.py`)",
            store_rows,
            ["what", "median (min-max)", "target"],
        ),
        (
            "spark",
            "Spark connector (`benchmarks/spark_bench.py`)",
            spark_rows,
            ["what", "median (min-max)"],
        ),
    ):
        if step in data:
            md += ["", f"## {title}", "", f"Median of {runs_of(data[step])} run(s).", ""]
            md += table(head2, rows_of(data[step]))
    rows, counted, single = noisy(data)
    md += ["", "## What was noisy", ""]
    if counted == 0:
        md.append("Every figure comes from a single run: the spread is unknown.")
    else:
        md.append(
            f"{len(rows)} of {counted} figures with several runs spread more than "
            f"{NOISY}x (max / min)"
            + (f"; {single} figures had a single run" if single else "")
            + ":"
        )
        if rows:
            md += [
                "",
                f"By benchmark: {noisy_by_step(rows)}. Latency tails (p99) and the Spark jobs "
                "move most; read those figures as ranges, and the medians as the figure.",
                "",
                *table(["figure", "max / min", "median (min-max)"], rows),
            ]
    return "\n".join(md) + "\n"


def write(results: Path, doc: Path) -> None:
    """Write the report from ``results`` to ``doc`` and print the combined table."""
    data = load(results)
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(markdown(data))
    print()
    targets_rows = [
        [t.what, t.measured, t.versus, t.ratio, short(t.verdict)] for t in targets(data)
    ]
    print(terminal(["target", "pymq", "peer", "ratio", "verdict"], targets_rows))
    print()
    head, rows = headline(data, markdown=False)
    print(terminal(head, rows))
    edges = edge_rows(data)
    if edges:
        print()
        print(terminal(EDGE_HEAD, edges))
    limits, fractions = limit_rows(data)
    if limits:
        print()
        print(terminal(["limit", "median (min-max)", "how"], limits))
        print()
        print(terminal(["pymq figure", "as rate", "limit", "fraction"], fractions))
    if "ha" in data:
        print()
        print(terminal(HA_HEAD, ha_rows(data["ha"], ranges=False)))
        print(ha_catchup_text(data["ha"]))
    tx_table = tx_rows(data.get("tx", {}), ranges=False)
    if tx_table:
        print()
        print(terminal(TX_HEAD, tx_table))
    security_table = security_rows(data.get("security", {}), ranges=False)
    if security_table:
        print()
        print(terminal(SECURITY_HEAD, security_table))
    noisy_rows, counted, _ = noisy(data)
    print(f"\nnoisy (max/min > {NOISY}): {len(noisy_rows)} of {counted} figures; report: {doc}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--doc", type=Path, default=ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--headline", action="store_true", help="print the README's table only")
    args = ap.parse_args()
    if args.headline:
        data = load(args.results)
        head, rows = headline(data)
        print("\n".join(table(head, rows)))
        edges = edge_rows(data, ranges=False)
        if edges:
            print("\nRemoting vs the REST edge (`benchmarks/server_bench.py`), medians:\n")
            print("\n".join(table(EDGE_HEAD, edges)))
            print("\n" + edge_note(data))
        return 0
    write(args.results, args.doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
