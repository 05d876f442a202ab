"""Latency fault avoidance: which brokers a producer skips, and for how long.

RocketMQ's ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl``, as pure
classes: no IO, no threads, no sleeps. Time comes from an injectable clock
that returns milliseconds, so every rule here is unit-tested with a fake one.

After every send the producer reports the broker's latency. Two tables map a
latency to a penalty, scanning from the top down for the first
``latency_max_ms[i] <= latency`` (RocketMQ's ``computeNotAvailableDuration``)::

    latency_max_ms             50   100   550     1000    2000    3000    15000
    not_available_duration_ms   0     0   30000   60000   120000  180000  600000

A send that raised is recorded as ``isolation``: its latency counts as
``isolation_latency_ms`` (30000 -> 600000 ms benched) and the broker is marked
unreachable.

Fixed here, unlike RocketMQ:

- selection returns the route's own frozen ``MessageQueue`` objects and never
  rewrites one (RocketMQ set broker name and queue id on a shared object,
  apache/rocketmq#7779);
- a retry avoids the broker that just failed (RocketMQ 4's inverted
  ``lastBrokerName`` test preferred it, apache/rocketmq#2046);
- an unreachable broker is probed and re-admitted as soon as a probe
  succeeds, instead of sitting out its ten minutes; and a probe that never
  reports back cannot leave the broker stuck (apache/rocketmq#11146);
- ``split_send_timeout`` keeps one slow attempt from eating the whole send
  budget (apache/rocketmq#7295).

States of one broker (a ``FaultItem``; a broker without one is AVAILABLE)::

    AVAILABLE  clock >= start_timestamp_ms                 selected as usual
    BENCHED    clock <  start_timestamp_ms, reachable      it was slow; not probed
    WAITING    clock <  start_timestamp_ms, unreachable    no probe in flight
    PROBING    clock <  start_timestamp_ms, unreachable    a probe in flight

    any      --update_fault_item(duration 0)-------------------> AVAILABLE
    any      --update_fault_item(duration > 0, reachable)------> BENCHED
    any      --update_fault_item(duration > 0, unreachable)----> WAITING, probe at now + interval
    BENCHED / WAITING / PROBING --clock >= start_timestamp_ms--> AVAILABLE
    WAITING  --brokers_to_probe(), clock >= next_probe_ms------> PROBING, deadline now + timeout
    PROBING  --brokers_to_probe(), clock >= probe_deadline_ms--> PROBING, handed out again
    PROBING  --probe_result(ok=True)---------------------------> AVAILABLE, reachable
    PROBING  --probe_result(ok=False)--------------------------> WAITING, probe at now + interval

- A probe that never reports back is handed out again once its deadline
  passes, so no broker can stay stuck in PROBING (apache/rocketmq#11146).
- ``update_fault_item`` (a send finished) replaces the broker's state and
  cancels a probe in flight: that probe's result, which predates the send,
  is then ignored. A result counts only while a probe is in flight, late
  ones (after the deadline) included.
- Only unreachable brokers are probed: a health check that answers says the
  broker is reachable, not that it is fast, so a broker benched for being
  slow serves its penalty.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from connector.client.publish_info import TopicPublishInfo
from connector.errors import ConfigError
from connector.protocol.message import MessageQueue

__all__ = [
    "DEFAULT_LATENCY_MAX_MS",
    "DEFAULT_NOT_AVAILABLE_DURATION_MS",
    "DEFAULT_PROBE_INTERVAL_MS",
    "DEFAULT_PROBE_TIMEOUT_MS",
    "ISOLATION_LATENCY_MS",
    "MIN_ATTEMPT_TIMEOUT_MS",
    "Clock",
    "FaultItem",
    "LatencyFaultTolerance",
    "MQFaultStrategy",
    "monotonic_ms",
    "split_send_timeout",
]

log = logging.getLogger(__name__)

DEFAULT_LATENCY_MAX_MS: tuple[int, ...] = (50, 100, 550, 1000, 2000, 3000, 15000)
DEFAULT_NOT_AVAILABLE_DURATION_MS: tuple[int, ...] = (0, 0, 30000, 60000, 120000, 180000, 600000)
ISOLATION_LATENCY_MS = 30000
DEFAULT_PROBE_INTERVAL_MS = 1000
DEFAULT_PROBE_TIMEOUT_MS = 3000
MIN_ATTEMPT_TIMEOUT_MS = 200

Clock = Callable[[], float]
"""Returns the current time in milliseconds (any fixed origin; only differences matter)."""


def monotonic_ms() -> float:
    """The default clock: ``time.monotonic()`` in milliseconds."""
    return time.monotonic() * 1000.0


@dataclass(frozen=True, slots=True)
class FaultItem:
    """What is known about one broker. Immutable: an update stores a new item.

    ``start_timestamp_ms`` is when the broker becomes available again;
    ``probe_deadline_ms`` is set while a probe is in flight.
    """

    name: str
    current_latency_ms: float
    start_timestamp_ms: float
    reachable: bool = True
    next_probe_ms: float = 0.0
    probe_deadline_ms: float | None = None

    def is_available(self, now_ms: float) -> bool:
        return now_ms >= self.start_timestamp_ms

    def probe_due(self, now_ms: float) -> bool:
        """An isolated broker whose next probe is due, or whose probe timed out."""
        if self.reachable or self.is_available(now_ms):
            return False
        if self.probe_deadline_ms is None:
            return now_ms >= self.next_probe_ms
        return now_ms >= self.probe_deadline_ms

    def rank(self, now_ms: float) -> tuple[bool, bool, float, float, str]:
        """Sort key for ``pick_one_at_least``: smaller is better."""
        return (
            not self.is_available(now_ms),
            not self.reachable,
            self.current_latency_ms,
            self.start_timestamp_ms,
            self.name,
        )


def _check_positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(f"{name} must be positive, got {value!r}")


class LatencyFaultTolerance:
    """Per-broker fault items: availability, reachability and probes. Thread-safe.

    ``probe_interval_ms`` (default 1000) is the wait before the first probe of
    a newly isolated broker and between failed probes; ``probe_timeout_ms``
    (default 3000) is how long a probe handed out by ``brokers_to_probe`` may
    stay unanswered before the broker is due again.
    """

    def __init__(
        self,
        *,
        clock: Clock = monotonic_ms,
        probe_interval_ms: float = DEFAULT_PROBE_INTERVAL_MS,
        probe_timeout_ms: float = DEFAULT_PROBE_TIMEOUT_MS,
    ) -> None:
        _check_positive("probe_interval_ms", probe_interval_ms)
        _check_positive("probe_timeout_ms", probe_timeout_ms)
        self._clock = clock
        self.probe_interval_ms = probe_interval_ms
        self.probe_timeout_ms = probe_timeout_ms
        self._items: dict[str, FaultItem] = {}
        self._which_item_worst = 0
        self._lock = threading.Lock()

    def update_fault_item(
        self,
        name: str,
        current_latency_ms: float,
        not_available_duration_ms: float,
        *,
        reachable: bool = True,
    ) -> None:
        """Record a finished send: the broker is benched for ``not_available_duration_ms``.

        Replaces the broker's state and cancels any probe in flight.
        """
        if not_available_duration_ms < 0:
            raise ValueError("not_available_duration_ms must not be negative")
        now = self._clock()
        item = FaultItem(
            name=name,
            current_latency_ms=current_latency_ms,
            start_timestamp_ms=now + not_available_duration_ms,
            reachable=reachable,
            next_probe_ms=now + self.probe_interval_ms,
        )
        with self._lock:
            self._items[name] = item

    def is_available(self, name: str) -> bool:
        """False while the broker is benched; True for a broker never recorded."""
        with self._lock:
            item = self._items.get(name)
        return item is None or item.is_available(self._clock())

    def is_reachable(self, name: str) -> bool:
        """False after a failed send or probe, until a send or probe succeeds."""
        with self._lock:
            item = self._items.get(name)
        return item is None or item.reachable

    def unavailable(self) -> frozenset[str]:
        """The names of every broker benched now (one lock for a whole selection)."""
        now = self._clock()
        with self._lock:
            return frozenset(n for n, item in self._items.items() if not item.is_available(now))

    def remove(self, name: str) -> None:
        """Forget a broker (e.g. it left the cluster)."""
        with self._lock:
            self._items.pop(name, None)

    def get(self, name: str) -> FaultItem | None:
        """The broker's fault item (immutable), or None."""
        with self._lock:
            return self._items.get(name)

    def items(self) -> dict[str, FaultItem]:
        """A snapshot of every fault item by broker name."""
        with self._lock:
            return dict(self._items)

    def pick_one_at_least(self, among: Collection[str] | None = None) -> str | None:
        """The least bad broker, when every one a caller could use is benched.

        Items (restricted to the names in ``among`` if given) are sorted by
        ``FaultItem.rank``: available first, then reachable, then smaller
        latency, then earlier ``start_timestamp_ms``, then name. With one item
        that item wins; otherwise successive calls take turns over the better
        half (RocketMQ's ``whichItemWorst`` counter), so one broker does not get
        all of the load. RocketMQ shuffles before sorting; here the order is a
        total one, so the answer depends only on the items and the number of
        earlier calls. None when there is no item.
        """
        now = self._clock()
        with self._lock:
            ranked = sorted(
                (item for n, item in self._items.items() if among is None or n in among),
                key=lambda item: item.rank(now),
            )
            if not ranked:
                return None
            half = len(ranked) // 2
            if half <= 1:
                return ranked[0].name
            index = self._which_item_worst % half
            self._which_item_worst += 1
            return ranked[index].name

    def brokers_to_probe(self) -> list[str]:
        """Isolated brokers due for a probe, sorted by name; each is marked in flight.

        A broker is due when it is benched and unreachable, and either its next
        probe time has come or the probe in flight passed its deadline. The
        caller probes each and reports with ``probe_result``.
        """
        now = self._clock()
        due: list[str] = []
        with self._lock:
            for name, item in self._items.items():
                if item.probe_due(now):
                    self._items[name] = dataclasses.replace(
                        item, probe_deadline_ms=now + self.probe_timeout_ms
                    )
                    due.append(name)
        return sorted(due)

    def probe_result(self, name: str, ok: bool, latency_ms: float) -> bool:
        """Apply a probe's outcome; returns False when no probe of ``name`` is in flight.

        ``ok``: available and reachable at once, latency recorded. Not ok: stays
        benched and unreachable; the next probe is due after ``probe_interval_ms``.
        """
        now = self._clock()
        with self._lock:
            item = self._items.get(name)
            if item is None or item.probe_deadline_ms is None:
                log.debug("probe result for %s ignored: no probe in flight", name)
                return False
            if ok:
                self._items[name] = FaultItem(
                    name=name,
                    current_latency_ms=latency_ms,
                    start_timestamp_ms=min(now, item.start_timestamp_ms),
                    reachable=True,
                    next_probe_ms=now + self.probe_interval_ms,
                )
            else:
                self._items[name] = dataclasses.replace(
                    item,
                    reachable=False,
                    next_probe_ms=now + self.probe_interval_ms,
                    probe_deadline_ms=None,
                )
        if ok:
            log.info("broker %s answered a probe in %.0f ms: re-admitted", name, latency_ms)
        return True


def split_send_timeout(
    remaining_ms: float, attempts_left: int, *, min_attempt_ms: float = MIN_ATTEMPT_TIMEOUT_MS
) -> float:
    """The timeout of the next attempt, from what is left of the send budget.

    An attempt gets an equal share, ``remaining_ms / attempts_left``, so a
    broker that hangs cannot eat the time the retries on other brokers need
    (apache/rocketmq#7295); what a fast failure leaves unused flows to the
    later attempts. The share is at least ``min_attempt_ms`` (200 ms), since a
    shorter timeout would fail even healthy sends, and never more than
    ``remaining_ms``; the last attempt gets all that remains. Never negative.
    """
    if attempts_left < 1:
        raise ValueError("attempts_left must be at least 1")
    if remaining_ms <= 0:
        return 0.0
    if attempts_left == 1:
        return float(remaining_ms)
    share = remaining_ms / attempts_left
    return float(min(remaining_ms, max(share, min_attempt_ms)))


class MQFaultStrategy:
    """Queue selection with latency fault avoidance (RocketMQ's ``MQFaultStrategy``).

    Keyword-only settings, all validated here (``ConfigError``):

    - ``clock``: milliseconds, default ``monotonic_ms``;
    - ``latency_max_ms`` / ``not_available_duration_ms``: the two tables, same
      length, latencies strictly increasing, nothing negative;
    - ``send_latency_fault_enable`` (False): off, ``update_fault_item`` records
      nothing and selection is plain round-robin that skips the last broker;
    - ``isolation_latency_ms`` (30000): the latency a failed send counts as;
    - ``probe_interval_ms`` / ``probe_timeout_ms``: see ``LatencyFaultTolerance``.
    """

    def __init__(
        self,
        *,
        clock: Clock = monotonic_ms,
        latency_max_ms: Sequence[int] = DEFAULT_LATENCY_MAX_MS,
        not_available_duration_ms: Sequence[int] = DEFAULT_NOT_AVAILABLE_DURATION_MS,
        send_latency_fault_enable: bool = False,
        isolation_latency_ms: int = ISOLATION_LATENCY_MS,
        probe_interval_ms: float = DEFAULT_PROBE_INTERVAL_MS,
        probe_timeout_ms: float = DEFAULT_PROBE_TIMEOUT_MS,
    ) -> None:
        latency_max = tuple(latency_max_ms)
        durations = tuple(not_available_duration_ms)
        if not latency_max or len(latency_max) != len(durations):
            raise ConfigError(
                "latency_max_ms and not_available_duration_ms must be non-empty and of the"
                f" same length, got {len(latency_max)} and {len(durations)}"
            )
        if any(v < 0 for v in latency_max + durations) or isolation_latency_ms < 0:
            raise ConfigError("latencies and durations must not be negative")
        if any(a >= b for a, b in itertools.pairwise(latency_max)):
            raise ConfigError(f"latency_max_ms must be strictly increasing, got {latency_max}")
        self._latency_max_ms = latency_max
        self._not_available_duration_ms = durations
        self._isolation_latency_ms = isolation_latency_ms
        self.send_latency_fault_enable = send_latency_fault_enable
        self._tolerance = LatencyFaultTolerance(
            clock=clock, probe_interval_ms=probe_interval_ms, probe_timeout_ms=probe_timeout_ms
        )

    @property
    def latency_max_ms(self) -> tuple[int, ...]:
        return self._latency_max_ms

    @property
    def not_available_duration_ms(self) -> tuple[int, ...]:
        return self._not_available_duration_ms

    @property
    def isolation_latency_ms(self) -> int:
        return self._isolation_latency_ms

    @property
    def latency_fault_tolerance(self) -> LatencyFaultTolerance:
        return self._tolerance

    def compute_not_available_duration(self, latency_ms: float) -> int:
        """Milliseconds to bench a broker after a send that took ``latency_ms``."""
        for i in range(len(self._latency_max_ms) - 1, -1, -1):
            if latency_ms >= self._latency_max_ms[i]:
                return self._not_available_duration_ms[i]
        return 0

    def update_fault_item(self, broker_name: str, latency_ms: float, *, isolation: bool) -> None:
        """Record a finished send (``isolation``: it raised). No-op when avoidance is off."""
        if not self.send_latency_fault_enable:
            return
        duration = self.compute_not_available_duration(
            self._isolation_latency_ms if isolation else latency_ms
        )
        self._tolerance.update_fault_item(
            broker_name, latency_ms, duration, reachable=not isolation
        )

    def is_available(self, broker_name: str) -> bool:
        return self._tolerance.is_available(broker_name)

    def brokers_to_probe(self) -> list[str]:
        """See ``LatencyFaultTolerance.brokers_to_probe``."""
        return self._tolerance.brokers_to_probe()

    def probe_result(self, broker_name: str, ok: bool, latency_ms: float) -> bool:
        """See ``LatencyFaultTolerance.probe_result``."""
        return self._tolerance.probe_result(broker_name, ok, latency_ms)

    def select_one_message_queue(
        self, info: TopicPublishInfo, last_broker_name: str | None
    ) -> MessageQueue:
        """The queue for the next attempt; ``last_broker_name`` is the broker that just failed.

        With avoidance on, round-robin from ``info``'s counter and take, in
        order of preference: a queue of an available broker other than the
        last one; a queue of an available broker; a queue of the least bad
        benched broker of this topic (``pick_one_at_least``, the last broker
        only if it is the topic's only one); plain round-robin. Raises
        ``TopicNotExistError`` when ``info`` has no queue.
        """
        if not self.send_latency_fault_enable:
            return info.select_one_message_queue(last_broker_name)
        queues = info.message_queues
        if not queues:
            return info.select_one_message_queue(last_broker_name)  # raises
        benched = self._tolerance.unavailable()
        start = info.send_which_queue.get_and_increment()
        fallback: MessageQueue | None = None
        for i in range(len(queues)):
            mq = queues[(start + i) % len(queues)]
            if mq.broker_name in benched:
                continue
            if mq.broker_name != last_broker_name:
                return mq
            if fallback is None:
                fallback = mq
        if fallback is not None:
            return fallback
        candidates = [b for b in info.broker_names if b != last_broker_name] or list(
            info.broker_names
        )
        least_bad = self._tolerance.pick_one_at_least(candidates)
        if least_bad is not None:
            own = info.queues_of(least_bad)
            if own:
                return own[start % len(own)]  # one counter step per selection: even load
        return info.select_one_message_queue(last_broker_name)
