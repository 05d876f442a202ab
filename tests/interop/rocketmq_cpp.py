"""Run PyPI ``rocketmq`` 0.4.4 (Apache's C++ client core, librocketmq) against a cluster.

Every operation runs in a child process of the interpreter that has ``rocketmq``
(this file is also the child's script), with its own HOME (the C++ core writes
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
- ``{"event": "message", ...}`` per message received (see ``_message_json``; a pull's
  also name their ``broker``);
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
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

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
_EXIT_IMPORT_ERROR = 3
_EXIT_FAILED = 1
_RETRY_BACKOFF_S = 0.05


# ---------------------------------------------------------------------------- parent side


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
        [python, "-I", str(Path(__file__).resolve()), op, json.dumps(params)],
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
        ``send_retries`` times (see ``_send``). Stops at the first send given up unless
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


# ---------------------------------------------------------------------------- child side
# stdlib and rocketmq only: the child runs with -I, without pymq or the tests on its path


class _Out:
    """JSON lines on a private copy of stdout; fd 1 goes to stderr for the C++ core."""

    def __init__(self) -> None:
        self._file: TextIO = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields})
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": str(exc)}


def _message_json(msg: Any, property_names: Sequence[str]) -> dict[str, Any]:
    """What a RecvMessage exposes; valid only while the client holds the message.

    ``msg_id`` is the client's id of the message: the producer's UNIQ_KEY when it set one.
    """
    names = ["UNIQ_KEY", *(n for n in property_names if n != "UNIQ_KEY")]
    return {
        "topic": _text(msg.topic),
        "msg_id": _text(msg.id),
        "queue_id": msg.queue_id,
        "queue_offset": msg.queue_offset,
        "commit_log_offset": msg.commit_log_offset,
        "body": _text(msg.body),
        "keys": _text(msg.keys),
        "tags": _text(msg.tags),
        "properties": {n: _text(msg.get_property(n)) for n in names},
        "reconsume_times": msg.reconsume_times,
        "born_timestamp": msg.born_timestamp,
        "store_timestamp": msg.store_timestamp,
    }


def _send(out: _Out, producer: Any, msg: Any, i: int, *, retries: int, deadline: float) -> Any:
    """send_sync, again after a failure whose attempts all ended before reaching a broker.

    The client's own 5 attempts (across brokers) can all fail within a millisecond when
    its connection table lock is busy (a heartbeat connecting to a broker): its
    ``try_lock_for`` returns at once and the send ends in "No route info of this topic"
    (apache/rocketmq-client-cpp#455). That message is also its last word after sends that
    timed out and may have been stored: each retry is reported (``retry`` events), so a
    test can tell such a duplicate from a server fault.
    """
    from rocketmq.exceptions import ProducerSendSyncFailed

    attempt = 0
    while True:
        try:
            return producer.send_sync(msg)
        except ProducerSendSyncFailed as exc:
            attempt += 1
            if attempt > retries or time.monotonic() > deadline:
                raise
            if "No route info" not in str(exc):
                raise
            out.emit("retry", i=i, attempt=attempt, **_error(exc))
            time.sleep(_RETRY_BACKOFF_S * attempt)


def _op_produce(out: _Out, p: Mapping[str, Any], deadline: float) -> dict[str, Any]:
    from rocketmq.client import Message, Producer
    from rocketmq.exceptions import RocketMQException

    producer = Producer(p["group"], timeout=p["send_timeout_ms"])
    producer.set_namesrv_addr(p["namesrv"])
    producer.start()
    tags: list[str] = p["tags"] or [""]
    sent = failed = 0
    error: dict[str, str] | None = None
    for i in range(p["count"]):
        if time.monotonic() > deadline:
            error = {"type": "Deadline", "message": f"deadline passed after {sent} sends"}
            break
        msg = Message(p["topic"])
        if p["keys"]:
            msg.set_keys(p["keys"].format(i=i))
        if tags[i % len(tags)]:
            msg.set_tags(tags[i % len(tags)])
        msg.set_body(p["body"].format(i=i))
        for name, pattern in p["properties"].items():
            msg.set_property(name, pattern.format(i=i))
        try:
            res = _send(out, producer, msg, i, retries=p["send_retries"], deadline=deadline)
        except RocketMQException as exc:
            failed += 1
            error = _error(exc)
            out.emit("send_failed", i=i, **error)
            if p.get("stop_on_error", True):
                break
            continue
        sent += 1
        out.emit("sent", i=i, status=res.status.name, msg_id=res.msg_id, offset=res.offset)
    producer.shutdown()
    return {"ok": error is None, "error": error, "sent": sent, "failed": failed}


def _op_pull(out: _Out, p: Mapping[str, Any], deadline: float) -> dict[str, Any]:
    from rocketmq.client import PullConsumer
    from rocketmq.exceptions import RocketMQException

    class Consumer(PullConsumer):  # type: ignore[misc]
        """Positions per (broker, topic, queue id) through the client's own override points;
        the queue being read is the one last given to them."""

        def __init__(self, group: str) -> None:
            super().__init__(group)
            self.positions: dict[str, int] = {}
            self.current = ("", -1)

        def _key(self, mq: Any) -> str:
            broker = _text(mq.brokerName) if p["per_broker_positions"] else "*"
            return f"{broker}@{_text(mq.topic)}@{mq.queueId}"

        def get_message_queue_offset(self, mq: Any) -> int:
            self.current = (_text(mq.brokerName), mq.queueId)
            offset = self.positions.get(self._key(mq), 0)
            out.emit("queue", broker=self.current[0], queue_id=mq.queueId, offset=offset)
            return offset

        def set_message_queue_offset(self, mq: Any, offset: int) -> None:
            self.current = (_text(mq.brokerName), mq.queueId)
            self.positions[self._key(mq)] = offset

    consumer = Consumer(p["group"])
    consumer.set_namesrv_addr(p["namesrv"])
    consumer.start()
    received = passes = 0
    error: dict[str, str] | None = None
    while received < p["expected"] and time.monotonic() < deadline:
        passes += 1
        got = 0
        try:
            for msg in consumer.pull(p["topic"], p["expression"], p["max_num"]):
                fields = _message_json(msg, p["property_names"])
                out.emit("message", broker=consumer.current[0], **fields)
                got += 1
        except RocketMQException as exc:  # e.g. no route yet: retried until the deadline
            error = _error(exc)
        else:
            error = None
        received += got
        if not got:
            time.sleep(0.1)
    if received < p["expected"] and error is None:
        error = {
            "type": "Deadline",
            "message": f"{received} of {p['expected']} messages from "
            f"{len(consumer.positions)} queues (none: no route for the topic?)",
        }
    consumer.shutdown()
    return {
        "ok": error is None,
        "error": error,
        "received": received,
        "passes": passes,
        "positions": consumer.positions,
    }


def _op_push(out: _Out, p: Mapping[str, Any], deadline: float) -> dict[str, Any]:
    from rocketmq.client import PushConsumer

    expected: int | None = p["expected"]
    lock = threading.Lock()
    reached = threading.Event()
    count = 0
    callback_errors: list[dict[str, str]] = []

    def on_message(msg: Any) -> None:
        # runs on the C++ core's threads; an exception here would be printed and the
        # message still acknowledged (the binding's callback returns 0), so none escapes
        nonlocal count
        try:
            fields = _message_json(msg, p["property_names"])
        except (UnicodeError, ValueError, TypeError) as exc:
            callback_errors.append(_error(exc))
            return
        out.emit("message", **fields)
        with lock:
            count += 1
            if expected is not None and count >= expected:
                reached.set()

    consumer = PushConsumer(p["group"])
    consumer.set_namesrv_addr(p["namesrv"])
    consumer.set_thread_count(p["thread_count"])
    consumer.subscribe(p["topic"], on_message, p["expression"])
    consumer.start()
    reached.wait(max(0.0, deadline - time.monotonic()))
    if reached.is_set() and p["settle_s"] > 0:
        time.sleep(min(p["settle_s"], max(0.0, deadline - time.monotonic())))
    t0 = time.monotonic()
    consumer.shutdown()  # persists the consumed offsets to the brokers
    shutdown_s = round(time.monotonic() - t0, 3)
    with lock:
        received = count
    error: dict[str, str] | None = None
    if callback_errors:
        error = callback_errors[0]
    elif expected is not None and received < expected:
        error = {"type": "Deadline", "message": f"{received} of {expected} messages"}
    return {"ok": error is None, "error": error, "received": received, "shutdown_s": shutdown_s}


def _child_main(argv: Sequence[str]) -> int:
    out = _Out()
    op, params = argv[0], json.loads(argv[1])
    try:
        import rocketmq.client  # noqa: F401 - loads librocketmq.so
    except (ImportError, OSError) as exc:
        out.emit("done", ok=False, error=_error(exc))
        return _EXIT_IMPORT_ERROR
    from rocketmq.exceptions import RocketMQException

    deadline = time.monotonic() + float(params["deadline_s"])
    ops = {"produce": _op_produce, "pull": _op_pull, "push": _op_push}
    try:
        summary = ops[op](out, params, deadline)
    except RocketMQException as exc:  # start() or a setter refused
        summary = {"ok": False, "error": _error(exc)}
    except Exception as exc:
        # a defect of this runner: reported like the client's failures, and then the same
        # exit without finalizers (a PushConsumer never started hangs the exit)
        logging.getLogger("rocketmq_cpp").exception("%s failed", op)
        summary = {"ok": False, "error": {"type": "RunnerError", "message": repr(exc)}}
    out.emit("done", **summary)
    # the client's objects shut down again in __del__ and its threads may outlive them:
    # leave without running finalizers, the report is out
    sys.stderr.flush()
    os._exit(0 if summary["ok"] else _EXIT_FAILED)


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
