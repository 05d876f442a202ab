"""Delayed delivery: SCHEDULE_TOPIC_XXXX queue (level - 1) -> the real topic, when due.

RocketMQ's ScheduleMessageService. A delayed message is stored in the
schedule queue of its level with its delivery time as the ConsumeQueue
tagsCode, so finding what is due reads 20-byte entries, not records. Entries
of one level are in delivery order (one fixed delay per level), so each level
is a cursor: deliver the head while it is due, then sleep until the next one.

Progress (level -> next schedule-queue offset) is ``config/delayOffset.json``,
written atomically after each pass. A crash can lose the last pass's
progress; on restart the first pass checks each due message's UNIQ_KEY in
the real topic (the index) and skips those already delivered, so every
delayed message is delivered once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker.store.files import load_json, save_json
from broker.store.inner import MessageInner, index_keys
from broker.store.store import MessageStore
from connector.protocol.hashing import tags_code
from connector.protocol.message import MessageExt
from connector.protocol.msgid import encode_host
from connector.protocol.names import SCHEDULE_TOPIC
from connector.protocol.properties import PropertyKeys, encode_properties

__all__ = ["ScheduleMessageService"]

log = logging.getLogger(__name__)
P = PropertyKeys
_CHUNK = 256
_IDLE_S = 1.0
_RETRY_S = 1.0


class ScheduleMessageService:
    def __init__(
        self,
        store: MessageStore,
        delay_levels_ms: tuple[int, ...],
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.delay_levels_ms = delay_levels_ms
        self.clock = clock
        self.path: Path = store.config.config_dir / "delayOffset.json"
        self.offsets: dict[int, int] = {}
        self.delivered = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first_pass = True

    def load(self) -> None:
        raw = load_json(self.path)
        table = raw.get("offset_table", {}) if isinstance(raw, dict) else {}
        self.offsets = {int(k): int(v) for k, v in table.items()}

    def persist(self) -> None:
        save_json(self.path, {"offset_table": {str(k): v for k, v in sorted(self.offsets.items())}})

    def start(self) -> None:
        self.load()
        self.store.arrival_listeners.append(self._on_arrival)
        self._thread = threading.Thread(
            target=self._run, name="ScheduleMessageService", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        if self._on_arrival in self.store.arrival_listeners:
            self.store.arrival_listeners.remove(self._on_arrival)

    def _on_arrival(self, topic: str, _queue_id: int, _max_offset: int) -> None:
        if topic == SCHEDULE_TOPIC:
            self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                next_due_ms = self.deliver_due()
            except Exception:  # keep delivering other levels; the failure is logged
                log.exception("schedule pass failed; retrying in %.0f s", _RETRY_S)
                next_due_ms = int(self.clock() * 1000) + int(_RETRY_S * 1000)
            wait_s = _IDLE_S
            if next_due_ms is not None:
                wait_s = min(_IDLE_S, max(0.0, next_due_ms / 1000 - self.clock()))
            self._wake.wait(wait_s)

    def deliver_due(self) -> int | None:
        """Deliver every due message of every level; the next due time in ms, if any."""
        next_due: int | None = None
        changed = False
        for level in range(1, len(self.delay_levels_ms) + 1):
            due, moved = self._deliver_level(level)
            changed = changed or moved
            if due is not None and (next_due is None or due < next_due):
                next_due = due
        if changed:
            self.persist()
        self._first_pass = False
        return next_due

    def _deliver_level(self, level: int) -> tuple[int | None, bool]:
        cq = self.store.consume_queue(SCHEDULE_TOPIC, level - 1)
        if cq is None:
            return None, False
        start = self.offsets.get(level, 0)
        offset = max(start, cq.min_offset)
        while not self._stop.is_set():
            entries = cq.get_entries(offset, _CHUNK)
            if len(entries) == 0:
                break
            now_ms = int(self.clock() * 1000)
            for phys, size, deliver_at in zip(
                entries["offset"].tolist(),
                entries["size"].tolist(),
                entries["tags_code"].tolist(),
                strict=True,
            ):
                if deliver_at > now_ms:
                    self.offsets[level] = offset
                    return deliver_at, offset != start
                if not self._deliver(phys, size):
                    self.offsets[level] = offset
                    return now_ms + int(_RETRY_S * 1000), offset != start
                offset += 1
        self.offsets[level] = offset
        return None, offset != start

    def _deliver(self, phys: int, size: int) -> bool:
        """Re-append one due message to its real topic; False to retry it later."""
        msg = self.store.look_message_by_offset(phys, size, decompress=False)
        if msg is None:
            log.warning("schedule queue points at no message (offset %d); skipped", phys)
            return True
        inner = _delivery(msg)
        if inner is None:
            log.warning("delayed message at %d has no REAL_TOPIC/REAL_QID; skipped", phys)
            return True
        if self._first_pass and self._already_delivered(msg, inner.topic):
            return True
        put = self.store.put_message(inner)
        if not put.ok:
            log.warning("delivering delayed message at %d failed: %s", phys, put.status.value)
            return False
        self.delivered += 1
        return True

    def _already_delivered(self, msg: MessageExt, topic: str) -> bool:
        uniq = msg.properties.get(P.UNIQ_KEY)
        if not uniq or not self.store.config.message_index_enable:
            return False
        found = self.store.query_message(topic, uniq, 4, begin_ms=msg.store_timestamp)
        return any(m.store_timestamp >= msg.store_timestamp for m in found)


def _delivery(msg: MessageExt) -> MessageInner | None:
    props = dict(msg.properties)
    topic = props.pop(P.REAL_TOPIC, None)
    raw_qid = props.pop(P.REAL_QUEUE_ID, None)
    props.pop(P.DELAY_TIME_LEVEL, None)
    if topic is None or raw_qid is None or not raw_qid.isdigit():
        return None
    host, _, port = msg.born_host.rpartition(":")
    try:
        born_host = encode_host(host, int(port))
    except (ValueError, OSError):
        born_host = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
    return MessageInner(
        topic=topic,
        queue_id=int(raw_qid),
        body=msg.body,
        properties=encode_properties(props),
        tags_code=tags_code(props.get(P.TAGS)),
        keys=index_keys(props),
        flag=msg.flag,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=born_host,
        reconsume_times=msg.reconsume_times,
    )
