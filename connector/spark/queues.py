"""Which queues a read covers and where it starts and ends, asked of the cluster.

Runs on the driver only. What to read is ``topic`` (named topics),
``subscribePattern`` (every user topic whose name the regex matches in full,
asked of the NameServer each time) or ``assign`` (exactly the named queues).
Where to start, highest precedence first, as Kafka's source:
``startingTimestamp``, ``startingOffsetsByTimestamp``, ``startingOffsets``;
the batch end likewise with ``endingTimestamp``,
``endingOffsetsByTimestamp``, ``endingOffsets``.

A timestamp resolves to the first offset stored at or after it (the broker's
SEARCH_OFFSET_BY_TIMESTAMP answers the queue's max offset when every message
is older). At the start, such a queue follows
``startingOffsetsByTimestampStrategy``: ``error`` fails naming it, ``latest``
starts at its end; a queue holding no message at all starts at its end either
way (Kafka would fail there too, but pymq's batch sends leave many queues
empty). At the end, the queue simply ends where it ends.
Per-queue JSON (offsets or timestamps by timestamp) must name every queue
read, as in Kafka; for ``startingOffsets``/``endingOffsets`` JSON a queue not
named starts at its earliest / ends at its latest offset (pymq's rule since
its first release, kept).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connector.errors import ConfigError, InvalidOffsetError, TopicNotExistError
from connector.protocol.message import MessageQueue
from connector.protocol.names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    is_system_topic,
)
from connector.spark.options import ReadOptions

if TYPE_CHECKING:
    from connector.client.consumer import PullConsumer

__all__ = ["Key", "QueueFinder", "is_user_topic", "pick_offset", "refuse_unrouted"]

Key = tuple[str, str, int]  # (topic, broker name, queue id)


def is_user_topic(topic: str) -> bool:
    """Not a broker-managed topic (TBW102, RMQ_SYS_*, schedule, retry and DLQ topics)."""
    return not (
        is_system_topic(topic)
        or topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX, "SCHEDULE_TOPIC_"))
    )


def pick_offset(
    spec: str | dict[str, Any], topic: str, broker: str, qid: int, lo: int, hi: int
) -> int:
    """``earliest`` -> lo, ``latest`` -> hi, JSON -> its value (-2 earliest, -1 latest)."""
    if spec == "earliest":
        return lo
    if spec == "latest":
        return hi
    assert isinstance(spec, dict)
    value = spec.get(topic, {}).get(broker, {}).get(str(qid))
    if value is None:
        return lo  # a queue the JSON does not name: from its start (as Kafka's source)
    return {-2: lo, -1: hi}.get(int(value), int(value))


def refuse_unrouted(gone: set[str]) -> None:
    """Named topics (``topic``, ``assign``) without a route end a read at its start."""
    if gone:
        raise TopicNotExistError(f"No route info of this topic: {', '.join(sorted(gone))}")


def _name(key: Key) -> str:
    return f"{key[0]}:{key[1]}:{key[2]}"


def _per_queue(spec: dict[str, Any], keys: list[Key], option: str) -> dict[Key, int]:
    """Per-queue JSON that must name exactly the queues read (Kafka's rule)."""
    named = {
        (t, b, int(q)): int(v)
        for t, bs in spec.items()
        for b, qs in bs.items()
        for q, v in qs.items()
    }
    missing = sorted(set(keys) - set(named))
    unknown = sorted(set(named) - set(keys))
    if missing or unknown:
        parts = []
        if missing:
            parts.append("it does not name " + ", ".join(map(_name, missing)))
        if unknown:
            parts.append("no such queue is read: " + ", ".join(map(_name, unknown)))
        raise ConfigError(f"option {option}: " + "; ".join(parts))
    return named


class QueueFinder:
    """The queues of a read and their offsets, through one ``PullConsumer``."""

    def __init__(self, opts: ReadOptions, consumer: PullConsumer) -> None:
        self.opts = opts
        self.consumer = consumer

    def topics(self) -> list[str]:
        """The topics read now: named ones, or the user topics the pattern matches."""
        if self.opts.assign is not None:
            return sorted(self.opts.assign)
        if self.opts.pattern is None:
            return list(self.opts.topics)
        listed = self.consumer.namesrv.topic_list()
        return sorted(t for t in listed if is_user_topic(t) and self.opts.pattern.fullmatch(t))

    def queues(self) -> tuple[list[MessageQueue], set[str], set[str]]:
        """Every queue read now, the topics that have a route, and the named topics
        (``topic``, ``assign``) that have none.

        A topic the pattern matched but whose route went away before it was asked for
        was deleted in between: it is left out, not reported.
        """
        found: list[MessageQueue] = []
        routed: set[str] = set()
        gone: set[str] = set()
        for topic in self.topics():
            try:
                mqs = self.consumer.fetch_queues(topic)
            except TopicNotExistError:
                if self.opts.pattern is None:
                    gone.add(topic)
                continue
            routed.add(topic)
            if self.opts.assign is not None:
                wanted = self.opts.assign[topic]
                mqs = [mq for mq in mqs if mq.queue_id in wanted.get(mq.broker_name, ())]
            found += mqs
        return found, routed, gone

    def check_assigned(self, have: set[Key]) -> None:
        """``assign`` names only queues that exist (at the start of a read)."""
        if self.opts.assign is None:
            return
        named = {
            (t, b, q) for t, bs in self.opts.assign.items() for b, qs in bs.items() for q in qs
        }
        if missing := sorted(named - have):
            raise ConfigError("option assign: no such queue " + ", ".join(map(_name, missing)))

    def bounds(self, queues: list[MessageQueue]) -> dict[Key, tuple[int, int]]:
        """(min, max) offset of every queue."""
        return {
            (mq.topic, mq.broker_name, mq.queue_id): (
                self.consumer.min_offset(mq),
                self.consumer.max_offset(mq),
            )
            for mq in queues
        }

    def _search(self, key: Key, ts: int) -> tuple[int, bool]:
        """The first offset stored at or after ``ts``, and whether every message is older."""
        mq = MessageQueue(*key)
        offset = int(self.consumer.search_offset(mq, ts))
        # the broker answers the max offset when no message is that new; asked after the
        # search, a max offset still equal to the answer means none was
        return offset, offset >= self.consumer.max_offset(mq)

    def starts(self, bounds: dict[Key, tuple[int, int]]) -> dict[Key, int]:
        """Where each queue starts, by the starting options' precedence."""
        opts = self.opts
        if opts.starting_timestamp is None and opts.starting_by_timestamp is None:
            return {k: pick_offset(opts.starting, *k, lo, hi) for k, (lo, hi) in bounds.items()}
        if opts.starting_timestamp is not None:
            times = dict.fromkeys(bounds, opts.starting_timestamp)
            option = "startingTimestamp"
        else:
            assert opts.starting_by_timestamp is not None
            option = "startingOffsetsByTimestamp"
            times = _per_queue(opts.starting_by_timestamp, sorted(bounds), option)
        out = {}
        for key, ts in times.items():
            offset, past_end = self._search(key, ts)
            lo, hi = bounds[key]
            # a queue with no message at all has nothing a start at its end could miss
            if past_end and hi > lo and opts.starting_timestamp_strategy == "error":
                raise InvalidOffsetError(
                    f"{option}: queue {_name(key)} has no message stored at or after {ts} ms"
                    f" (it ends at offset {offset}); startingOffsetsByTimestampStrategy=latest"
                    " starts such a queue at its end"
                )
            out[key] = offset
        return out

    def ends(self, bounds: dict[Key, tuple[int, int]]) -> dict[Key, int]:
        """Where each queue ends (batch reads), by the ending options' precedence."""
        opts = self.opts
        if opts.ending_timestamp is not None:
            times = dict.fromkeys(bounds, opts.ending_timestamp)
        elif opts.ending_by_timestamp is not None:
            times = _per_queue(opts.ending_by_timestamp, sorted(bounds), "endingOffsetsByTimestamp")
        else:
            return {k: pick_offset(opts.ending, *k, hi, hi) for k, (_, hi) in bounds.items()}
        return {key: self._search(key, ts)[0] for key, ts in times.items()}
