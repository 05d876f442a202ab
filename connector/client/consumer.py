"""PullConsumer: read queues by offset, commit the group's progress to the brokers.

The application (or the Spark source) owns the offsets: ``pull(mq, offset)``
returns the messages from exactly that offset and ``next_begin_offset``;
``commit_offset`` stores a group's position on the broker so admin tools
show its lag. Pulls use the binary form (stored records byte for byte) and
decode them here; compressed bodies come back inflated.

Read-ahead (as Kafka's fetcher): when an answer says the queue holds more
than it returned, the next page (same size, from ``next_begin_offset``) is
asked for at once, on the same connection, while the caller works on this
one; the caller's next pull of exactly that page (within ``READ_AHEAD_TTL_S``)
takes its answer instead of a round trip. One such request a queue at most;
an answer not taken (the caller asked for another offset, or came back
later) is dropped, and one that is not FOUND is asked for again the
ordinary way. ``read_ahead=False`` (per consumer or per pull) turns it off.

Which node of a broker name is read (``connector.client.read_routing``): the
one its last pull answer suggested (``suggestWhichBrokerId``: the master while
it is up, a slave while that slave has lost its master), else the master,
else a slave. Every read goes there. A node that cannot be reached (connect
refused, timeout, connection broken) is avoided for a few seconds: the route
is asked for again and the call is made once more on another node, so reads
move to a slave as soon as the master is found dead, and back once a slave
says the master is up again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from connector.client.connection import DEFAULT_BUSY_POLL_US
from connector.client.instance import ClientInstance
from connector.client.read_routing import ReadChoice, ReadRouting
from connector.client.results import PullResult
from connector.client.rpc import error_for_response
from connector.errors import NotFoundError, PyMQError, RemotingError, TopicNotExistError
from connector.protocol.hashing import parse_tags
from connector.protocol.message import MessageQueue
from connector.protocol.names import validate_group, validate_topic
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.route import TopicRouteData
from connector.protocol.status import PullStatus

__all__ = ["PullCallback", "PullConsumer"]

log = logging.getLogger(__name__)
T = TypeVar("T")
PERM_READ = 4
_FLAG_SUSPEND = 0x2  # PullSysFlag: long-poll when nothing is new
_FLAG_SUBSCRIPTION = 0x4  # the request carries its subscription (tags)
READ_AHEAD_TTL_S = 1.0  # a page read ahead is taken only this soon after it was asked for
_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}

# what pull_async calls once: the result, or the error
PullCallback = Callable[[PullResult | None, BaseException | None], None]


def _suggested_id(resp: RemotingCommand) -> str | None:
    """A pull answer's ``suggestWhichBrokerId`` (None from a broker that names none)."""
    return resp.ext.get("suggestWhichBrokerId")


def _records_result(resp: RemotingCommand) -> PullResult:
    """A pull answer (code in ``_PULL_STATUS``) as a ``PullResult`` of undecoded records."""
    r = resp.ext
    suggested = _suggested_id(resp)
    return PullResult(
        _PULL_STATUS[ResponseCode(resp.code)],
        int(r["nextBeginOffset"]),
        int(r["minOffset"]),
        int(r["maxOffset"]),
        records=bytes(resp.body),
        suggest_which_broker_id=int(suggested) if suggested and suggested.isdigit() else 0,
    )


def _decoded(res: PullResult, tags: str | None) -> PullResult:
    """``res`` with its records decoded into messages, tag-hash collisions dropped."""
    wanted = parse_tags(tags)
    # numpy and the compiled kernels load with the first pull, not with ``import connector``
    from connector.protocol.pulled import decode_records  # noqa: PLC0415

    messages = decode_records(res.records)
    if wanted is not None:  # the broker filtered by tag hash; drop hash collisions
        messages = [m for m in messages if m.tags in wanted]
    status = res.status
    if status is PullStatus.FOUND and not messages:
        status = PullStatus.NO_MATCHED_MSG
    return PullResult(
        status,
        res.next_begin_offset,
        res.min_offset,
        res.max_offset,
        messages,
        suggest_which_broker_id=res.suggest_which_broker_id,
    )


class PullConsumer:
    """Pull messages by queue offset. Thread-safe.

    ``read_routing`` (default: a new ``ReadRouting``) decides which node of a
    broker name reads go to: the master, or a slave while the master is down.
    """

    def __init__(
        self,
        *,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        timeout_ms: int = 3000,
        read_ahead: bool = True,
        busy_poll_us: int = DEFAULT_BUSY_POLL_US,
        read_routing: ReadRouting | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: bool = False,
        tls_ca_file: str | None = None,
        instance_name: str | None = None,
    ) -> None:
        """``access_key`` / ``secret_key``: the account requests are signed with (servers
        with ACL on: SUB on the topics and the group); ``tls``: servers that serve TLS,
        verified against ``tls_ca_file`` (else the system's CAs). The routes and
        connections are the client instance's (``connector.client.instance``: one per
        process and NameServers, or per ``instance_name``), shared with the other
        clients of the process; a pull consumer registers no group there (the
        application owns the queues and offsets, so it is no member of a group's
        rebalance)."""
        self.group = validate_group(group)
        self.instance = ClientInstance.join(
            self, namesrv=namesrv, instance_name=instance_name, busy_poll_us=busy_poll_us,
            access_key=access_key, secret_key=secret_key, tls=tls, tls_ca_file=tls_ca_file,
        )  # fmt: skip
        self.rpc = self.instance.rpc
        self.namesrv = self.instance.namesrv
        self.timeout_ms = timeout_ms
        self.read_ahead = read_ahead
        self.read_routing = read_routing or ReadRouting()
        self._stale: set[str] = set()  # topics whose route a failure put in doubt
        self._lock = threading.Lock()
        self._ahead: dict[MessageQueue, _ReadAhead] = {}  # by queue, at most one

    def __enter__(self) -> PullConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        with self._lock:
            self._ahead.clear()
        self.instance.leave(self)

    # -- routes ------------------------------------------------------------------------

    def _route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        validate_topic(topic)
        route = None if refresh or topic in self._stale else self.instance.route(topic)
        if route is None:
            self._stale.discard(topic)
            route = self.instance.fetch_route(topic)
            if route is None:
                raise TopicNotExistError(f"No route info of this topic: {topic}")
        return route

    def _refreshed_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route asked for again; None (logged) when that fails: the caller
        goes on with the route it has."""
        try:
            return self._route(topic, refresh=True)
        except PyMQError as exc:
            log.debug("refreshing the route of %s failed: %s", topic, exc)
            return None

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of the topic, on every broker name with a node in the
        route: its master, or a slave while the master is gone from the route."""
        route = self._route(topic, refresh=True)
        served = {b.broker_name for b in route.brokers if any(b.addrs.values())}
        out = [
            MessageQueue(topic, q.broker_name, i)
            for q in sorted(route.queues, key=lambda q: q.broker_name)
            if q.perm & PERM_READ and q.broker_name in served
            for i in range(q.read_queue_nums)
        ]
        return out

    def _choice(self, route: TopicRouteData, broker_name: str) -> ReadChoice | None:
        for broker in route.brokers:
            if broker.broker_name == broker_name and broker.addrs:
                return self.read_routing.choose(broker_name, broker.addrs)
        return None

    def read_addr(self, mq: MessageQueue) -> str:
        """The address the next read of ``mq`` goes to: its broker's master, or a
        slave while the master is down (or was unreachable a moment ago). Asks the
        NameServer when the cached route lacks the node wanted (at most once a
        second). TopicNotExistError when no node of the broker serves the topic."""
        route = self._route(mq.topic)
        choice = self._choice(route, mq.broker_name)
        if choice is None:  # the broker is new, or moved: the route may be stale
            choice = self._choice(self._route(mq.topic, refresh=True), mq.broker_name)
        elif not choice.preferred and self.read_routing.refresh_due((mq.topic, mq.broker_name)):
            # not the node wanted: the route may lack it (a master back on a new port)
            fresh = self._refreshed_route(mq.topic)
            if fresh is not None:
                choice = self._choice(fresh, mq.broker_name) or choice
        if choice is None:
            raise TopicNotExistError(f"broker {mq.broker_name} serves no queue of {mq.topic}")
        return choice.addr

    def _unreachable(self, mq: MessageQueue, addr: str, exc: RemotingError) -> str | None:
        """``addr`` could not be reached: avoid it for a while, ask for the route again,
        and return another node of the broker to try once more, if it has one."""
        self.read_routing.mark_failed(addr)
        route = self._refreshed_route(mq.topic) or self.instance.route(mq.topic)
        choice = None if route is None else self._choice(route, mq.broker_name)
        if choice is None or choice.addr == addr:
            return None
        log.warning(
            "%s of %s unreachable (%s): reading from %s", addr, mq.broker_name, exc, choice.addr
        )
        return choice.addr

    def _read(self, mq: MessageQueue, call: Callable[[str], T]) -> T:
        """``call(addr)`` on the node ``mq`` is read from; on a connection failure or a
        timeout, once more on another node of its broker (a read: safe to repeat)."""
        addr = self.read_addr(mq)
        try:
            out = call(addr)
        except RemotingError as exc:
            other = self._unreachable(mq, addr, exc)
            if other is None:
                raise
            addr = other
            try:
                out = call(addr)
            except RemotingError:
                self.read_routing.mark_failed(addr)  # no third try: the caller decides
                raise
            except PyMQError as again:
                self._after_error(mq, again)
                raise
        except PyMQError as exc:
            self._after_error(mq, exc)
            raise
        self.read_routing.succeeded(addr)
        return out

    def _after_error(self, mq: MessageQueue, exc: PyMQError) -> None:
        if exc.retriable or exc.invalid_metadata:
            self._refreshed_route(mq.topic)  # the broker may have moved

    # -- reads -------------------------------------------------------------------------

    def pull(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        tags: str | None = None,
        wait_ms: int = 0,
        read_ahead: bool | None = None,
    ) -> PullResult:
        """Messages of ``mq`` from ``offset``; ``wait_ms`` > 0 long-polls when none are new.

        An offset outside the queue is ``PullStatus.OFFSET_ILLEGAL`` with the
        offset to go on from in ``next_begin_offset`` (as in RocketMQ).
        ``read_ahead`` (default: the consumer's): ask for the next page now when
        the queue holds more (see the module's text); False when this is the last.
        """
        res = self.pull_records(
            mq, offset, max_nums, tags=tags, wait_ms=wait_ms, read_ahead=read_ahead
        )
        return _decoded(res, tags)

    def pull_async(
        self,
        mq: MessageQueue,
        offset: int,
        callback: PullCallback,
        max_nums: int = 32,
        *,
        tags: str | None = None,
        wait_ms: int = 0,
        records: bool = False,
    ) -> None:
        """``pull`` with a callback (RocketMQ's ``pull(..., PullCallback)``): the request
        goes out and this returns; ``callback(result, error)`` runs once, on the
        connection's reader thread, with the ``PullResult`` (messages decoded, or
        undecoded in ``records`` with ``records=True``) or the error (a timeout after
        ``timeout_ms`` + ``wait_ms``). Keep it short: other answers wait behind it
        (for ``connection.STALL_S`` at most: then another thread reads them).
        It may pull again: a consumer that re-pulls from its callback keeps a long
        poll on every queue with no thread of its own, and reads each answer on the
        thread that received it. No read-ahead. Raises (nothing sent) when the
        queue's broker cannot be found or reached (another node of it is tried first).
        A pull that fails once sent (timeout, connection lost) is not repeated: the
        error goes to the callback, and the next call reads from another node.
        """
        ext = self._pull_ext(mq, offset, max_nums, tags, wait_ms)
        timeout_s = (self.timeout_ms + max(wait_ms, 0)) / 1000

        def send(addr: str) -> None:
            def answered(resp: RemotingCommand | None, error: BaseException | None) -> None:
                result: PullResult | None = None
                try:
                    if resp is not None:
                        if resp.code not in _PULL_STATUS:
                            error = error_for_response(addr, resp)
                        else:
                            self.read_routing.record_suggestion(mq.broker_name, _suggested_id(resp))
                            result = _records_result(resp)
                            if not records:
                                result = _decoded(result, tags)
                except Exception as exc:  # noqa: BLE001 - a bad answer: the caller's error
                    error, result = exc, None
                if isinstance(error, RemotingError):
                    self.read_routing.mark_failed(addr)  # the next call reads elsewhere
                if isinstance(error, PyMQError) and (error.retriable or error.invalid_metadata):
                    self._stale.add(mq.topic)  # the broker may have moved: the next pull asks
                callback(result, error if result is None else None)

            cmd = RemotingCommand(RequestCode.PULL_MESSAGE, dict(ext))
            self.rpc.client.connection(addr).invoke_async(cmd, answered, timeout_s)

        self._read(mq, send)

    def pull_records(
        self,
        mq: MessageQueue,
        offset: int,
        max_nums: int = 32,
        *,
        tags: str | None = None,
        wait_ms: int = 0,
        read_ahead: bool | None = None,
    ) -> PullResult:
        """As ``pull``, but the stored records stay undecoded in ``records``.

        The broker filters by tag hash only; records whose tag merely shares
        a hash are still there, for the caller to drop (``pull`` does).
        """
        key = (offset, max_nums, tags or "*")
        ahead = None
        if self._ahead:
            with self._lock:
                ahead = self._ahead.pop(mq, None)
        resp = None
        if ahead is not None and ahead.key == key and ahead.fresh():
            resp = ahead.wait((self.timeout_ms + max(wait_ms, 0)) / 1000)
        if resp is None:
            resp = self._pull(mq, offset, max_nums, tags, wait_ms)
        result = _records_result(resp)
        if (
            (self.read_ahead if read_ahead is None else read_ahead)
            and result.status is PullStatus.FOUND
            and offset < result.next_begin_offset < result.max_offset
        ):
            self._read_ahead(mq, result.next_begin_offset, max_nums, tags)
        return result

    def _pull_ext(
        self, mq: MessageQueue, offset: int, max_nums: int, tags: str | None, wait_ms: int
    ) -> dict[str, str]:
        return {
            "consumerGroup": self.group,
            "topic": mq.topic,
            "queueId": str(mq.queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": str(max_nums),
            "sysFlag": str(_FLAG_SUBSCRIPTION | (_FLAG_SUSPEND if wait_ms > 0 else 0)),
            "commitOffset": "0",
            "suspendTimeoutMillis": str(max(wait_ms, 0)),
            "subscription": tags or "*",
            "subVersion": "0",
            "expressionType": "TAG",
        }

    def _pull(
        self, mq: MessageQueue, offset: int, max_nums: int, tags: str | None, wait_ms: int
    ) -> RemotingCommand:
        ext = self._pull_ext(mq, offset, max_nums, tags, wait_ms)
        timeout_s = (self.timeout_ms + max(wait_ms, 0)) / 1000
        resp = self._read(
            mq,
            lambda addr: self.rpc.call(
                addr,
                RequestCode.PULL_MESSAGE,
                ext,
                timeout_s=timeout_s,
                ok=_PULL_STATUS,
                busy_poll=wait_ms <= 0,
            ),
        )
        self.read_routing.record_suggestion(mq.broker_name, _suggested_id(resp))
        return resp

    def _read_ahead(self, mq: MessageQueue, offset: int, max_nums: int, tags: str | None) -> None:
        """Ask for the page at ``offset`` before the caller does (no long poll: the
        queue holds it already). Best effort: any failure leaves the ordinary pull."""
        cmd = RemotingCommand(
            RequestCode.PULL_MESSAGE, self._pull_ext(mq, offset, max_nums, tags, 0)
        )
        try:
            addr = self.read_addr(mq)
            ahead = _ReadAhead(
                (offset, max_nums, tags or "*"), mq.broker_name, addr, self.read_routing
            )
            self.rpc.client.connection(addr).invoke_async(
                cmd, ahead.answered, self.timeout_ms / 1000
            )
        except PyMQError:
            return
        with self._lock:
            self._ahead[mq] = ahead

    def _queue_call(self, mq: MessageQueue, code: int, **ext: str) -> dict[str, str]:
        fields = {"topic": mq.topic, "queueId": str(mq.queue_id), **ext}
        timeout_s = self.timeout_ms / 1000
        return self._read(
            mq, lambda addr: self.rpc.call(addr, code, fields, timeout_s=timeout_s).ext
        )

    def min_offset(self, mq: MessageQueue) -> int:
        return int(self._queue_call(mq, RequestCode.GET_MIN_OFFSET)["offset"])

    def max_offset(self, mq: MessageQueue) -> int:
        return int(self._queue_call(mq, RequestCode.GET_MAX_OFFSET)["offset"])

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms``."""
        ext = self._queue_call(
            mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=str(timestamp_ms)
        )
        return int(ext["offset"])

    # -- group offsets -----------------------------------------------------------------

    def commit_offset(self, mq: MessageQueue, offset: int) -> None:
        """Store the group's position in ``mq`` on its broker."""
        self._queue_call(
            mq,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            consumerGroup=self.group,
            commitOffset=str(offset),
        )

    def fetch_offset(self, mq: MessageQueue) -> int:
        """The group's committed position in ``mq``, or -1 if it never committed."""
        try:
            ext = self._queue_call(
                mq,
                RequestCode.QUERY_CONSUMER_OFFSET,
                consumerGroup=self.group,
                setZeroIfNotFound="false",
            )
        except NotFoundError:
            return -1
        return int(ext["offset"])


class _ReadAhead:
    """A pull sent before the caller asked for it, and its answer once it came."""

    __slots__ = ("_done", "addr", "broker_name", "key", "response", "routing", "sent")

    def __init__(
        self, key: tuple[int, int, str], broker_name: str, addr: str, routing: ReadRouting
    ) -> None:
        self.key = key
        self.broker_name = broker_name
        self.addr = addr
        self.routing = routing  # told what the answer says of the nodes, taken or not
        self.sent = time.monotonic()
        self.response: RemotingCommand | None = None
        self._done = threading.Lock()
        self._done.acquire()

    def answered(self, response: RemotingCommand | None, error: BaseException | None) -> None:
        if response is not None and response.code in _PULL_STATUS:
            self.routing.record_suggestion(self.broker_name, _suggested_id(response))
        elif isinstance(error, RemotingError):  # the caller's pull goes elsewhere at once
            self.routing.mark_failed(self.addr)
        # only a page of messages is worth keeping; anything else is asked for again
        if error is None and response is not None and response.code == ResponseCode.SUCCESS:
            self.response = response
        self._done.release()

    def fresh(self) -> bool:
        """Whether it is recent enough to stand for a pull made now (a page read ahead
        long ago might predate the queue's deletion and re-creation)."""
        return time.monotonic() - self.sent < READ_AHEAD_TTL_S

    def wait(self, timeout_s: float) -> RemotingCommand | None:
        """The answer if it is a page of messages, else None (failed, not FOUND, or
        not in within ``timeout_s``: the caller pulls the ordinary way)."""
        if not self._done.acquire(timeout=max(timeout_s, 0.0)):
            return None
        return self.response
