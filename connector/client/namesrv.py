"""Route lookups against the NameServers, moving to the next one on failure.

NameServers do not talk to each other and every broker registers with all
of them, so any one answers for the cluster: the client sticks to the last
one that answered and tries the others in turn when it does not.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from connector.client.rpc import Rpc
from connector.errors import ConfigError, RemotingError, TopicNotExistError
from connector.protocol.remoting import RequestCode
from connector.protocol.route import (
    ClusterInfo,
    TopicRouteData,
    cluster_from_remoting,
    route_from_remoting,
)

__all__ = ["NameServerClient", "parse_namesrv"]

log = logging.getLogger(__name__)


def parse_namesrv(namesrv: str | Sequence[str] | None) -> list[str]:
    """``"h:p;h:p"`` or a list of ``h:p`` -> addresses; ConfigError if none."""
    if namesrv is None:
        raise ConfigError("no NameServer address: pass namesrv= or set PYMQ_NAMESRV")
    items = namesrv.split(";") if isinstance(namesrv, str) else list(namesrv)
    addrs = [a.strip() for a in items if a and a.strip()]
    for addr in addrs:
        host, sep, port = addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"NameServer address {addr!r} is not host:port")
    if not addrs:
        raise ConfigError("no NameServer address: pass namesrv= or set PYMQ_NAMESRV")
    return addrs


class NameServerClient:
    def __init__(self, addrs: list[str], rpc: Rpc, *, timeout_ms: int = 3000) -> None:
        self.addrs = addrs
        self.rpc = rpc
        self.timeout_s = timeout_ms / 1000
        self._current = 0
        self._lock = threading.Lock()

    def _call(self, code: int, ext: dict[str, str] | None = None) -> object:
        with self._lock:
            start = self._current
        last: RemotingError | None = None
        for i in range(len(self.addrs)):
            k = (start + i) % len(self.addrs)
            addr = self.addrs[k]
            try:
                out = self.rpc.call_json(addr, code, ext, timeout_s=self.timeout_s)
            except RemotingError as exc:
                log.debug("NameServer %s failed: %s", addr, exc)
                last = exc
                continue
            if k != start:
                with self._lock:
                    self._current = k
            return out
        assert last is not None
        raise RemotingError(f"no NameServer answered ({', '.join(self.addrs)}): {last.message}")

    def topic_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route, or None if no broker serves it."""
        try:
            raw = self._call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        except TopicNotExistError:
            return None
        try:
            assert isinstance(raw, dict)
            return route_from_remoting(topic, raw)
        except (AssertionError, KeyError, ValueError, TypeError) as exc:
            raise RemotingError(
                f"the route of {topic} is not RocketMQ's TopicRouteData: {exc}"
            ) from None

    def cluster_info(self) -> ClusterInfo:
        raw = self._call(RequestCode.GET_BROKER_CLUSTER_INFO)
        assert isinstance(raw, dict)
        return cluster_from_remoting(raw)

    def topic_list(self) -> list[str]:
        raw = self._call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        assert isinstance(raw, dict)
        return [str(t) for t in raw.get("topicList", [])]
