"""A topic's writable queues, as a producer sees them (RocketMQ's ``TopicPublishInfo``).

Built from the NameServer's route answer (``TopicRouteData``) and then never
changed, apart from the round-robin counter: the queue list is a tuple of
frozen ``MessageQueue`` objects, and the route given is kept but never
mutated (RocketMQ rewrote shared route objects, apache/rocketmq#7779; its
default-topic path also rewrote the TBW102 route's queue counts in place).

The publish list (RocketMQ's ``topicRouteData2TopicPublishInfo``):

- an ordered topic (``order_topic_conf`` such as ``"broker-a:4;broker-b:4"``)
  gets exactly the queues the conf names, whatever the brokers' state, so a
  sharding key keeps mapping to the same queue;
- any other topic gets, for each ``QueueData`` sorted by broker name whose
  ``perm`` has the write bit and whose broker has a master (``addrs["0"]``),
  queue ids ``0 .. write_queue_nums - 1``.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Mapping
from types import MappingProxyType

from connector.errors import ConfigError, TopicNotExistError
from connector.protocol.message import MessageQueue
from connector.protocol.route import PERM_WRITE, QueueData, TopicRouteData

__all__ = ["QueueIndex", "TopicPublishInfo"]

log = logging.getLogger(__name__)

_INDEX_RANGE = 1 << 31


class QueueIndex:
    """A thread-safe counter for round-robin (RocketMQ's ``ThreadLocalIndex``, shared).

    Starts at a random value in ``[0, 2**31)`` unless ``start`` is given, so
    that many producers do not all begin on the first queue. Python ints do
    not overflow, so unlike Java's there is no wrap-around to handle.
    """

    __slots__ = ("_lock", "_value")

    def __init__(self, start: int | None = None) -> None:
        self._value = random.randrange(_INDEX_RANGE) if start is None else start
        self._lock = threading.Lock()

    def get_and_increment(self) -> int:
        """The current value; the next call gets one more."""
        with self._lock:
            value = self._value
            self._value = value + 1
        return value

    def __repr__(self) -> str:
        return f"QueueIndex({self._value})"


class TopicPublishInfo:
    """The queues a producer may send a topic's messages to, with round-robin selection.

    Attributes: ``topic``; ``message_queues`` (a tuple of frozen queues);
    ``order_topic``; ``route`` (the ``TopicRouteData`` it was built from, never
    mutated); ``send_which_queue`` (the round-robin ``QueueIndex``);
    ``broker_names`` (sorted, those with a queue here); ``broker_addrs`` (a
    read-only mapping of broker name to master address). Thread-safe.
    """

    __slots__ = (
        "_broker_addrs",
        "_broker_addrs_view",
        "_by_broker",
        "broker_names",
        "message_queues",
        "order_topic",
        "route",
        "send_which_queue",
        "topic",
    )

    def __init__(
        self,
        *,
        topic: str,
        message_queues: tuple[MessageQueue, ...],
        broker_addrs: Mapping[str, str],
        order_topic: bool,
        route: TopicRouteData,
        start_index: int | None = None,
    ) -> None:
        self.topic = topic
        self.message_queues = tuple(message_queues)
        self._broker_addrs: dict[str, str] = dict(broker_addrs)
        self._broker_addrs_view = MappingProxyType(self._broker_addrs)
        self.order_topic = order_topic
        self.route = route
        self.send_which_queue = QueueIndex(start_index)
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.message_queues:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        self._by_broker = {name: tuple(qs) for name, qs in by_broker.items()}
        self.broker_names: tuple[str, ...] = tuple(sorted(self._by_broker))

    # -- construction ---------------------------------------------------------------------

    @classmethod
    def from_route(
        cls, route: TopicRouteData, *, start_index: int | None = None
    ) -> TopicPublishInfo:
        """The publish list of ``route`` (see the module docstring); ``route`` is not changed.

        ``start_index`` fixes the round-robin start (tests); default random.
        """
        masters: dict[str, str] = {}
        for broker in route.brokers:
            addr = broker.master_addr()
            if addr and broker.broker_name not in masters:
                masters[broker.broker_name] = addr
        queues: list[MessageQueue] = []
        if route.order_topic_conf:
            for name, nums in _parse_order_conf(route.order_topic_conf):
                queues.extend(MessageQueue(route.topic, name, i) for i in range(nums))
            order_topic = True
        else:
            seen: set[str] = set()
            for qd in sorted(route.queues, key=lambda q: q.broker_name):
                if qd.broker_name in seen:
                    continue
                seen.add(qd.broker_name)
                if not qd.perm & PERM_WRITE or qd.broker_name not in masters:
                    continue
                queues.extend(
                    MessageQueue(route.topic, qd.broker_name, i) for i in range(qd.write_queue_nums)
                )
            order_topic = False
        return cls(
            topic=route.topic,
            message_queues=tuple(queues),
            broker_addrs=masters,
            order_topic=order_topic,
            route=route,
            start_index=start_index,
        )

    @classmethod
    def from_route_for_default_topic(
        cls,
        route: TopicRouteData,
        topic: str,
        default_topic_queue_nums: int = 4,
        *,
        start_index: int | None = None,
    ) -> TopicPublishInfo:
        """Queues for a topic the brokers will auto-create, from the TBW102 route.

        Each broker of ``route`` gets ``min(default_topic_queue_nums,
        read_queue_nums)`` read and write queues, named with ``topic``. The
        result's ``route`` is a new ``TopicRouteData`` for ``topic``; the TBW102
        route given is not changed (RocketMQ rewrote its queue counts in place).
        """
        if default_topic_queue_nums < 1:
            raise ConfigError("default_topic_queue_nums must be at least 1")
        derived = TopicRouteData(
            topic=topic,
            queues=[_clamp(qd, default_topic_queue_nums) for qd in route.queues],
            brokers=[b.model_copy(deep=True) for b in route.brokers],
        )
        return cls.from_route(derived, start_index=start_index)

    # -- queries --------------------------------------------------------------------------

    def ok(self) -> bool:
        """True when there is at least one queue to send to."""
        return bool(self.message_queues)

    @property
    def broker_addrs(self) -> Mapping[str, str]:
        """Master address per broker name (a read-only view)."""
        return self._broker_addrs_view

    def find_broker_addr(self, broker_name: str) -> str | None:
        """The master address of ``broker_name``, or None."""
        return self._broker_addrs.get(broker_name)

    def queues_of(self, broker_name: str) -> tuple[MessageQueue, ...]:
        """This topic's queues on one broker (empty if it has none)."""
        return self._by_broker.get(broker_name, ())

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round-robin; given ``last_broker_name``, skip its queues if another broker has some.

        Raises ``TopicNotExistError`` ("no route info") when there is no queue.
        """
        queues = self.message_queues
        if not queues:
            raise TopicNotExistError(f"No route info of this topic: {self.topic}")
        index = self.send_which_queue.get_and_increment()
        if last_broker_name is not None:
            for i in range(len(queues)):
                mq = queues[(index + i) % len(queues)]
                if mq.broker_name != last_broker_name:
                    return mq
        return queues[index % len(queues)]

    def __repr__(self) -> str:
        return (
            f"TopicPublishInfo(topic={self.topic!r}, queues={len(self.message_queues)},"
            f" brokers={list(self.broker_names)}, order_topic={self.order_topic})"
        )


def _clamp(qd: QueueData, nums: int) -> QueueData:
    n = min(nums, qd.read_queue_nums)
    return qd.model_copy(update={"read_queue_nums": n, "write_queue_nums": n})


def _parse_order_conf(conf: str) -> list[tuple[str, int]]:
    """``"broker-a:4;broker-b:4"`` -> ``[("broker-a", 4), ("broker-b", 4)]``; bad parts skipped."""
    out: list[tuple[str, int]] = []
    for part in conf.split(";"):
        name, sep, nums = part.strip().rpartition(":")
        if sep and name and nums.isdigit() and int(nums) > 0:
            out.append((name, int(nums)))
        elif part.strip():
            log.warning("ignoring %r in order_topic_conf %r", part, conf)
    return out
