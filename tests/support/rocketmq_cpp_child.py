"""The child of ``rocketmq_cpp.run_cpp``: one operation of PyPI ``rocketmq`` 0.4.4.

``python -I rocketmq_cpp_child.py OP PARAMS_JSON``. Standard library and ``rocketmq``
only: it runs isolated, without pymq or the tests on its path. It writes the JSON lines
that ``rocketmq_cpp`` documents, then exits without finalizers (0 when the operation
succeeded, 1 when not, 3 when ``rocketmq`` does not import).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

_EXIT_IMPORT_ERROR = 3
_EXIT_FAILED = 1
_RETRY_BACKOFF_S = 0.05


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


def _credentials(client: Any, p: Mapping[str, Any]) -> None:
    """``credentials``: [accessKey, secretKey]: the client signs its requests (ACL)."""
    if p.get("credentials"):
        access_key, secret_key = p["credentials"]
        client.set_session_credentials(access_key, secret_key, "ALIYUN")


def _op_produce(out: _Out, p: Mapping[str, Any], deadline: float) -> dict[str, Any]:
    from rocketmq.client import Message, Producer
    from rocketmq.exceptions import RocketMQException

    producer = Producer(p["group"], timeout=p["send_timeout_ms"])
    producer.set_namesrv_addr(p["namesrv"])
    _credentials(producer, p)
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
    _credentials(consumer, p)
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
    seen: set[str] = set()

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
        delay = p.get("consume_delay_s", 0.0)
        if delay:  # a slow listener: the test acts while the consumer is busy
            time.sleep(delay)
        with lock:
            if p.get("count_distinct"):  # redeliveries (at least once) do not count
                if fields["msg_id"] in seen:
                    return
                seen.add(fields["msg_id"])
            count += 1
            if expected is not None and count >= expected:
                reached.set()

    consumer = PushConsumer(p["group"], orderly=bool(p.get("orderly", False)))
    consumer.set_namesrv_addr(p["namesrv"])
    _credentials(consumer, p)
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
