"""Prometheus metrics of one broker (``GET /metrics``).

Request counters and latency histograms are updated by the HTTP edge in
plain Python numbers; they and the store figures (sizes, offsets, flush
time) become metric families when scraped, so a request pays no lock.
prometheus_client does the text format.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from broker.store.store import MessageStore

__all__ = ["BrokerMetrics"]

_LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
# the bounds as the text format writes ``le`` ("0.0002", ..., "5.0", "+Inf")
_LE: tuple[str, ...] = tuple(
    floatToGoString(b)  # type: ignore[no-untyped-call]
    for b in (*_LATENCY_BUCKETS, math.inf)
)


class _StoreCollector(Collector):
    def __init__(self, store: MessageStore) -> None:
        self.store = store

    def collect(self) -> Iterator[Metric]:
        store = self.store
        log = store.commit_log
        yield GaugeMetricFamily(
            "pymq_store_commitlog_min_offset_bytes", "first CommitLog byte still stored",
            value=log.min_offset(),
        )  # fmt: skip
        yield GaugeMetricFamily(
            "pymq_store_commitlog_max_offset_bytes", "CommitLog bytes ever written",
            value=log.max_offset(),
        )  # fmt: skip
        yield GaugeMetricFamily(
            "pymq_store_commitlog_flushed_offset_bytes", "CommitLog bytes known durable",
            value=log.flushed_offset(),
        )  # fmt: skip
        yield GaugeMetricFamily(
            "pymq_store_last_flush_seconds", "duration of the last CommitLog flush",
            value=store.last_flush_seconds,
        )  # fmt: skip
        yield CounterMetricFamily(
            "pymq_store_append_groups", "group appends of concurrent single messages (one or more)",
            value=store.groups_appended,
        )  # fmt: skip
        yield CounterMetricFamily(
            "pymq_store_grouped_messages", "single messages appended by those group appends",
            value=store.messages_grouped,
        )  # fmt: skip
        commits = store.group_commit_stats()
        if commits is not None:
            yield CounterMetricFamily(
                "pymq_store_group_commits", "SYNC_FLUSH fsyncs (each covers a group of appends)",
                value=commits[0],
            )  # fmt: skip
            yield CounterMetricFamily(
                "pymq_store_group_commit_requests", "append requests those fsyncs covered",
                value=commits[1],
            )  # fmt: skip
        queues = GaugeMetricFamily(
            "pymq_queue_max_offset", "messages ever stored in a queue", labels=["topic", "queue"]
        )
        for topic, offsets in store.queue_offsets().items():
            for qid, max_offset in offsets.items():
                queues.add_metric([topic, qid], max_offset)
        yield queues


class _HACollector(Collector):
    """Replication state (``BrokerController.ha_status``) as gauges."""

    def __init__(self, status: Callable[[], dict[str, Any]]) -> None:
        self.status = status

    def collect(self) -> Iterator[Metric]:
        st = self.status()
        yield GaugeMetricFamily("pymq_ha_epoch", "the newest epoch of this log", value=st["epoch"])
        yield GaugeMetricFamily(
            "pymq_ha_confirm_offset_bytes",
            "CommitLog offset every in-sync replica has (a slave serves reads up to it)",
            value=st.get("confirm_offset", 0),
        )
        slaves = st.get("slaves")
        if slaves is not None:  # a master
            lag = GaugeMetricFamily(
                "pymq_ha_slave_lag_bytes", "CommitLog bytes a slave has not acknowledged",
                labels=["broker_id"],
            )  # fmt: skip
            in_sync = GaugeMetricFamily(
                "pymq_ha_slave_in_sync", "1 while a slave is in the in-sync set",
                labels=["broker_id"],
            )  # fmt: skip
            for slave in slaves:
                lag.add_metric([str(slave["broker_id"])], slave["lag_bytes"])
                in_sync.add_metric([str(slave["broker_id"])], 1 if slave["in_sync"] else 0)
            yield lag
            yield in_sync
            yield GaugeMetricFamily(
                "pymq_ha_slaves_in_sync", "slaves in the in-sync set",
                value=sum(1 for slave in slaves if slave["in_sync"]),
            )  # fmt: skip
            yield CounterMetricFamily(
                "pymq_ha_handshakes_refused", "HA handshakes refused (wrong broker, forged)",
                value=st.get("handshakes_refused", 0),
            )  # fmt: skip
        if "master_connected" in st:  # a slave
            yield GaugeMetricFamily(
                "pymq_ha_master_connected", "1 while this slave replicates from its master",
                value=1 if st["master_connected"] else 0,
            )  # fmt: skip
            yield GaugeMetricFamily(
                "pymq_ha_lag_bytes", "CommitLog bytes the master has and this slave not yet",
                value=st["lag_bytes"],
            )  # fmt: skip


class _Histogram:
    """Counts per latency bucket and their sum: a plain list, exported at scrape time."""

    __slots__ = ("counts", "sum")

    def __init__(self) -> None:
        self.counts = [0] * (len(_LATENCY_BUCKETS) + 1)  # the last one: above every bound
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(_LATENCY_BUCKETS, seconds)] += 1
        self.sum += seconds

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative counts by upper bound (``le``)."""
        out: list[tuple[str, float]] = []
        total = 0
        for le, count in zip(_LE, self.counts, strict=True):
            total += count
            out.append((le, total))
        return out


class _RequestCollector(Collector):
    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        requests = CounterMetricFamily(
            "pymq_send_requests",
            "send requests by API and outcome (SEND_OK, FLUSH_DISK_TIMEOUT or an error code)",
            labels=["api", "outcome"],
        )
        for (api, outcome), count in sorted(m.send_requests.items()):
            requests.add_metric([api, outcome], count)
        yield requests
        yield CounterMetricFamily("pymq_send_messages", "messages stored", value=m.send_messages)
        latency = HistogramMetricFamily(
            "pymq_send_latency_seconds", "send request latency (incl. flush wait)", labels=["api"]
        )
        for api, hist in sorted(m.send_latency.items()):
            latency.add_metric([api], hist.buckets(), hist.sum)
        yield latency
        pulls = CounterMetricFamily(
            "pymq_pull_requests", "pull requests by status", labels=["status"]
        )
        for status, count in sorted(m.pull_requests.items()):
            pulls.add_metric([status], count)
        yield pulls
        yield CounterMetricFamily(
            "pymq_pull_messages", "messages returned by pulls", value=m.pull_messages
        )
        pull_latency = HistogramMetricFamily(
            "pymq_pull_latency_seconds", "pull latency (excl. long-poll wait)"
        )
        pull_latency.add_metric([], m.pull_latency.buckets(), m.pull_latency.sum)
        yield pull_latency


class BrokerMetrics:
    """Request counts and latencies, kept in plain ints and lists.

    Every update runs on the broker's event loop (the hot path and the async
    FastAPI routes), and so does a scrape: no locks. prometheus_client's own
    Counter and Histogram take a lock per update, ~3 us of a single send.
    """

    def __init__(self, store: MessageStore) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.send_requests: dict[tuple[str, str], int] = {}
        self.send_messages = 0
        self.send_latency: dict[str, _Histogram] = {}
        self.pull_requests: dict[str, int] = {}
        self.pull_messages = 0
        self.pull_latency = _Histogram()
        self.registry.register(_RequestCollector(self))
        self.registry.register(_StoreCollector(store))

    def watch_ha(self, status: Callable[[], dict[str, Any]]) -> None:
        """Export replication state (lag, in-sync set, epoch) from ``status``."""
        self.registry.register(_HACollector(status))

    def sent(self, api: str, outcome: str, messages: int, seconds: float) -> None:
        """A send request answered: ``outcome`` SEND_OK or FLUSH_DISK_TIMEOUT."""
        key = (api, outcome)
        self.send_requests[key] = self.send_requests.get(key, 0) + 1
        self.send_messages += messages
        hist = self.send_latency.get(api)
        if hist is None:
            hist = self.send_latency[api] = _Histogram()
        hist.observe(seconds)

    def send_failed(self, api: str, code: str) -> None:
        key = (api, code)
        self.send_requests[key] = self.send_requests.get(key, 0) + 1

    def pulled(self, status: str) -> None:
        self.pull_requests[status] = self.pull_requests.get(status, 0) + 1

    def pulled_messages(self, count: int) -> None:
        self.pull_messages += count

    def pull_answered(self, seconds: float) -> None:
        self.pull_latency.observe(seconds)
