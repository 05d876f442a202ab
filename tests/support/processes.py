"""Real ``pymq namesrv`` / ``pymq broker`` children on loopback, for process-level tests.

Every server listens on port 0 (the ready line carries the real port) and keeps
its data under a pytest tmp dir; one that must come back on its own address takes
``pinned_port()`` instead. ``Servers`` remembers every process it starts
and stops all of them at teardown (the ``servers`` and ``module_servers`` fixtures
of ``tests.support.fixtures``), whatever the test did.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from connector.local import LocalCluster, ServerProcess

START_TIMEOUT_S = 60.0
# the caller's PYMQ_* settings must not leak into the servers under test
BASE_ENV: dict[str, str] = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}


def env_with(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of this process without its PYMQ_* settings, plus ``overrides``."""
    return {**BASE_ENV, **(overrides or {})}


def port_open(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def pinned_port(span: int = 5) -> int:
    """A port free with the ``span`` - 1 above it (a broker's HA and REST ports sit at
    port + 1 and port + 4), below Linux's ephemeral range (32768-60999), for a server
    that must restart on the address it had. A port-0 listener had its port taken in
    the second between stop and restart by another test's outgoing connection or
    port-0 listener (both draw from the ephemeral range); these ports are not drawn."""
    for _ in range(200):
        port = random.randrange(20000, 32768 - span)
        if all(_bindable(p) for p in range(port, port + span)):
            return port
    raise RuntimeError("no free port run found in 20000-32767")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def clean_env(**extra: str) -> dict[str, str]:
    """``env_with`` taking the overrides as keywords."""
    return env_with(extra)


class Servers:
    """Starts server processes for a test (or a module); ``stop_all`` ends every one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[ServerProcess] = []
        self.clusters: list[LocalCluster] = []
        self._seq = itertools.count()

    def _log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}-{next(self._seq)}.log"

    def namesrv(
        self, *, env: Mapping[str, str] | None = None, name: str = "namesrv"
    ) -> ServerProcess:
        data = self.root / f"{name}-data-{next(self._seq)}"
        args = ["--host", "127.0.0.1", "--port", "0", "--data", str(data)]
        proc = ServerProcess(
            "namesrv", args, log_path=self._log(name), env=env_with(env), name=name
        )
        return self._start(proc)

    def broker_process(
        self,
        *,
        name: str | None = "broker-a",
        store: Path | None = None,
        namesrv: str | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> ServerProcess:
        """A broker process, not started yet (``start_all`` starts several at once).

        ``name=None`` passes no ``--name`` (the config file or environment decides).
        """
        label = name or "broker"
        store = store if store is not None else self.root / label
        argv = ["--host", "127.0.0.1", "--port", "0", "--store", str(store)]
        if name is not None:
            argv += ["--name", name]
        if namesrv:
            argv += ["--namesrv", namesrv]
        proc = ServerProcess(
            "broker", [*argv, *args], log_path=self._log(label), env=env_with(env), name=label
        )
        self.procs.append(proc)
        return proc

    def broker(
        self,
        *,
        name: str | None = "broker-a",
        store: Path | None = None,
        namesrv: str | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> ServerProcess:
        proc = self.broker_process(name=name, store=store, namesrv=namesrv, env=env, args=args)
        return self._start(proc)

    def start_all(self, procs: Sequence[ServerProcess]) -> None:
        """Start several processes concurrently (each start mostly waits on imports)."""
        with ThreadPoolExecutor(len(procs)) as pool:
            for _ in pool.map(self._start, procs):
                pass

    def _start(self, proc: ServerProcess) -> ServerProcess:
        if proc not in self.procs:
            self.procs.append(proc)
        return proc.start(START_TIMEOUT_S)

    def restart(self, proc: ServerProcess, *, crash: bool = False) -> ServerProcess:
        """Stop ``proc`` (SIGKILL if ``crash``, else SIGTERM) and start the same command again.

        The new process has the same args (so the same store) but, on port 0, a new port.
        """
        if crash:
            proc.kill()
        else:
            code = proc.terminate()
            assert code == 0, f"{proc.name} exited {code} on SIGTERM: {proc.last_log_line()}"
        new = ServerProcess(
            proc.role, proc.args, log_path=proc.log_path, env=proc.env, name=proc.name
        )
        return self._start(new)

    def cluster(
        self,
        *,
        brokers: int,
        namesrvs: int = 1,
        env: Mapping[str, str] | None = None,
        broker_args: list[str] | None = None,
    ) -> LocalCluster:
        data = self.root / f"cluster-{next(self._seq)}"
        cluster = LocalCluster(
            data, brokers=brokers, namesrvs=namesrvs, env=env_with(env), broker_args=broker_args
        )
        self.clusters.append(cluster)
        return cluster.start(START_TIMEOUT_S)

    def stop_all(self) -> None:
        for cluster in reversed(self.clusters):
            cluster.stop()
        for proc in reversed(self.procs):
            if proc.running:
                proc.terminate(timeout_s=15)
            else:
                proc.kill()  # reaps it and closes its log
