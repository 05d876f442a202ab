"""A dev cluster on loopback: N NameServers and M brokers (each a master with S slaves),
as child processes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from connector.local.process import ServerProcess

__all__ = ["LocalCluster", "broker_names"]


def broker_names(n: int) -> list[str]:
    """broker-a, broker-b, ... broker-z, broker-27, ..."""
    return [f"broker-{chr(ord('a') + i)}" if i < 26 else f"broker-{i + 1}" for i in range(n)]


class LocalCluster:
    """Start NameServers first, then brokers pointing at all of them; stop in reverse."""

    def __init__(
        self,
        data_dir: Path,
        *,
        brokers: int = 2,
        namesrvs: int = 1,
        slaves: int = 0,
        host: str = "127.0.0.1",
        broker_args: list[str] | None = None,
        env: Mapping[str, str] | None = None,
        port: int = 0,
        http_port: int | None = None,
    ) -> None:
        """``port`` / ``http_port``: the first NameServer's (0: free ports; the HTTP
        port defaults to ``port`` + 4 as a NameServer's does); the others take free ones."""
        self.data_dir = Path(data_dir)
        self.host = host
        self.env = dict(os.environ if env is None else env)
        self.broker_args = broker_args or []
        first = ["--port", str(port)]
        if http_port is not None:
            first += ["--http-port", str(http_port)]
        self.namesrvs = [
            ServerProcess(
                "namesrv",
                [
                    *("--host", host, *(first if i == 0 else ["--port", "0"])),
                    *("--data", str(self.data_dir / f"namesrv-{i}")),
                ],
                log_path=self.data_dir / "logs" / f"namesrv-{i}.log",
                env=self.env,
                name=f"namesrv-{i}",
            )
            for i in range(namesrvs)
        ]
        self.brokers: list[ServerProcess] = []  # masters, then each one's slaves
        self._broker_count = brokers
        self._slaves = slaves

    @property
    def namesrv_addr(self) -> str:
        return ";".join(p.addr for p in self.namesrvs)

    def broker(self, name: str) -> ServerProcess:
        for b in self.brokers:
            if b.name == name:
                return b
        raise KeyError(name)

    def start(self, timeout_s: float = 60.0) -> LocalCluster:
        try:
            for ns in self.namesrvs:
                ns.start(timeout_s)
            for name in broker_names(self._broker_count):
                broker = self._broker_process(name)
                self.brokers.append(broker)  # before start: stop() also reaches one interrupted
                broker.start(timeout_s)
            # slaves after their masters: their first registration names the master's HA port
            for name in broker_names(self._broker_count):
                for slave_id in range(1, self._slaves + 1):
                    slave = self._broker_process(name, slave_id)
                    self.brokers.append(slave)
                    slave.start(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def _broker_process(self, name: str, slave_id: int = 0) -> ServerProcess:
        """Broker ``name``'s master, or (``slave_id`` > 0) one of its slaves."""
        label = name if slave_id == 0 else f"{name}-s{slave_id}"
        args = [
            "--name", name, "--host", self.host, "--port", "0",
            "--namesrv", self.namesrv_addr, "--store", str(self.data_dir / label),
            *self.broker_args,
        ]  # fmt: skip
        if slave_id:
            args += ["--role", "SLAVE", "--id", str(slave_id)]
        return ServerProcess(
            "broker", args, log_path=self.data_dir / "logs" / f"{label}.log", env=self.env,
            name=label,
        )  # fmt: skip

    def restart_broker(self, name: str, *, crash: bool = False, timeout_s: float = 60.0) -> None:
        """Stop a broker (SIGKILL if ``crash``) and start it again on the same store.

        It comes back on a new port unless the original args pinned one.
        """
        old = self.broker(name)
        if crash:
            old.kill()
        else:
            old.terminate()
        new = ServerProcess(old.role, old.args, log_path=old.log_path, env=old.env, name=old.name)
        new.start(timeout_s)
        self.brokers[self.brokers.index(old)] = new

    def stop(self) -> dict[str, int | None]:
        codes: dict[str, int | None] = {}
        for proc in [*reversed(self.brokers), *reversed(self.namesrvs)]:
            codes[proc.name] = proc.terminate()
        return codes

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
