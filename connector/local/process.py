"""One pymq server as a child process, started through its CLI.

``start()`` waits (bounded) for the server's ready line and takes its address
from it, so servers can listen on port 0. stdout after the ready line and
stderr go to a log file; ``terminate()`` is a clean stop (SIGTERM), ``kill()``
a crash (SIGKILL).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from connector.errors import PyMQError

__all__ = ["ServerProcess", "ServerStartError"]

_READY = re.compile(r"ready: remoting (\S+?):(\d+), http https?://(\S+?):(\d+)")
_HA = re.compile(r"\bha (\S+?:\d+)")


class ServerStartError(PyMQError):
    code = "SERVER_START_FAILED"


class ServerProcess:
    def __init__(
        self,
        role: str,
        args: Sequence[str],
        *,
        log_path: Path,
        env: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        self.role = role
        self.args = list(args)
        self.log_path = log_path
        self.env = dict(os.environ if env is None else env)
        self.name = name or role
        self.addr = ""  # remoting host:port
        self.http_addr = ""  # the REST API's host:port
        self.ha_addr = ""  # a master broker's HA host:port
        self.ready_line = ""
        self.proc: subprocess.Popen[str] | None = None
        self._log: IO[str] | None = None
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    @property
    def command(self) -> list[str]:
        return [sys.executable, "-m", "connector.cli", self.role, *self.args]

    def start(self, timeout_s: float = 60.0) -> ServerProcess:
        """Start and wait for the ready line; ServerStartError if it exits or times out."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the process
        self._ready.clear()
        self.addr = ""
        self.proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=self.env,
            text=True,
            bufsize=1,
            # own session: a Ctrl-C at the terminal reaches only the launcher, which
            # stops brokers before NameServers (so brokers can unregister)
            start_new_session=True,
        )
        self._reader = threading.Thread(
            target=self._read_stdout, args=(self.proc,), name=f"{self.name}-stdout", daemon=True
        )
        self._reader.start()
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None:
                raise ServerStartError(
                    f"{self.name} exited with code {self.proc.returncode}: {self.last_log_line()}"
                )
            if time.monotonic() > deadline:
                self.kill()
                raise ServerStartError(f"{self.name} not ready within {timeout_s:.0f} s")
        return self

    def _read_stdout(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if not self._ready.is_set():
                m = _READY.search(line)
                if m:
                    self.ready_line = line.strip()
                    self.addr = f"{m.group(1)}:{m.group(2)}"
                    self.http_addr = f"{m.group(3)}:{m.group(4)}"
                    ha = _HA.search(line)
                    self.ha_addr = ha.group(1) if ha else ""
                    self._ready.set()
                    continue
            if self._log is not None and not self._log.closed:
                self._log.write(line)
                self._log.flush()

    def last_log_line(self) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def terminate(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not stop in time. The exit code."""
        return self._stop(signal.SIGTERM, timeout_s)

    def kill(self, timeout_s: float = 10.0) -> int | None:
        """SIGKILL (a crash, for tests) and wait."""
        return self._stop(signal.SIGKILL, timeout_s)

    def _stop(self, sig: signal.Signals, timeout_s: float) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self._reader is not None:
            self._reader.join(5)
        if self._log is not None:
            self._log.close()
        return proc.returncode
