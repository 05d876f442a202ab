"""The route tables of a NameServer (RocketMQ's ``RouteInfoManager``), pure state.

Four tables under one read/write lock:

- ``topic_queue``: topic -> broker name -> queue config (RocketMQ's QueueData)
- ``broker_addr``: broker name -> cluster + {broker id -> addr} (BrokerData; id 0 = master)
- ``cluster_addr``: cluster -> broker names
- ``broker_live``: addr -> last heartbeat (ms) + data version + identity

No IO and no asyncio here: the HTTP edge calls these methods, and time comes
from an injectable clock (ms), so expiry is unit-tested without waiting.
Every answer is built fresh from copies taken under the read lock; callers
may mutate what they get without touching the tables.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from connector.errors import TopicNotExistError
from connector.protocol.route import (
    MASTER_ID,
    BrokerData,
    ClusterInfo,
    DataVersion,
    LiveBroker,
    QueueData,
    RegisterBrokerRequest,
    RegisterBrokerResult,
    TopicList,
    TopicQueueConfig,
    TopicRouteData,
    UnregisterBrokerRequest,
)
from nameserver.rwlock import RWLock

__all__ = ["DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS", "ORDER_TOPIC_CONFIG", "RouteInfoManager"]

log = logging.getLogger(__name__)

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS = 120_000
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # the KV namespace of ordered-topic configs

KvLookup = Callable[[str, str], str | None]


def _wall_clock_ms() -> float:
    return time.time() * 1000


@dataclass(frozen=True, slots=True)
class _Queue:
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


@dataclass(slots=True)
class _Group:
    cluster: str
    addrs: dict[int, str]


@dataclass(frozen=True, slots=True)
class _Live:
    cluster: str
    broker_name: str
    broker_id: int
    last_update_ms: int
    version: tuple[int, int]
    http_addr: str | None = None
    ha_addr: str | None = None


class RouteInfoManager:
    """Route registry state. Thread-safe; readers never see a half-applied update.

    ``broker_channel_expired_time_ms`` (default 120 000) is how long a broker
    may stay silent before ``scan_not_active_broker`` removes it; ``clock``
    returns the current time in ms (default: wall clock).
    """

    def __init__(
        self,
        *,
        broker_channel_expired_time_ms: int = DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
        clock: Callable[[], float] = _wall_clock_ms,
    ) -> None:
        self._expired_ms = broker_channel_expired_time_ms
        self._clock = clock
        self._lock = RWLock()
        self._topic_queue: dict[str, dict[str, _Queue]] = {}
        self._broker_addr: dict[str, _Group] = {}
        self._cluster_addr: dict[str, set[str]] = {}
        self._broker_live: dict[str, _Live] = {}

    # -- writes -------------------------------------------------------------------------------

    def register_broker(self, req: RegisterBrokerRequest) -> RegisterBrokerResult:
        """Record a broker's heartbeat (RocketMQ's registerBroker).

        Queue data changes only for a master (id 0) whose data version changed
        or that is new to its group; topics it no longer lists lose its queues.
        """
        now = int(self._clock())
        name, addr, broker_id = req.broker_name, req.broker_addr, req.broker_id
        version = (req.data_version.timestamp, req.data_version.counter)
        with self._lock.write():
            prev = self._broker_live.get(addr)
            if prev is not None and prev.broker_name != name:
                # the process at this address now serves another broker group
                self._remove_addr(prev.broker_name, addr)
                prev = None
            group = self._broker_addr.get(name)
            first = group is None
            if group is None:
                group = self._broker_addr[name] = _Group(req.cluster, {})
            elif group.cluster != req.cluster:
                self._forget_in_cluster(group.cluster, name)
                group.cluster = req.cluster
            self._cluster_addr.setdefault(req.cluster, set()).add(name)
            for other_id, other_addr in list(group.addrs.items()):
                if other_addr == addr and other_id != broker_id:  # e.g. a slave became master
                    del group.addrs[other_id]
            old_addr = group.addrs.get(broker_id)
            group.addrs[broker_id] = addr
            if old_addr is not None and old_addr != addr:
                self._broker_live.pop(old_addr, None)  # the old process of this slot is gone
            first = first or old_addr is None
            if broker_id == MASTER_ID and (first or prev is None or prev.version != version):
                self._update_queues(name, req.topics)
            self._broker_live[addr] = _Live(
                req.cluster, name, broker_id, now, version, req.http_addr, req.ha_addr
            )
            master_addr = group.addrs.get(MASTER_ID)
            master = self._broker_live.get(master_addr) if master_addr else None
            ha_server_addr = master.ha_addr if master is not None else None
        if first:
            log.info(
                "broker %s id %d of cluster %s registered at %s", name, broker_id, req.cluster, addr
            )
        return RegisterBrokerResult(master_addr=master_addr, ha_server_addr=ha_server_addr)

    def unregister_broker(self, req: UnregisterBrokerRequest) -> bool:
        """Forget a broker that shut down cleanly; False if it was not registered there."""
        with self._lock.write():
            live = self._broker_live.get(req.broker_addr)
            if live is not None and (live.broker_name, live.broker_id) == (
                req.broker_name,
                req.broker_id,
            ):
                del self._broker_live[req.broker_addr]
            group = self._broker_addr.get(req.broker_name)
            if group is None or group.addrs.get(req.broker_id) != req.broker_addr:
                return False
            del group.addrs[req.broker_id]
            if not group.addrs:
                self._drop_group(req.broker_name)
        log.info(
            "broker %s id %d at %s unregistered", req.broker_name, req.broker_id, req.broker_addr
        )
        return True

    def scan_not_active_broker(self) -> list[str]:
        """Remove brokers silent for longer than the expiry time; return their addresses.

        Cleans every table: the live entry, the address in its group, the group
        when no address is left (and then its cluster membership, the cluster
        when empty, its queues in every topic, topics left without queues).
        """
        deadline = int(self._clock()) - self._expired_ms
        with self._lock.read():
            if all(live.last_update_ms >= deadline for live in self._broker_live.values()):
                return []
        with self._lock.write():
            expired = [a for a, live in self._broker_live.items() if live.last_update_ms < deadline]
            for addr in expired:
                del self._broker_live[addr]
                for name in list(self._broker_addr):
                    self._remove_addr(name, addr)
        return expired

    # -- reads --------------------------------------------------------------------------------

    def pick_topic_route(self, topic: str, *, kv_lookup: KvLookup | None = None) -> TopicRouteData:
        """The topic's queues and the brokers holding them (sorted by broker name).

        ``kv_lookup(namespace, key)`` supplies ``order_topic_conf`` from the
        ``ORDER_TOPIC_CONFIG`` namespace. Raises TopicNotExistError when the
        topic is unknown or none of its brokers is registered.
        """
        with self._lock.read():
            queues = sorted((self._topic_queue.get(topic) or {}).items())
            groups = [
                (name, group.cluster, dict(group.addrs), self._http_addrs(group.addrs))
                for name, _ in queues
                if (group := self._broker_addr.get(name)) is not None
            ]
        if not queues or not groups:
            raise TopicNotExistError(f"no route info in the name server for topic {topic}")
        return TopicRouteData(
            topic=topic,
            queues=[
                QueueData(
                    broker_name=name,
                    read_queue_nums=q.read_queue_nums,
                    write_queue_nums=q.write_queue_nums,
                    perm=q.perm,
                    topic_sys_flag=q.topic_sys_flag,
                )
                for name, q in queues
            ],
            brokers=[_broker_data(*g) for g in groups],
            order_topic_conf=kv_lookup(ORDER_TOPIC_CONFIG, topic) if kv_lookup else None,
        )

    def cluster_info(self) -> ClusterInfo:
        """Every cluster with its broker names, every broker group, every live broker."""
        with self._lock.read():
            clusters = {c: sorted(names) for c, names in self._cluster_addr.items()}
            groups = [
                (n, g.cluster, dict(g.addrs), self._http_addrs(g.addrs))
                for n, g in self._broker_addr.items()
            ]
            live = list(self._broker_live.items())
        return ClusterInfo(
            clusters=dict(sorted(clusters.items())),
            brokers=[_broker_data(*g) for g in sorted(groups)],
            live=[
                LiveBroker(
                    cluster=info.cluster,
                    broker_name=info.broker_name,
                    broker_id=info.broker_id,
                    addr=addr,
                    last_update_timestamp=info.last_update_ms,
                    data_version=DataVersion(timestamp=info.version[0], counter=info.version[1]),
                    http_addr=info.http_addr,
                )
                for addr, info in sorted(
                    live, key=lambda item: (item[1].cluster, item[1].broker_name, item[1].broker_id)
                )
            ],
        )

    def topic_list(self) -> TopicList:
        """Every topic that has queues on some broker, sorted."""
        with self._lock.read():
            topics = sorted(self._topic_queue)
        return TopicList(topics=topics)

    def live_count(self) -> int:
        """How many broker processes are registered and not expired."""
        with self._lock.read():
            return len(self._broker_live)

    # -- helpers (called with the write lock held) --------------------------------------------

    def _http_addrs(self, addrs: dict[int, str]) -> dict[int, str]:
        """The REST address of each broker id whose process told it (read lock held)."""
        out = {}
        for broker_id, addr in addrs.items():
            live = self._broker_live.get(addr)
            if live is not None and live.http_addr:
                out[broker_id] = live.http_addr
        return out

    def _update_queues(self, name: str, topics: dict[str, TopicQueueConfig]) -> None:
        for topic, cfg in topics.items():
            queue = _Queue(cfg.read_queue_nums, cfg.write_queue_nums, cfg.perm, cfg.topic_sys_flag)
            self._topic_queue.setdefault(topic, {})[name] = queue
        for topic in [t for t in self._topic_queue if t not in topics]:
            self._drop_queues(topic, name)

    def _drop_queues(self, topic: str, name: str) -> None:
        queues = self._topic_queue[topic]
        if queues.pop(name, None) is not None and not queues:
            del self._topic_queue[topic]
            log.info("topic %s has no queues left; removed", topic)

    def _remove_addr(self, name: str, addr: str) -> None:
        group = self._broker_addr.get(name)
        if group is None:
            return
        for broker_id in [i for i, a in group.addrs.items() if a == addr]:
            del group.addrs[broker_id]
        if not group.addrs:
            self._drop_group(name)

    def _drop_group(self, name: str) -> None:
        group = self._broker_addr.pop(name)
        self._forget_in_cluster(group.cluster, name)
        for topic in list(self._topic_queue):
            self._drop_queues(topic, name)

    def _forget_in_cluster(self, cluster: str, name: str) -> None:
        names = self._cluster_addr.get(cluster)
        if names is not None:
            names.discard(name)
            if not names:
                del self._cluster_addr[cluster]


def _broker_data(
    name: str, cluster: str, addrs: dict[int, str], http_addrs: dict[int, str]
) -> BrokerData:
    return BrokerData(
        cluster=cluster,
        broker_name=name,
        addrs={str(i): a for i, a in sorted(addrs.items())},
        http_addrs={str(i): a for i, a in sorted(http_addrs.items())},
    )
