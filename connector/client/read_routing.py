"""Which node of a broker name a consumer reads from: its master, or a slave.

RocketMQ's ``PullAPIWrapper`` keeps, per queue, the broker id the last pull
answer suggested (``suggestWhichBrokerId``, its ``pullFromWhichNodeTable``)
and looks that id up in the broker name's addresses
(``findBrokerAddressInSubscribe``), taking any node when that id is not
there. pymq's brokers suggest the master (``"0"``) while it is up; a slave
that lost its master suggests itself. So readers move to a slave when the
master dies and back when it returns.

Added here: a node the client could not reach (connect refused, timed out,
connection broken) is avoided for ``FAILED_ADDR_AVOID_MS``, so reads move to
a slave at once instead of waiting for the NameServer to drop the dead
master (two minutes by default) or for a slave to notice it.

``ReadRouting`` is pure: no IO, no threads, a millisecond clock passed in;
the consumer (``connector.client.consumer``) does the calls and reports what
it saw. The order in which a broker name's nodes are tried::

    1. the id last suggested (the master, "0", until an answer says otherwise)
    2. the master
    3. the slaves, by id
    - nodes that failed within FAILED_ADDR_AVOID_MS go last; when every node
      failed, the first in that order is tried anyway (something may be back)

A choice other than the suggested node, reachable, is not ``preferred``: the
consumer then refreshes the route (at most every ``ROUTE_REFRESH_INTERVAL_MS``
per key, ``refresh_due``) to learn, e.g., the new address of a master that
restarted on another port.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping
from typing import NamedTuple

from connector.client.latency import Clock, monotonic_ms
from connector.errors import ConfigError
from connector.protocol.route import MASTER_ID

__all__ = [
    "FAILED_ADDR_AVOID_MS",
    "ROUTE_REFRESH_INTERVAL_MS",
    "ReadChoice",
    "ReadRouting",
]

# Long enough that the calls right after a failed one (the retry, the next pulls of
# every queue of the broker) do not each pay a connection attempt to a dead master;
# short enough that a master back on the same address is read from again within
# seconds even if no slave says so (a slave of a partitioned client keeps saying "0").
FAILED_ADDR_AVOID_MS = 5000
# While a broker is read from a node it did not suggest, its route is asked for again
# at most this often: soon enough to find a restarted master's new address within a
# second, rare enough to cost the NameServer nothing.
ROUTE_REFRESH_INTERVAL_MS = 1000


class ReadChoice(NamedTuple):
    """The node to read from: its ``broker_id`` (0 = master) and ``addr`` (host:port).
    ``preferred``: the node suggested, as far as is known reachable; False when the
    route lacks it or it failed lately (the route may be stale). A tuple: one is made
    for every read, and a frozen dataclass costs several times more to build."""

    addr: str
    broker_id: int
    preferred: bool


class ReadRouting:
    """Per broker name: the node suggested to read from, and nodes recently unreachable.

    Thread-safe. ``clock`` returns milliseconds (default ``monotonic_ms``);
    ``failed_addr_avoid_ms`` (default ``FAILED_ADDR_AVOID_MS``) is how long a node
    that could not be reached goes last; ``route_refresh_interval_ms`` (default
    ``ROUTE_REFRESH_INTERVAL_MS``) spaces ``refresh_due``'s yeses.
    """

    def __init__(
        self,
        *,
        clock: Clock = monotonic_ms,
        failed_addr_avoid_ms: float = FAILED_ADDR_AVOID_MS,
        route_refresh_interval_ms: float = ROUTE_REFRESH_INTERVAL_MS,
    ) -> None:
        if failed_addr_avoid_ms < 0 or route_refresh_interval_ms < 0:
            raise ConfigError("failed_addr_avoid_ms and route_refresh_interval_ms must be >= 0")
        self.clock = clock
        self.failed_addr_avoid_ms = failed_addr_avoid_ms
        self.route_refresh_interval_ms = route_refresh_interval_ms
        self._suggested: dict[str, int] = {}  # broker name -> broker id
        self._failed: dict[str, float] = {}  # addr -> until (clock ms)
        self._refreshed: dict[Hashable, float] = {}  # key -> when refresh_due said yes
        self._lock = threading.Lock()

    # -- what the consumer saw -----------------------------------------------------------

    def record_suggestion(self, broker_name: str, broker_id: int | str | None) -> None:
        """A pull answer's ``suggestWhichBrokerId`` (a string on the wire). Missing or
        not a broker id (an older broker): nothing changes."""
        if isinstance(broker_id, str):
            if not broker_id.isdigit():
                return
            broker_id = int(broker_id)
        if broker_id is None or broker_id < 0:
            return
        if self._suggested.get(broker_name, MASTER_ID) != broker_id:
            self._suggested[broker_name] = broker_id

    def suggested(self, broker_name: str) -> int:
        """The id last suggested for ``broker_name`` (the master's until one is)."""
        return self._suggested.get(broker_name, MASTER_ID)

    def mark_failed(self, addr: str) -> None:
        """``addr`` could not be reached: it goes last for ``failed_addr_avoid_ms``."""
        now = self.clock()
        with self._lock:
            for other, until in list(self._failed.items()):  # forget the long expired
                if until <= now:
                    del self._failed[other]
            self._failed[addr] = now + self.failed_addr_avoid_ms

    def succeeded(self, addr: str) -> None:
        """``addr`` answered: it is no longer avoided."""
        if addr in self._failed:
            with self._lock:
                self._failed.pop(addr, None)

    def is_failed(self, addr: str) -> bool:
        """Whether ``addr`` failed within the last ``failed_addr_avoid_ms``."""
        until = self._failed.get(addr)
        return until is not None and self.clock() < until

    # -- the decision --------------------------------------------------------------------

    def choose(self, broker_name: str, addrs: Mapping[str, str]) -> ReadChoice | None:
        """The node of ``broker_name`` to read from, given its route's ``addrs``
        (broker id as a string -> host:port); None when it has none."""
        wanted = self._suggested.get(broker_name, MASTER_ID)
        addr = addrs.get(str(wanted))
        if addr and not self.is_failed(addr):  # the usual case, decided at once
            return ReadChoice(addr, wanted, True)
        others = [(int(k), v) for k, v in addrs.items() if k.isdigit() and v]
        order = [(wanted, addr)] if addr else []
        order += sorted(  # the master, then the slaves by id
            ((i, a) for i, a in others if i != wanted), key=lambda n: (n[0] != MASTER_ID, n[0])
        )
        if not order:
            return None
        for broker_id, node_addr in order:
            if not self.is_failed(node_addr):
                return ReadChoice(node_addr, broker_id, False)
        broker_id, node_addr = order[0]
        return ReadChoice(node_addr, broker_id, False)

    def refresh_due(self, key: Hashable) -> bool:
        """Whether a route refresh for ``key`` (e.g. topic and broker name) may go out
        now; True at most once every ``route_refresh_interval_ms`` per key."""
        now = self.clock()
        with self._lock:
            last = self._refreshed.get(key)
            if last is not None and now - last < self.route_refresh_interval_ms:
                return False
            self._refreshed[key] = now
            return True
