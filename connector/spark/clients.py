"""pymq clients kept by an executor's Python process for the tasks that follow.

Spark reuses a Python worker for task after task (``spark.python.worker.reuse``,
true by default), so a client a task opened can serve the next task of the
same micro-batch and of the next ones, as Kafka's consumer pool does: no new
connection to the name server and the brokers, no route lookup per task.
Clients are keyed by their settings (name server, group, ...); a client with
no task using it for ``idle_ms`` (60 s by default) is shut down, checked on
every lease and by a daemon thread, and every client is shut down at
interpreter exit. A lease that ends with an error drops its client (the next
task opens a new one), so a broken client is never handed out twice.

``PullConsumer`` and ``Producer`` are thread-safe; several tasks of one
process (rare: a Python worker runs one task at a time) may share a client.

``freeze_long_lived`` is the other part of a worker's state that outlives a
task: Spark's Python daemon runs a full ``gc.collect()`` after every task of a
reused worker, and once the read path is imported (pyarrow, pyspark, the
client) a worker holds ~60,000 objects the collector visits each time (with
numba's kernels it was ~140,000: ~65 ms of CPU per task, about half the
Python CPU of a task reading 125,000 messages).
Frozen (``gc.freeze``), those long-lived objects are left out of every later
collection; only what a task leaves behind is looked at.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from connector.client.consumer import PullConsumer
    from connector.client.producer import Producer

__all__ = [
    "DEFAULT_IDLE_MS",
    "CacheStats",
    "ClientCache",
    "freeze_long_lived",
    "producer",
    "pull_consumer",
    "shared_cache",
]

log = logging.getLogger(__name__)
DEFAULT_IDLE_MS = 60_000


class _Client(Protocol):
    def shutdown(self) -> None: ...


@dataclass
class CacheStats:
    """What one process's cache did; ``created`` low against ``leases`` means reuse."""

    pid: int
    created: int = 0  # clients made (each opens its own connections)
    leases: int = 0  # times a task took a client
    closed_idle: int = 0
    dropped_broken: int = 0  # leases that ended with an error
    open: int = 0


@dataclass
class _Entry:
    client: Any
    in_use: int = 0
    last_used_s: float = 0.0
    dropped: bool = False  # out of the cache; shut down when its last lease ends


class ClientCache:
    """Clients by key, shared by the leases of one process; ``clock`` returns seconds."""

    def __init__(
        self, *, idle_ms: int = DEFAULT_IDLE_MS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.idle_ms = idle_ms
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry] = {}
        self._stats = CacheStats(pid=os.getpid())
        self._reaper: threading.Thread | None = None
        self._wake = threading.Event()

    def _check_fork(self) -> None:
        # a forked child shares its parent's sockets: forget the parent's clients, never
        # shut them down from here (that would close the parent's connections)
        if self._stats.pid != os.getpid():
            self._entries.clear()
            self._stats = CacheStats(pid=os.getpid())
            self._reaper = None
            self._wake = threading.Event()

    @contextmanager
    def lease(self, key: Hashable, make: Callable[[], _Client]) -> Iterator[Any]:
        """The client for ``key`` (made by ``make`` if there is none) while the block runs."""
        with self._lock:
            self._check_fork()
            expired = self._take_idle()
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(make())
                self._stats.created += 1
                self._start_reaper()
            entry.in_use += 1
            self._stats.leases += 1
        self._shutdown(expired)
        ok = False
        try:
            yield entry.client
            ok = True
        except GeneratorExit:  # a reader stopped early (e.g. a LIMIT): the client is fine
            ok = True
            raise
        finally:
            self._release(key, entry, broken=not ok)

    def _release(self, key: Hashable, entry: _Entry, *, broken: bool) -> None:
        drop = None
        with self._lock:
            entry.in_use -= 1
            entry.last_used_s = self.clock()
            if broken:
                self._stats.dropped_broken += 1
                entry.dropped = True
                if self._entries.get(key) is entry:
                    del self._entries[key]
            if entry.dropped and entry.in_use == 0:
                drop = entry
        if drop is not None:
            self._shutdown([drop])

    def _take_idle(self) -> list[_Entry]:
        """Remove the entries idle for longer than ``idle_ms``; the caller shuts them down."""
        now = self.clock()
        idle = [
            k
            for k, e in self._entries.items()
            if e.in_use == 0 and (now - e.last_used_s) * 1000 >= self.idle_ms
        ]
        self._stats.closed_idle += len(idle)
        return [self._entries.pop(k) for k in idle]

    def close_idle(self) -> int:
        """Shut down the clients idle for longer than ``idle_ms``; how many there were."""
        with self._lock:
            self._check_fork()
            expired = self._take_idle()
        self._shutdown(expired)
        return len(expired)

    def close_all(self) -> None:
        """Shut down every client of this process (in use or not): at exit, in tests."""
        with self._lock:
            self._check_fork()
            entries = list(self._entries.values())
            self._entries.clear()
            self._wake.set()
        self._shutdown(entries)

    def stats(self) -> CacheStats:
        with self._lock:
            self._check_fork()
            s = self._stats
            return CacheStats(
                s.pid, s.created, s.leases, s.closed_idle, s.dropped_broken, len(self._entries)
            )

    @staticmethod
    def _shutdown(entries: list[_Entry]) -> None:
        for entry in entries:
            try:
                entry.client.shutdown()
            except Exception:  # closing goes on with the others; logged, not swallowed
                log.warning("shutting down a cached pymq client failed", exc_info=True)

    def _start_reaper(self) -> None:
        if self._reaper is None or not self._reaper.is_alive():
            self._wake = threading.Event()
            self._reaper = threading.Thread(
                target=self._reap, args=(self._wake,), name="pymq-client-cache", daemon=True
            )
            self._reaper.start()

    def _reap(self, wake: threading.Event) -> None:
        # runs while clients are cached; checks twice per idle period
        while not wake.wait(self.idle_ms / 2000):
            self.close_idle()
            with self._lock:
                if not self._entries:
                    self._reaper = None
                    return


_shared = ClientCache()
atexit.register(_shared.close_all)


def shared_cache() -> ClientCache:
    """This process's cache (one per executor Python worker)."""
    return _shared


_frozen = False


def freeze_long_lived() -> bool:
    """Once per process: collect, then freeze every object left (``gc.freeze``).

    Call it when the process holds what it will keep (modules imported, kernels
    loaded, clients cached). Frozen objects are still freed when their reference
    count drops; a reference cycle among them is never collected, which the
    modules, types and cached clients of a worker do not make. True the first time.
    """
    global _frozen  # noqa: PLW0603 - one flag per process (a forked child inherits both)
    if _frozen:
        return False
    _frozen = True
    gc.collect()
    gc.freeze()
    return True


@contextmanager
def pull_consumer(
    *,
    namesrv: str,
    group: str,
    timeout_ms: int = 3000,
    **security: Any,
) -> Iterator[PullConsumer]:
    """A ``PullConsumer`` of this process for these settings, for the block's duration;
    ``security``: its ``access_key``, ``secret_key``, ``tls``, ``tls_ca_file``."""

    def make() -> PullConsumer:
        from connector.client.consumer import PullConsumer  # noqa: PLC0415

        return PullConsumer(group=group, namesrv=namesrv, timeout_ms=timeout_ms, **security)

    key = ("pull", namesrv, group, timeout_ms, tuple(sorted(security.items())))
    with _shared.lease(key, make) as consumer:
        yield consumer


@contextmanager
def producer(*, namesrv: str, group: str, **settings: Any) -> Iterator[Producer]:
    """A started ``Producer`` of this process; ``settings`` are Producer's keywords.

    Sends must be finished (synchronous, or their futures awaited) when the block ends:
    the producer goes on serving other tasks and is shut down only when idle.
    """

    def make() -> Producer:
        from connector.client.producer import Producer  # noqa: PLC0415

        return Producer(group=group, namesrv=namesrv, **settings).start()

    key = ("produce", namesrv, group, tuple(sorted(settings.items())))
    with _shared.lease(key, make) as client:
        yield client
