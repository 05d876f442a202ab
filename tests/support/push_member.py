"""One push consumer in a process of its own, for the group tests (killed with -9).

argv[1] is JSON: namesrv, group, topic, expression, orderly, settings (PushConsumer
keywords), instance_name, offset_store_dir, consume_delay_s. stdout gets one JSON
object a line, flushed each: ``{"event": "owned", "queues": [...]}`` whenever the
queues owned change, ``{"event": "msg", "body", "queue", "offset", "reconsume",
"tags", "topic", "t"}`` per message consumed (``t``: wall clock, s),
``{"event": "stopped"}`` after a clean shutdown (SIGTERM).
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from typing import Any

from connector import ConsumeOrderlyStatus, ConsumeStatus, PushConsumer

_out = threading.Lock()


def emit(**event: Any) -> None:
    with _out:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    p = json.loads(sys.argv[1])
    delay = float(p.get("consume_delay_s", 0.0))
    orderly = bool(p.get("orderly", False))

    def listener(msgs: list[Any], context: Any) -> Any:
        for m in msgs:
            if delay:
                time.sleep(delay)
            emit(
                event="msg", body=m.body.decode(), offset=m.queue_offset, tags=m.tags,
                queue=f"{context.queue.topic}@{context.queue.broker_name}@{context.queue.queue_id}",
                reconsume=m.reconsume_times, topic=m.topic, t=time.time(),
            )  # fmt: skip
        return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        group=p["group"], namesrv=p["namesrv"], listener=listener, orderly=orderly,
        instance_name=p.get("instance_name"), offset_store_dir=p.get("offset_store_dir"),
        **p.get("settings", {}),
    )  # fmt: skip
    consumer.subscribe(p["topic"], p.get("expression", "*"))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer.start()
    owned: list[str] = []
    while not stop.wait(0.05):
        now = [
            f"{q.topic}@{q.broker_name}@{q.queue_id}"
            for q in consumer.owned_queues()
            if q.topic == p["topic"]
        ]
        if now != owned:
            owned = now
            emit(event="owned", queues=owned, client_id=consumer.client_id)
    consumer.shutdown()
    emit(event="stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
