"""Run PyPI ``rocketmq`` 0.4.4 (Apache's C++ client core, librocketmq) against a cluster.

Every operation runs in a child process (``rocketmq_cpp_child.py``) of the interpreter
that has ``rocketmq``, with its own HOME (the C++ core writes
``~/logs/rocketmq-cpp``) and a hard timeout: some of the client's calls block
without bound (``send_sync`` to a server that does not answer, ``PullConsumer.pull``
on broker timeouts), so on expiry the child's process group is killed.

The child writes one JSON object a line on its own copy of stdout (the C++ core's
writes go to stderr) and flushes each, so a killed child still reports what it did:

- ``{"event": "sent", "i", "status", "msg_id", "offset"}`` per acknowledged send
  (``msg_id`` is the client's UNIQ_KEY, ``offset`` the queue offset);
- ``{"event": "retry", "i", "attempt", "type", "message"}`` before a send is retried;
- ``{"event": "send_failed", "i", "type", "message"}`` when it is given up;
- ``{"event": "queue", "broker", "queue_id", "offset"}`` when a pull starts a queue;
- ``{"event": "message", ...}`` per message received (see the child's ``_message_json``;
  a pull's also name their ``broker``);
- ``{"event": "done", "ok", "error", ...}`` last.

``run_cpp`` gathers them into one dict: ``op``, ``ok``, ``error``, ``timed_out``,
``returncode``, ``elapsed_s``, ``sent``, ``retries``, ``failed``, ``queues``, ``messages``,
``done`` (the last event), ``stderr`` and ``cpp_log`` (tails, for failure messages)
and ``home``.

Limits of the client: bodies, keys, tags and property values are C strings (a NUL
ends them) and must be UTF-8; a received message's properties can only be read by
name, so ``pull`` and ``push`` report the names they are given (plus UNIQ_KEY).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CppClient", "client_import_error", "run_cpp"]

# what each operation's child reads; the CppClient methods document them and give defaults
_COMMON = ("namesrv", "topic", "group", "deadline_s")
PARAMS = {
    "produce": (
        *_COMMON,
        *("count", "tags", "keys", "body", "properties", "send_timeout_ms", "send_retries"),
    ),
    "pull": (
        *_COMMON,
        *("expected", "expression", "property_names", "max_num", "per_broker_positions"),
    ),
    "push": (*_COMMON, "expected", "expression", "property_names", "thread_count", "settle_s"),
}
OPS = tuple(PARAMS)
DEFAULT_TIMEOUT_S = 60.0
# the child's own deadline ends this long before the hard kill, so it can shut down and report
SHUTDOWN_MARGIN_S = 10.0
_TAIL_CHARS = 4000
_CHILD = Path(__file__).resolve().with_name("rocketmq_cpp_child.py")


def client_import_error(python: str = sys.executable, timeout_s: float = 30.0) -> str | None:
    """None if ``python`` imports ``rocketmq.client`` (loading librocketmq.so), else why not."""
    try:
        proc = subprocess.run(
            [python, "-c", "import rocketmq.client"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{python}: {exc}"
    if proc.returncode != 0:
        return f"{python} cannot import rocketmq.client: {proc.stderr.strip()[-_TAIL_CHARS:]}"
    return None


def run_cpp(
    op: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str = sys.executable,
    home: Path | None = None,
    **params: Any,
) -> dict[str, Any]:
    """Run one operation of the C++ client in a child; never raises for the child's failures.

    ``timeout_s`` is the hard limit: the child's process group is killed then, and the
    result has ``timed_out`` true and whatever the child reported before. Unless
    ``params`` has ``deadline_s``, the child's own deadline is ``timeout_s`` minus
    SHUTDOWN_MARGIN_S (at least half of it). ``home`` is the child's HOME (a fresh
    temporary directory, removed afterwards, if None). ``params``: those PARAMS names
    for ``op`` (the CppClient methods give defaults); a missing one is a ValueError.
    """
    if op not in OPS:
        raise ValueError(f"unknown operation {op!r}, expected one of {OPS}")
    params.setdefault("deadline_s", max(timeout_s / 2, timeout_s - SHUTDOWN_MARGIN_S))
    missing = [name for name in PARAMS[op] if name not in params]
    if missing:
        raise ValueError(f"{op} needs {missing} (the CppClient methods give defaults)")
    if home is None:
        with tempfile.TemporaryDirectory(prefix="rocketmq-cpp-") as tmp:
            return _run(op, params, timeout_s=timeout_s, python=python, home=Path(tmp))
    home.mkdir(parents=True, exist_ok=True)
    return _run(op, params, timeout_s=timeout_s, python=python, home=home)


def _run(
    op: str, params: Mapping[str, Any], *, timeout_s: float, python: str, home: Path
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env["HOME"] = str(home)
    started = time.monotonic()
    proc = subprocess.Popen(
        [python, "-I", str(_CHILD), op, json.dumps(params)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=home,
        env=env,
        text=True,
        start_new_session=True,  # the kill on timeout reaches the whole group
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    result = _gather(op, out)
    result.update(
        timed_out=timed_out,
        returncode=proc.returncode,
        elapsed_s=round(time.monotonic() - started, 3),
        stderr=err[-_TAIL_CHARS:],
        home=str(home),
    )
    done = result["done"]
    result["ok"] = bool(done and done.get("ok")) and proc.returncode == 0 and not timed_out
    if done and done.get("error"):
        result["error"] = done["error"]
    elif timed_out:
        result["error"] = {"type": "Timeout", "message": f"killed after {timeout_s} s"}
    elif not result["ok"]:
        result["error"] = {
            "type": "ChildFailed",
            "message": f"exit code {proc.returncode} without a result: {err[-500:]}",
        }
    if not result["ok"]:
        result["cpp_log"] = _log_tail(home)
    return result


def _gather(op: str, out: str) -> dict[str, Any]:
    result: dict[str, Any] = {
        "op": op,
        "error": None,
        "sent": [],
        "failed": [],
        "retries": [],
        "queues": [],
        "messages": [],
        "done": None,
    }
    lists = {
        "sent": "sent",
        "send_failed": "failed",
        "retry": "retries",
        "queue": "queues",
        "message": "messages",
    }
    for line in out.splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by the kill
        kind = event.pop("event", None)
        if kind in lists:
            result[lists[kind]].append(event)
        elif kind == "done":
            result["done"] = event
    return result


def _log_tail(home: Path) -> str:
    logs = sorted((home / "logs" / "rocketmq-cpp").glob("*"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return ""
    return logs[-1].read_text(encoding="utf-8", errors="replace")[-_TAIL_CHARS:]


class CppClient:
    """The C++ client as the tests use it: one interpreter, a new HOME under ``home_root``
    for every run (kept: its ``logs/rocketmq-cpp`` explain a failure)."""

    def __init__(self, *, python: str = sys.executable, home_root: Path) -> None:
        self.python = python
        self.home_root = home_root
        self._runs = 0
        self._lock = threading.Lock()

    def _home(self, op: str) -> Path:
        with self._lock:
            self._runs += 1
            n = self._runs
        self.home_root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"{n:03d}-{op}-", dir=self.home_root))

    def run(
        self, op: str, *, timeout_s: float = DEFAULT_TIMEOUT_S, **params: Any
    ) -> dict[str, Any]:
        return run_cpp(op, timeout_s=timeout_s, python=self.python, home=self._home(op), **params)

    def produce(
        self,
        *,
        namesrv: str,
        topic: str,
        count: int,
        group: str = "PID_PYMQ_CPP",
        tags: str | Sequence[str] = "",
        keys: str = "",
        body: str = "body-{i}",
        properties: Mapping[str, str] | None = None,
        send_timeout_ms: int = 3000,
        send_retries: int = 3,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        **params: Any,
    ) -> dict[str, Any]:
        """Send ``count`` messages synchronously, one at a time, in order ``i`` = 0..count-1.

        ``keys``, ``body`` and each value of ``properties`` are ``str.format`` patterns
        of ``i``; message ``i`` gets tag ``tags[i % len(tags)]`` (or ``tags`` if a str;
        "" sets none). A send that fails without reaching a broker is retried up to
        ``send_retries`` times (see the child's ``_send``). Stops at the first send given up unless
        ``stop_on_error=False``.
        """
        return self.run(
            "produce",
            timeout_s=timeout_s,
            namesrv=namesrv,
            topic=topic,
            count=count,
            group=group,
            tags=[tags] if isinstance(tags, str) else list(tags),
            keys=keys,
            body=body,
            properties=dict(properties or {}),
            send_timeout_ms=send_timeout_ms,
            send_retries=send_retries,
            **params,
        )

    def pull(
        self,
        *,
        namesrv: str,
        topic: str,
        expected: int,
        group: str = "CID_PYMQ_CPP_PULL",
        expression: str = "*",
        property_names: Sequence[str] = (),
        max_num: int = 32,
        per_broker_positions: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        **params: Any,
    ) -> dict[str, Any]:
        """Pull every queue of ``topic`` from offset 0 until ``expected`` messages or the deadline.

        With ``per_broker_positions`` (the default) positions are kept per broker and
        queue, working around the client's ``topic@queueId`` bookkeeping (which reads one
        broker's queue N only); False runs the client's own bookkeeping.
        """
        return self.run(
            "pull",
            timeout_s=timeout_s,
            namesrv=namesrv,
            topic=topic,
            expected=expected,
            group=group,
            expression=expression,
            property_names=list(property_names),
            max_num=max_num,
            per_broker_positions=per_broker_positions,
            **params,
        )

    def push(
        self,
        *,
        namesrv: str,
        topic: str,
        group: str,
        expected: int | None,
        expression: str = "*",
        property_names: Sequence[str] = (),
        thread_count: int = 4,
        settle_s: float = 0.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        **params: Any,
    ) -> dict[str, Any]:
        """Consume with a push consumer in ``group`` until ``expected`` messages, then shut down.

        Keeps consuming ``settle_s`` more seconds (to see duplicates or strays), or until
        the deadline if ``expected`` is None. The clean shutdown commits the offsets;
        ``done`` has ``shutdown_s``.
        """
        return self.run(
            "push",
            timeout_s=timeout_s,
            namesrv=namesrv,
            topic=topic,
            group=group,
            expected=expected,
            expression=expression,
            property_names=list(property_names),
            thread_count=thread_count,
            settle_s=settle_s,
            **params,
        )
