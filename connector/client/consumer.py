"""PullConsumer: read queues by offset, commit the group's progress to the brokers.

The application (or the Spark source) owns the offsets: ``pull(mq, offset)``
returns the messages from exactly that offset and ``next_begin_offset``;
``commit_offset`` stores a group's position on the broker so admin tools
show its lag. Pulls use the binary form (stored records byte for byte) and
decode them here; compressed bodies come back inflated.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from connector.client.namesrv import NameServerClient, parse_namesrv
from connector.client.results import PullResult
from connector.client.transport import ClientTransport, path
from connector.errors import InvalidOffsetError, PyMQError, TopicNotExistError
from connector.protocol.hashing import parse_tags
from connector.protocol.message import MessageQueue
from connector.protocol.names import validate_group, validate_topic
from connector.protocol.route import TopicRouteData
from connector.protocol.status import PullStatus
from connector.protocol.wire import (
    H_MAX_OFFSET,
    H_MIN_OFFSET,
    H_NEXT_BEGIN_OFFSET,
    H_STATUS,
    RECORDS_CONTENT_TYPE,
)

__all__ = ["PullConsumer"]

PERM_READ = 4
_RECORDS = {"accept": RECORDS_CONTENT_TYPE}


class PullConsumer:
    """Pull messages by queue offset. Thread-safe."""

    def __init__(
        self,
        *,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        timeout_ms: int = 3000,
    ) -> None:
        self.group = validate_group(group)
        self.transport = ClientTransport()
        self.namesrv = NameServerClient(parse_namesrv(namesrv), self.transport)
        self.timeout_ms = timeout_ms
        self._routes: dict[str, TopicRouteData] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> PullConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        self.transport.close()

    # -- routes ------------------------------------------------------------------------

    def _route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        validate_topic(topic)
        route = None if refresh else self._routes.get(topic)
        if route is None:
            route = self.namesrv.topic_route(topic)
            if route is None:
                raise TopicNotExistError(f"No route info of this topic: {topic}")
            with self._lock:
                self._routes[topic] = route
        return route

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of the topic, on every broker that has a master."""
        route = self._route(topic, refresh=True)
        masters = {b.broker_name for b in route.brokers if b.addrs.get("0")}
        out = [
            MessageQueue(topic, q.broker_name, i)
            for q in sorted(route.queues, key=lambda q: q.broker_name)
            if q.perm & PERM_READ and q.broker_name in masters
            for i in range(q.read_queue_nums)
        ]
        return out

    def _addr(self, mq: MessageQueue) -> str:
        for refresh in (False, True):
            route = self._route(mq.topic, refresh=refresh)
            for broker in route.brokers:
                if broker.broker_name == mq.broker_name and broker.addrs.get("0"):
                    return broker.addrs["0"]
        raise TopicNotExistError(f"broker {mq.broker_name} serves no queue of {mq.topic}")

    def _call(self, mq: MessageQueue, method: str, target: str, payload: object = None) -> object:
        try:
            return self.transport.call(
                self._addr(mq), method, target, payload, timeout_s=self.timeout_ms / 1000
            )
        except PyMQError as exc:
            if exc.retriable or exc.invalid_metadata:
                self._route(mq.topic, refresh=True)  # the broker may have moved
            raise

    # -- reads -------------------------------------------------------------------------

    def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        tags: str | None = None,
        wait_ms: int = 0,
    ) -> PullResult:
        """Messages of ``mq`` from ``offset``; ``wait_ms`` > 0 long-polls when none are new.

        An offset outside the queue is ``PullStatus.OFFSET_ILLEGAL`` with the
        offset to go on from in ``next_begin_offset`` (as in RocketMQ).
        """
        res = self.pull_records(mq, offset, max_nums, tags=tags, wait_ms=wait_ms)
        wanted = parse_tags(tags)
        # numba and numpy load with the first pull, not with ``import connector``
        from connector.protocol.pulled import decode_records  # noqa: PLC0415

        messages = decode_records(res.records)
        if wanted is not None:  # the broker filtered by tag hash; drop hash collisions
            messages = [m for m in messages if m.tags in wanted]
        status = res.status
        if status is PullStatus.FOUND and not messages:
            status = PullStatus.NO_MATCHED_MSG
        return PullResult(status, res.next_begin_offset, res.min_offset, res.max_offset, messages)

    def pull_records(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        tags: str | None = None,
        wait_ms: int = 0,
    ) -> PullResult:
        """As ``pull``, but the stored records stay undecoded in ``records``.

        The broker filters by tag hash only; records whose tag merely shares
        a hash are still there, for the caller to drop (``pull`` does).
        """
        query = {"offset": offset, "max": max_nums, "tags": tags, "wait_ms": wait_ms or None}
        target = path("topics", mq.topic, "queues", mq.queue_id, "messages", query=query)
        addr = self._addr(mq)
        timeout_s = (self.timeout_ms + wait_ms) / 1000
        try:
            resp = self.transport.request(addr, "GET", target, None, _RECORDS, timeout_s=timeout_s)
        except InvalidOffsetError as exc:
            f = exc.fields
            return PullResult(
                PullStatus.OFFSET_ILLEGAL,
                int(f.get("next_begin_offset", 0)),
                int(f.get("min_offset", 0)),
                int(f.get("max_offset", 0)),
            )
        except PyMQError as exc:
            if exc.retriable or exc.invalid_metadata:
                self._route(mq.topic, refresh=True)
            raise
        h = resp.headers
        return PullResult(
            PullStatus(h[H_STATUS]),
            int(h[H_NEXT_BEGIN_OFFSET]),
            int(h[H_MIN_OFFSET]),
            int(h[H_MAX_OFFSET]),
            records=resp.body,
        )

    def min_offset(self, mq: MessageQueue) -> int:
        raw = self._call(mq, "GET", path("topics", mq.topic, "queues", mq.queue_id, "offsets"))
        assert isinstance(raw, dict)
        return int(raw["min_offset"])

    def max_offset(self, mq: MessageQueue) -> int:
        raw = self._call(mq, "GET", path("topics", mq.topic, "queues", mq.queue_id, "offsets"))
        assert isinstance(raw, dict)
        return int(raw["max_offset"])

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms``."""
        target = path(
            "topics",
            mq.topic,
            "queues",
            mq.queue_id,
            "offset-by-time",
            query={"timestamp": timestamp_ms},
        )
        raw = self._call(mq, "GET", target)
        assert isinstance(raw, dict)
        return int(raw["offset"])

    # -- group offsets -----------------------------------------------------------------

    def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        """Store the group's position in ``mq`` on its broker."""
        target = path("consumers", self.group, "offsets", mq.topic, mq.queue_id)
        self._call(mq, "PUT", target, {"offset": offset})

    def fetch_offset(self, mq: MessageQueue) -> int:
        """The group's committed position in ``mq``, or -1 if it never committed."""
        target = path("consumers", self.group, "offsets", mq.topic, mq.queue_id)
        try:
            raw = self._call(mq, "GET", target)
        except PyMQError as exc:
            if exc.code == "OFFSET_NOT_EXIST":
                return -1
            raise
        assert isinstance(raw, dict)
        return int(raw["offset"])
