"""Prometheus metrics of one broker (``GET /metrics``).

Request counters and latency histograms are updated by the HTTP edge; store
figures (sizes, offsets, flush time) are read when scraped, so they cost
nothing on the write path. prometheus_client does the text format.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from broker.store.store import MessageStore

__all__ = ["BrokerMetrics"]

_LATENCY_BUCKETS = (0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)


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


class BrokerMetrics:
    def __init__(self, store: MessageStore) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # _created series are noise
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.send_requests = Counter(
            "pymq_send_requests",
            "send requests by API and outcome (SEND_OK, FLUSH_DISK_TIMEOUT or an error code)",
            ["api", "outcome"],
            registry=r,
        )
        self.send_messages = Counter("pymq_send_messages", "messages stored", registry=r)
        self.send_latency = Histogram(
            "pymq_send_latency_seconds", "send request latency (incl. flush wait)", ["api"],
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.pull_requests = Counter(
            "pymq_pull_requests", "pull requests by status", ["status"], registry=r
        )
        self.pull_messages = Counter("pymq_pull_messages", "messages returned by pulls", registry=r)
        self.pull_latency = Histogram(
            "pymq_pull_latency_seconds", "pull latency (excl. long-poll wait)",
            buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        r.register(_StoreCollector(store))
        # labelled children, looked up once: prometheus_client's labels() takes a lock
        # and builds a key on every call, a real share of a single send's cost
        self._requests: dict[tuple[str, str], Counter] = {}
        self._latency: dict[str, Histogram] = {}
        self._pulls: dict[str, Counter] = {}

    def sent(self, api: str, outcome: str, messages: int, seconds: float) -> None:
        """A send request answered: ``outcome`` SEND_OK or FLUSH_DISK_TIMEOUT."""
        self._request(api, outcome).inc()
        self.send_messages.inc(messages)
        latency = self._latency.get(api)
        if latency is None:
            latency = self._latency[api] = self.send_latency.labels(api)
        latency.observe(seconds)

    def send_failed(self, api: str, code: str) -> None:
        self._request(api, code).inc()

    def _request(self, api: str, outcome: str) -> Counter:
        child = self._requests.get((api, outcome))
        if child is None:
            child = self._requests[api, outcome] = self.send_requests.labels(api, outcome)
        return child

    def pulled(self, status: str) -> None:
        child = self._pulls.get(status)
        if child is None:
            child = self._pulls[status] = self.pull_requests.labels(status)
        child.inc()
