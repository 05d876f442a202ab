"""PushConsumer (RocketMQ's ``DefaultMQPushConsumer``): subscribe, and a listener is
called with the messages of the queues this member of the group owns.

    def listener(msgs, context):
        return ConsumeStatus.CONSUME_SUCCESS      # or RECONSUME_LATER

    with PushConsumer(group="g1", namesrv="127.0.0.1:9876", listener=listener) as c:
        c.subscribe("T", "TagA || TagB")

How it runs (threads: one service loop, one scheduler, the consume pool, and
the connections' reader threads that receive pull answers):

- **Membership**: a heartbeat to every master of the subscribed topics (each
  subscription and, clustering, ``%RETRY%group``) at start and every
  ``heartbeat_broker_interval_ms``; the brokers call back with
  NOTIFY_CONSUMER_IDS_CHANGED when the group changes, which rebalances at once.
- **Rebalance** (every ``rebalance_interval_ms`` and on notice): per topic,
  the group's client ids from a broker and the queues from the route, this
  member's share by the ``allocate`` strategy (``connector.client.push.allocate``;
  broadcasting: every queue). A new queue starts from the committed offset
  (else ``consume_from_where``); a queue given up stops pulling, waits
  (bounded) for the batches in the listener, commits its offset, and only then
  is forgotten (orderly: and unlocked on the broker).
- **Pulls**: one long poll in flight per queue (``pull_async``: no thread per
  queue), of ``pull_batch_size`` messages (by default adapted per queue: 32
  while it is caught up, growing to 1000 while answers leave more behind,
  ``PushSettings.pull_batch``); an answer's messages go to the queue's
  ``ProcessQueue`` and to the consume pool, and the next pull goes out, unless
  the queue holds more than ``pull_threshold_for_queue`` messages or
  ``pull_threshold_size_for_queue_mib`` of bodies: then it waits (flow control).
- **Consumption** (``connector.client.push.consume``): concurrent batches of
  ``consume_message_batch_max_size``, or orderly (one thread a queue, only
  while the broker's lock is held).
- **Consume timeout** (concurrent): every ``consume_timeout_minutes``, a message
  that holds its queue's offset back and has been in the listener longer than
  that is sent back (delay level 3) and taken out of the queue, so the offset
  moves (RocketMQ's cleanExpireMsg).
- **Offsets**: in memory as batches finish (the smallest offset still
  pending), persisted every ``persist_consumer_offset_interval_ms`` and at
  shutdown: on the brokers (clustering) or a local file (broadcasting).
- **The brokers' calls** (``connector.client.push.answers``):
  GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, RESET_CONSUMER_CLIENT_OFFSET.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from connector.client.connection import RemotingConnection
from connector.client.consumer import PullConsumer
from connector.client.instance import ClientInstance
from connector.client.push.allocate import allocate
from connector.client.push.brokers import GroupBrokers
from connector.client.push.consume import ConsumeService
from connector.client.push.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
)
from connector.client.push.pool import ConsumePool
from connector.client.push.process_queue import ProcessQueue
from connector.client.push.scheduler import Scheduler
from connector.client.push.settings import DEFAULT_OFFSET_STORE_DIR, PushSettings
from connector.client.results import PullResult
from connector.errors import ConfigError, PyMQError
from connector.protocol.hashing import parse_tags, tags_code
from connector.protocol.message import MessageExt, MessageQueue
from connector.protocol.names import validate_group, validate_topic
from connector.protocol.properties import PropertyKeys
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.protocol.status import PullStatus

__all__ = ["Listener", "PushConsumer"]

log = logging.getLogger(__name__)
Listener = Callable[[list[MessageExt], Any], Any]
RETRY_PREFIX = "%RETRY%"
_TICK_S = 0.1
_FLOW_CONTROL_DELAY_S = 0.05
_NOT_LOCKED_DELAY_S = 0.5
_DRAIN_TIMEOUT_S = 10.0
# a subscribed topic (or the retry topic, made by the first heartbeat) the NameServer
# had no route for is asked for this often, not only at the 30 s refresh: until then
# no broker may have heard of this consumer
_MISSING_ROUTE_RETRY_S = 0.5
_UNLOCKED_SHARE_RETRY_S = 0.5


class PushConsumer:
    """A push consumer of a group. Settings: see ``PushSettings`` (RocketMQ's names).

    ``instance_name`` makes the client id (``host@instance_name``); give a
    broadcasting consumer a stable one to keep its offset file across restarts
    (default: the process id and this object's). ``access_key`` /
    ``secret_key`` / ``tls`` / ``tls_ca_file`` as every pymq client.
    """

    def __init__(
        self,
        *,
        group: str,
        listener: Listener,
        namesrv: str | Sequence[str] | None = None,
        instance_name: str | None = None,
        timeout_ms: int = 3000,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: bool = False,
        tls_ca_file: str | None = None,
        offset_store_dir: str | Path | None = None,
        **settings: Any,
    ) -> None:
        self.group = validate_group(group)
        if not callable(listener):
            raise ConfigError("listener must be callable: listener(msgs, context)")
        self.listener = listener
        self.settings = PushSettings(
            offset_store_dir=Path(offset_store_dir or DEFAULT_OFFSET_STORE_DIR), **settings
        )
        self.timeout_ms = timeout_ms
        self._started = False
        self.subscriptions: dict[str, str] = {}  # topic -> expression
        self.instance = ClientInstance.join(
            self, namesrv=namesrv, instance_name=instance_name,
            access_key=access_key, secret_key=secret_key, tls=tls, tls_ca_file=tls_ca_file,
            consumer_group=self.group, listen=True,
            heartbeat_broker_interval_ms=self.settings.heartbeat_broker_interval_ms,
        )  # fmt: skip
        self.instance_name = self.instance.instance_name
        self.client_id = self.instance.client_id
        self.puller = PullConsumer(
            group=group, namesrv=namesrv, timeout_ms=timeout_ms, read_ahead=False,
            access_key=access_key, secret_key=secret_key, tls=tls, tls_ca_file=tls_ca_file,
            instance_name=self.instance_name,
        )  # fmt: skip
        self.retry_topic = RETRY_PREFIX + self.group
        self.offsets: OffsetStore = self._offset_store()
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self._table_lock = threading.RLock()
        self._rebalance_lock = threading.Lock()  # one rebalance (or offset reset) at a time
        self.brokers = GroupBrokers(self.instance, group=self.group, timeout_ms=timeout_ms)
        self._start_on_subscribe = False  # entered as a context manager before subscribing
        self._stopping = False
        self._stop = threading.Event()
        self._rebalance_now = threading.Event()
        # orderly: part of this member's share was still locked by its last owner (which
        # lets go once its batches are done): rebalance again soon, not in 20 s
        self._unlocked_share = False
        self._service: threading.Thread | None = None
        self._scheduler: Scheduler | None = None
        self._pool: ConsumePool | None = None
        self._consume: ConsumeService | None = None
        self.start_timestamp_ms = 0

    def _offset_store(self) -> OffsetStore:
        if self.settings.clustering:
            return RemoteOffsetStore(self.puller.fetch_offset, self.puller.commit_offset)
        name = self.client_id.replace("/", "_").replace(os.sep, "_")
        path = self.settings.offset_store_dir / name / self.group / "offsets.json"
        return LocalFileOffsetStore(path)

    # -- the API -----------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*") -> None:
        """Consume ``topic``'s messages whose tag is in ``expression`` ("A || B", "*")."""
        validate_topic(topic)
        parse_tags(expression)
        self.subscriptions[topic] = expression or "*"
        if self._start_on_subscribe and not self._started:
            self.start()
        elif self._started:
            self.instance.heartbeat_all()
            self._rebalance_now.set()

    def start(self) -> PushConsumer:
        if self._started:
            return self
        if not self.subscriptions:
            raise ConfigError("subscribe to a topic before start()")
        if self.settings.clustering:
            self.subscriptions.setdefault(self.retry_topic, "*")
        self._started = True
        self.start_timestamp_ms = int(time.time() * 1000)
        s = self.settings
        self._pool = ConsumePool(s.consume_thread_max)
        self._scheduler = Scheduler("pymq-push-scheduler")
        self._consume = ConsumeService(self, self._pool, self._scheduler)
        for topic in list(self.subscriptions):
            self.brokers.refresh_route(topic)
        self.instance.heartbeat_all()
        self.rebalance()
        self._service = threading.Thread(target=self._run, name="pymq-push-service", daemon=True)
        self._service.start()
        return self

    def shutdown(self) -> None:
        """Stop pulling, let the batches in the listener finish (batches not started are
        left: they are pulled again), commit the offsets, unlock, leave the group."""
        if not self._started or self._stopping:
            self.instance.leave(self)
            self.puller.shutdown()
            return
        self._stopping = True
        self._stop.set()
        if self._service is not None:
            self._service.join(30)
        assert self._scheduler is not None and self._pool is not None
        self._scheduler.stop()
        with self._table_lock:
            pqs = dict(self.process_queues)
        for pq in pqs.values():
            pq.dropped = True
        self._pool.shutdown()
        self.offsets.persist(pqs)
        if self.settings.orderly and self.settings.clustering:
            self._unlock(list(pqs))
        self.instance.leave(self)  # UNREGISTER_CLIENT of the group to every broker
        self.puller.shutdown()

    def __enter__(self) -> PushConsumer:
        """Starts now if subscribed, else at the first ``subscribe`` in the block."""
        if self.subscriptions:
            return self.start()
        self._start_on_subscribe = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def owned_queues(self) -> list[MessageQueue]:
        """The queues this member consumes now (its retry topic's included), sorted."""
        with self._table_lock:
            return sorted(mq for mq, pq in self.process_queues.items() if not pq.dropped)

    # -- the service loop --------------------------------------------------------------

    def _run(self) -> None:
        s = self.settings
        now = time.monotonic()
        due = {
            "rebalance": now + s.rebalance_interval_ms / 1000,
            "heartbeat": now + s.heartbeat_broker_interval_ms / 1000,
            "persist": now + s.persist_consumer_offset_interval_ms / 1000,
            "lock": now + s.lock_renew_interval_ms / 1000,
            "missing": now + _MISSING_ROUTE_RETRY_S,
            "unlocked": now + _UNLOCKED_SHARE_RETRY_S,
            "expired": now + s.consume_timeout_s,
        }
        while not self._stop.is_set():
            notified = self._rebalance_now.wait(_TICK_S)
            if self._stop.is_set():
                return
            now = time.monotonic()
            try:
                if now >= due["missing"]:  # a topic without a route yet (being created)
                    due["missing"] = now + _MISSING_ROUTE_RETRY_S
                    if self.brokers.found_missing_routes(list(self.subscriptions)):
                        self.instance.heartbeat_all()
                        notified = True
                if now >= due["heartbeat"]:
                    due["heartbeat"] = now + s.heartbeat_broker_interval_ms / 1000
                    for topic in list(self.subscriptions):
                        self.brokers.refresh_route(topic)
                    self.instance.heartbeat_all()
                if self._unlocked_share and now >= due["unlocked"]:
                    due["unlocked"] = now + _UNLOCKED_SHARE_RETRY_S
                    notified = True
                if notified or now >= due["rebalance"]:
                    self._rebalance_now.clear()
                    due["rebalance"] = now + s.rebalance_interval_ms / 1000
                    self.rebalance()
                if now >= due["persist"]:
                    due["persist"] = now + s.persist_consumer_offset_interval_ms / 1000
                    self.offsets.persist(self.owned_queues())
                if now >= due["expired"]:  # RocketMQ runs it every consumeTimeout minutes
                    due["expired"] = now + s.consume_timeout_s
                    self.clean_expired()
                if s.orderly and s.clustering and now >= due["lock"]:
                    due["lock"] = now + s.lock_renew_interval_ms / 1000
                    self._lock(self.owned_queues())
            except Exception:  # a defect: logged, the loop goes on
                log.exception("the push consumer's service loop failed a round")

    def clean_expired(self) -> int:
        """Send back the messages in the listener over ``consume_timeout_minutes`` that
        hold their queue's offset back (concurrent consumption only: an orderly queue
        waits for its batch, as in RocketMQ); how many."""
        if self.settings.orderly or self._consume is None:
            return 0
        with self._table_lock:
            pqs = list(self.process_queues.items())
        return sum(self._consume.clean_expired(mq, pq) for mq, pq in pqs)

    # -- routes, heartbeats ------------------------------------------------------------

    def consumer_data(self) -> dict[str, Any] | None:
        """This consumer's entry of the instance's heartbeats: None before ``start`` and
        once shutting down (a member that consumes nothing must not count in the
        group's rebalance)."""
        if not self._started or self._stopping:
            return None
        subs = []
        for topic, expr in sorted(self.subscriptions.items()):
            tags = sorted(parse_tags(expr) or ())
            subs.append({
                "classFilterMode": False, "topic": topic, "subString": expr,
                "tagsSet": tags, "codeSet": [tags_code(t) for t in tags],
                "subVersion": self.start_timestamp_ms, "expressionType": "TAG",
            })  # fmt: skip
        return {
            "groupName": self.group, "consumeType": "CONSUME_PASSIVELY",
            "messageModel": self.settings.message_model,
            "consumeFromWhere": self.settings.consume_from_where,
            "subscriptionDataSet": subs, "unitMode": False,
        }  # fmt: skip

    def rebalance(self) -> None:
        """Take this member's share of every subscribed topic now (see the module)."""
        with self._rebalance_lock:
            self._unlocked_share = False
            new: list[MessageQueue] = []
            for topic in list(self.subscriptions):
                if self._stopping:
                    return
                try:
                    new += self._rebalance_topic(topic)
                except PyMQError as exc:
                    log.warning("rebalancing %s failed: %s", topic, exc)
            self._take(new)  # every topic's queries done: no pull of this share waits on them

    def reset_queue(self, mq: MessageQueue, offset: int) -> None:
        """Consume owned ``mq`` from ``offset`` (RESET_CONSUMER_CLIENT_OFFSET): given up
        as in a rebalance, its offset set and committed, then taken again."""
        with self._rebalance_lock:
            self._give_up(mq)
            self.offsets.update(mq, offset, increase_only=False)
            self.offsets.persist([mq])
            self.offsets.remove(mq)
            orderly = self.settings.orderly and self.settings.clustering
            if not orderly or mq in self._lock([mq], fresh=True):
                self._take([mq])

    def _rebalance_topic(self, topic: str) -> list[MessageQueue]:
        """Give up the queues of ``topic`` this member no longer owns; the queues it is
        to take (locked already, orderly), for ``_take``."""
        self.brokers.refresh_route(topic)
        queues = self.puller.fetch_queues(topic)
        if self.settings.clustering:
            cids = self.brokers.client_ids(topic)
            if not cids:
                return []  # the brokers do not know the group yet: keep what is owned
            mine = set(allocate(self.settings.allocate, self.client_id, queues, cids))
        else:
            mine = set(queues)
        with self._table_lock:
            owned = {mq for mq, pq in self.process_queues.items() if mq.topic == topic}
        for mq in sorted(owned - mine):
            self._give_up(mq)
        new = sorted(mine - owned)
        if new and self.settings.orderly and self.settings.clustering:
            held = self._lock(new, fresh=True)
            if len(held) < len(new):  # their last owner has not let go yet: ask again soon
                self._unlocked_share = True
            new = [mq for mq in new if mq in held]
        if owned != mine:
            log.info("%s owns %d queue(s) of %s", self.client_id, len(mine), topic)
        return new

    def _take(self, mqs: Sequence[MessageQueue]) -> None:
        """Consume ``mqs`` from their start offsets. Every start offset is found before
        the first pull: a queue's answers are consumed on the connection's reader
        thread, and the next queue's offset query would wait behind them (a start of
        8 queues took ~250 ms, each queue starting its pulls in turn)."""
        orderly = self.settings.orderly and self.settings.clustering
        starts: list[tuple[MessageQueue, int]] = []
        for mq in mqs:
            try:
                starts.append((mq, self._start_offset(mq)))
            except PyMQError as exc:
                log.warning("the start offset of %s could not be found: %s", mq, exc)
                if orderly:
                    self._unlock([mq])
        for mq, offset in starts:
            pq = ProcessQueue()
            if orderly:
                pq.locked, pq.last_lock_ms = True, time.monotonic() * 1000
            self.offsets.update(mq, offset, increase_only=False)
            with self._table_lock:
                self.process_queues[mq] = pq
            log.info("%s takes %s from offset %d", self.client_id, mq, offset)
            self._pull_later(mq, pq, offset, 0)

    def _start_offset(self, mq: MessageQueue) -> int:
        offset = self.offsets.read(mq)
        if offset >= 0:
            return offset
        where = self.settings.consume_from_where
        if mq.topic.startswith(RETRY_PREFIX) or where == "CONSUME_FROM_FIRST_OFFSET":
            return self.puller.min_offset(mq)
        if where == "CONSUME_FROM_TIMESTAMP":
            return self.puller.search_offset(mq, self.settings.timestamp_ms())
        return self.puller.max_offset(mq)

    def _give_up(self, mq: MessageQueue) -> None:
        """Stop consuming ``mq``: no more pulls, the batches in the listener finish
        (bounded), the offset is committed, then the queue is forgotten."""
        with self._table_lock:
            pq = self.process_queues.get(mq)
        if pq is None:
            return
        pq.dropped = True
        if not pq.wait_idle(_DRAIN_TIMEOUT_S):
            log.warning("%s still consuming after %.0f s: giving it up", mq, _DRAIN_TIMEOUT_S)
        self.offsets.persist([mq])
        log.info("%s gives up %s at offset %d", self.client_id, mq, self.offsets.get(mq))
        with self._table_lock:
            self.process_queues.pop(mq, None)
        self.offsets.remove(mq)
        if self.settings.orderly and self.settings.clustering:
            self._unlock([mq])

    # -- orderly: the brokers' queue locks ---------------------------------------------

    def _lock(self, mqs: Sequence[MessageQueue], *, fresh: bool = False) -> set[MessageQueue]:
        """Lock (renew) ``mqs``; the queues held. Owned queues learn whether they are."""
        held: set[MessageQueue] = set()
        for got in self.brokers.lock_call(RequestCode.LOCK_BATCH_MQ, mqs).values():
            held |= got
        if not fresh:
            now_ms = time.monotonic() * 1000
            with self._table_lock:
                for mq in mqs:
                    pq = self.process_queues.get(mq)
                    if pq is None:
                        continue
                    pq.locked = mq in held
                    if pq.locked:
                        pq.last_lock_ms = now_ms
                        if not pq.is_empty() and self._consume is not None:
                            self._consume.submit(mq, pq, [])  # held back while unlocked
        return held

    def _unlock(self, mqs: Sequence[MessageQueue]) -> None:
        if mqs:
            self.brokers.lock_call(RequestCode.UNLOCK_BATCH_MQ, mqs)

    def lock_valid(self, pq: ProcessQueue) -> bool:
        """Orderly: whether ``pq``'s broker lock is held and recent enough to trust."""
        if not self.settings.clustering:
            return True
        age_ms = time.monotonic() * 1000 - pq.last_lock_ms
        return pq.locked and age_ms < self.settings.lock_lost_after_ms

    # -- pulls -------------------------------------------------------------------------

    def _pull_later(self, mq: MessageQueue, pq: ProcessQueue, offset: int, delay_s: float) -> None:
        """Pull ``mq`` again in ``delay_s``; at once on this thread when 0 (a pull answer's
        reader thread sends the next pull itself: no hop to the scheduler's thread)."""
        if self._scheduler is None or self._stopping:
            return
        if delay_s <= 0:
            self._pull(mq, pq, offset)
        else:
            self._scheduler.call_later(delay_s, lambda: self._pull(mq, pq, offset))

    def _pull(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        s = self.settings
        if pq.dropped or self._stopping:
            return
        if self.flow_controlled(pq):
            # parked: the consume thread that takes the queue below its thresholds pulls
            # at once (``resume_pull``); the timer is a fallback
            pq.parked_offset = offset
            if self._scheduler is not None and not pq.park_timer:
                pq.park_timer = True

                def fallback() -> None:
                    pq.park_timer = False
                    self.resume_pull(mq, pq, check=False)

                self._scheduler.call_later(_FLOW_CONTROL_DELAY_S, fallback)
            return
        if s.orderly and not self.lock_valid(pq):
            self._pull_later(mq, pq, offset, _NOT_LOCKED_DELAY_S)
            return
        expression = self.subscriptions.get(mq.topic, "*")
        asked = pq.pull_batch or s.pull_batch(None, False)

        def answered(result: PullResult | None, error: BaseException | None) -> None:
            if result is None:
                log.debug("pulling %s at %d failed: %s", mq, offset, error)
                self._pull_later(mq, pq, offset, s.pull_time_delay_ms_when_exception / 1000)
                return
            pq.pull_batch = s.pull_batch(asked, result.max_offset > result.next_begin_offset)
            self._pulled(mq, pq, offset, result)

        try:
            self.puller.pull_async(
                mq, offset, answered, asked, tags=expression,
                wait_ms=s.broker_suspend_max_time_ms,
            )  # fmt: skip
        except PyMQError as exc:
            log.debug("pulling %s failed: %s", mq, exc)
            self._pull_later(mq, pq, offset, s.pull_time_delay_ms_when_exception / 1000)

    def flow_controlled(self, pq: ProcessQueue) -> bool:
        """Whether ``pq`` holds more than ``pull_threshold_for_queue`` messages or
        ``pull_threshold_size_for_queue_mib`` of bodies: its pulls wait."""
        s = self.settings
        return pq.count > s.pull_threshold_for_queue or pq.bytes > s.pull_threshold_bytes

    def resume_pull(self, mq: MessageQueue, pq: ProcessQueue, *, check: bool = True) -> None:
        """Send the pull parked by flow control, if any (``check``: only once ``pq`` is
        within its thresholds again). Called by consume threads as they take messages
        out of ``pq``: a backlog is pulled as fast as it is consumed, with no wait for
        a timer (RocketMQ retries a flow-controlled pull every 50 ms)."""
        if pq.parked_offset is None or (check and self.flow_controlled(pq)):
            return
        offset = pq.take_parked()
        if offset is not None:
            self._pull(mq, pq, offset)

    def _pulled(self, mq: MessageQueue, pq: ProcessQueue, offset: int, res: PullResult) -> None:
        """A pull answer, on a connection's reader thread: keep it short."""
        if pq.dropped or self._stopping:
            return
        nxt = res.next_begin_offset
        if res.status is PullStatus.FOUND and res.messages:
            msgs = res.messages
            if mq.topic == self.retry_topic:
                for m in msgs:  # the listener sees the topic the message was sent to
                    m.topic = m.properties.get(PropertyKeys.RETRY_TOPIC, m.topic)
            # loaded with the first answer (numpy), as the decoding that made msgs
            from connector.protocol.pulled import queue_offsets  # noqa: PLC0415

            offsets = queue_offsets(msgs)
            # put before advance: a batch done meanwhile must not commit past them
            pq.put(msgs, offsets)
            pq.advance(nxt)
            assert self._consume is not None
            behind = res.max_offset > nxt
            if behind:  # the next page is on its way while this one is consumed
                self._pull_later(mq, pq, nxt, 0)
            # a fast listener is called right here (see ConsumeService.submit)
            if self._consume.submit(mq, pq, msgs, offsets, here=True):
                # a consume thread was woken for them: let it have the GIL now, before
                # this thread makes the next pull (whose answer the broker holds for a
                # long poll anyway): at 5,000 msgs/s the listener saw an answer 90-105
                # us after it came, not 135-160 (benchmarks/push_bench.py's e2e)
                time.sleep(0)
            if behind:
                return
        elif res.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("%s: offset %d illegal, going on from %d", mq, offset, nxt)
            self.offsets.update(mq, nxt, increase_only=False)
        else:
            pq.advance(nxt)
            if pq.is_empty():  # nothing (or nothing matching): progress past it
                self.offsets.update(mq, nxt)
        self._pull_later(mq, pq, nxt, 0)

    # -- the brokers' calls ------------------------------------------------------------

    def on_request(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            log.info("the brokers say group %s changed: rebalancing", self.group)
            self._rebalance_now.set()
            return
        from connector.client.push.answers import answer  # noqa: PLC0415 - rarely used

        threading.Thread(
            target=answer, args=(self, conn, cmd), name="pymq-push-answer", daemon=True
        ).start()
