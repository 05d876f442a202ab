"""Producer: RocketMQ's full send path (DefaultMQProducerImpl.sendDefaultImpl).

For every send: validate; find the topic's publish info (cache, else a
NameServer, else the default topic TBW102 for auto-creation); pick a queue
(round-robin, skipping the broker that just failed, and with
``send_latency_fault_enable`` avoiding brokers isolated for being slow or
down); send with a per-attempt share of ``send_msg_timeout_ms``; record the
broker's latency; retry on another broker when the error is retriable.
A message keeps its UNIQ_KEY across retries, so a retry after a lost answer
is a duplicate a consumer can recognise (delivery is at-least-once).

Bodies over ``compress_msg_body_over_howmuch`` are compressed (single
messages; ``compress_type`` ZLIB, ZSTD or LZ4 at ``compress_level``, as
RocketMQ 5; the consumer inflates them). Thread-safe: one producer serves many
threads. ``send_async`` runs the same path on a small pool, with at most
``client_async_semaphore_value`` sends in flight. Single sends made while
others of their topic are on the wire gather into batch requests (always for
``send_async``; for ``send`` unless ``auto_batch=False``; see
``connector.client.accumulator``).

This module is the producer's API and its sync driver; the rest is split by
role: ``encoding`` (messages as request bodies), ``send_request`` (the request
and its answer), ``send_policy`` (what every attempt decides, shared by both
drivers), ``send_async`` (the async driver), ``batching`` (auto-batching glue);
routes, connections and heartbeats are the client instance's
(``connector.client.instance``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import orjson

from connector.client.accumulator import SyncWaiter
from connector.client.batching import AutoBatch
from connector.client.connection import DEFAULT_BUSY_POLL_US, RemotingConnection
from connector.client.encoding import Encoded, Encoder, plain_size
from connector.client.futures import SendFuture
from connector.client.instance import ClientInstance
from connector.client.latency import (
    DEFAULT_LATENCY_MAX_MS,
    DEFAULT_NOT_AVAILABLE_DURATION_MS,
    MQFaultStrategy,
    split_send_timeout,
)
from connector.client.publish_info import TopicPublishInfo
from connector.client.results import SendMessageHook, SendResult
from connector.client.send_async import AsyncSender, Slots, run_callback, settle, timed_out
from connector.client.send_policy import SendPolicy
from connector.client.send_request import SendRequests
from connector.errors import (
    BrokerBusyError,
    ConfigError,
    MessageIllegalError,
    MessageTooLargeError,
    PyMQError,
    TopicNotExistError,
)
from connector.protocol.acl import Credentials
from connector.protocol.batch import PreparedBatch
from connector.protocol.compression import CompressionType
from connector.protocol.message import Message, MessageQueue, SysFlag
from connector.protocol.msgid import IdBlock
from connector.protocol.names import DEFAULT_TOPIC, validate_group, validate_topic
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.protocol.route import TopicRouteData

__all__ = ["Producer"]

log = logging.getLogger(__name__)
MiB = 1 << 20


class Producer:
    """Send messages to a pymq cluster. Settings are RocketMQ's, in snake_case."""

    # whether brokers call this kind of producer (CHECK_TRANSACTION_STATE)
    ANSWERS_BROKERS = False

    def __init__(
        self,
        *,
        group: str = "DEFAULT_PRODUCER",
        namesrv: str | Sequence[str] | None = None,
        send_msg_timeout_ms: int = 3000,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        retry_another_broker_when_not_store_ok: bool = False,
        max_message_size: int = 4 * MiB,
        compress_msg_body_over_howmuch: int = 4096,
        compress_type: str = "ZLIB",
        compress_level: int = 5,
        send_latency_fault_enable: bool = False,
        latency_max_ms: Sequence[int] = DEFAULT_LATENCY_MAX_MS,
        not_available_duration_ms: Sequence[int] = DEFAULT_NOT_AVAILABLE_DURATION_MS,
        poll_name_server_interval_ms: int = 30_000,
        default_topic_queue_nums: int = 4,
        client_async_semaphore_value: int = 65_535,
        async_workers: int = 8,
        auto_batch: bool = True,
        batch_max_delay_ms: int = 10,
        batch_max_bytes: int = 32 * 1024,
        total_batch_max_bytes: int = 32 * MiB,
        fault_strategy: MQFaultStrategy | None = None,
        busy_poll_us: int = DEFAULT_BUSY_POLL_US,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: bool = False,
        tls_ca_file: str | None = None,
        instance_name: str | None = None,
        heartbeat_broker_interval_ms: int = 30_000,
    ) -> None:
        """``access_key`` / ``secret_key``: the account every request is signed with
        (servers with ACL on: PUB on the topics); ``tls``: servers that serve TLS,
        verified against ``tls_ca_file`` (else the system's CAs). ``instance_name``:
        the client instance (``connector.client.instance``) to share with the other
        clients of this process; a second producer of a group gets one of its own."""
        self.group = validate_group(group)
        Credentials.of(access_key, secret_key)  # one key without the other: ConfigError
        for name, value in (
            ("send_msg_timeout_ms", send_msg_timeout_ms),
            ("max_message_size", max_message_size),
            ("poll_name_server_interval_ms", poll_name_server_interval_ms),
            ("heartbeat_broker_interval_ms", heartbeat_broker_interval_ms),
            ("default_topic_queue_nums", default_topic_queue_nums),
            ("client_async_semaphore_value", client_async_semaphore_value),
            ("async_workers", async_workers),
        ):
            if value <= 0:
                raise ConfigError(f"{name} must be positive")
        if retry_times_when_send_failed < 0 or retry_times_when_send_async_failed < 0:
            raise ConfigError("retry counts must not be negative")
        # RocketMQ's bounds (ProduceAccumulator)
        if not 1 <= batch_max_delay_ms <= 30_000:
            raise ConfigError("batch_max_delay_ms must be between 1 ms and 30 s")
        if not 1 <= batch_max_bytes <= 2 * MiB:
            raise ConfigError("batch_max_bytes must be between 1 byte and 2 MiB")
        if total_batch_max_bytes <= 0:
            raise ConfigError("total_batch_max_bytes must be positive")
        self.auto_batch = auto_batch
        self.batch_max_delay_ms = batch_max_delay_ms
        self.batch_max_bytes = batch_max_bytes
        self.total_batch_max_bytes = total_batch_max_bytes
        self.send_msg_timeout_ms = send_msg_timeout_ms
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.retry_another_broker_when_not_store_ok = retry_another_broker_when_not_store_ok
        self.max_message_size = max_message_size
        self.compress_msg_body_over_howmuch = compress_msg_body_over_howmuch
        self.compress_type = CompressionType.parse(compress_type)
        self.compress_type.check_level(compress_level)
        self.compress_level = compress_level
        self.poll_name_server_interval_ms = poll_name_server_interval_ms
        self.default_topic_queue_nums = default_topic_queue_nums
        self.fault_strategy = fault_strategy or MQFaultStrategy(
            send_latency_fault_enable=send_latency_fault_enable,
            latency_max_ms=tuple(latency_max_ms),
            not_available_duration_ms=tuple(not_available_duration_ms),
        )
        self.encoder = Encoder(
            max_message_size=max_message_size,
            compress_msg_body_over_howmuch=compress_msg_body_over_howmuch,
            compress_type=self.compress_type,
            compress_level=compress_level,
        )
        # by topic: its publish info and the route it was made from (the topic's own, or
        # TBW102's for a topic the brokers will create), as the client instance had it
        self._routes: dict[str, tuple[TopicPublishInfo, TopicRouteData]] = {}
        self._routes_lock = threading.Lock()
        self._local = threading.local()  # per thread: whether it is in a send_batch
        self.requests = self._make_requests()
        self.policy = SendPolicy(
            group=self.group,
            fault_strategy=self.fault_strategy,
            retry_another_broker_when_not_store_ok=retry_another_broker_when_not_store_ok,
            publish_info=self.publish_info,
            refresh_route=self._refresh_route,
        )
        self._async_slots = Slots(client_async_semaphore_value)
        self._async_workers = async_workers
        self._executor: ThreadPoolExecutor | None = None
        self._batching: AutoBatch | None = None
        self._started = False
        self._state_lock = threading.Lock()
        self._closed = False
        self.instance = ClientInstance.join(
            self, namesrv=namesrv, instance_name=instance_name, busy_poll_us=busy_poll_us,
            access_key=access_key, secret_key=secret_key, tls=tls, tls_ca_file=tls_ca_file,
            producer_group=self.group, listen=self.ANSWERS_BROKERS,
            poll_name_server_interval_ms=poll_name_server_interval_ms,
            heartbeat_broker_interval_ms=heartbeat_broker_interval_ms,
        )  # fmt: skip
        self.rpc = self.instance.rpc
        self.namesrv = self.instance.namesrv
        self.namesrv_addrs = self.instance.namesrv_addrs
        self.client_id = self.instance.client_id
        self.sender = AsyncSender(
            self.policy, self.requests, self.rpc, lambda: self._executor,
            send_msg_timeout_ms,
        )  # fmt: skip

    def _make_requests(self) -> SendRequests:
        """How sends are put on the wire (a subclass's own kind of request: halves)."""
        return SendRequests(self.group, self.default_topic_queue_nums)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> Producer:
        """Start sending (the pools; the client instance refreshes the routes, and this
        producer's probes of isolated brokers run). Sends start it when needed."""
        with self._state_lock:
            if self._closed:
                raise PyMQError("this producer was shut down")
            if not self._started:
                # retries of async sends run here, not on a connection's reader thread
                # (a retry may look a route up, which blocks)
                self._executor = ThreadPoolExecutor(
                    self._async_workers, thread_name_prefix=f"pymq-producer-{self.group}"
                )
                self._batching = AutoBatch(
                    encoder=self.encoder,
                    sender=self.sender,
                    slots=self._async_slots,
                    max_delay_ms=self.batch_max_delay_ms,
                    max_bytes=self.batch_max_bytes,
                    total_max_bytes=self.total_batch_max_bytes,
                    send_msg_timeout_ms=self.send_msg_timeout_ms,
                    retries=self.retry_times_when_send_failed,
                    async_retries=self.retry_times_when_send_async_failed,
                    name=self.group,
                )
                self._started = True
        return self

    def shutdown(self) -> None:
        """Wait for async sends in flight, stop background work, leave the client
        instance (which unregisters the group from the brokers)."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if self._batching is not None:  # what it gathered is sent first
            self._batching.close()
        if executor is not None:
            executor.shutdown(wait=True)
        self.instance.leave(self)  # UNREGISTER_CLIENT of the group; the last one closes

    def __enter__(self) -> Producer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def register_send_hook(self, hook: SendMessageHook) -> None:
        """``hook.send_message_before(ctx)`` / ``send_message_after(ctx)`` on every attempt."""
        self.policy.hooks.append(hook)

    # -- the client instance's calls ---------------------------------------------------

    def tick(self) -> None:
        """The client instance's periodic call: probe the isolated brokers."""
        if self._started and not self._closed:
            self._probe_isolated_brokers()

    def on_request(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        """A broker's call for this group: a plain producer answers none."""

    def _probe_isolated_brokers(self) -> None:
        """Ask isolated brokers whether they are back (RocketMQ 5's reachability check)."""
        for broker_name in self.fault_strategy.brokers_to_probe():
            addr = self.instance.broker_addr(broker_name)
            if addr is None:
                self.fault_strategy.probe_result(broker_name, False, 0.0)
                continue
            t0 = time.monotonic()
            if self.instance.heartbeat(addr, timeout_s=1.0):
                self.fault_strategy.probe_result(broker_name, True, (time.monotonic() - t0) * 1000)
            else:
                self.fault_strategy.probe_result(broker_name, False, 0.0)

    def refresh_routes(self) -> None:
        """Ask the NameServer for the route of every topic sent to, now (the client
        instance does every ``poll_name_server_interval_ms``). A topic the NameServer
        has no route for keeps the route it had."""
        for topic in list(self._routes):
            try:
                self._refresh_route(topic)
            except PyMQError as exc:
                log.warning("refreshing the route of %s failed: %s", topic, exc)

    def _refresh_route(self, topic: str, *, default: bool = False) -> TopicPublishInfo | None:
        """The seeds' updateTopicRouteInfoFromNameServer: the topic's own route, or with
        ``default`` TBW102's with ``default_topic_queue_nums`` queues a broker; cached when
        usable. None (and the cache as it was) when the NameServer has none."""
        if not default:
            # a topic without a route yet is asked for at every refresh of the instance
            route = self.instance.fetch_route(topic, watch=True)
            return None if route is None else self._publish_from(topic, route)
        route = self.instance.fetch_route(DEFAULT_TOPIC)
        return None if route is None else self._publish_from(topic, route, default=True)

    def _publish_from(
        self, topic: str, route: TopicRouteData, *, default: bool = False
    ) -> TopicPublishInfo | None:
        """Publish info made from ``route`` (TBW102's with ``default``), cached if usable."""
        if default:
            info = TopicPublishInfo.from_route_for_default_topic(
                route, topic, self.default_topic_queue_nums
            )
        else:
            info = TopicPublishInfo.from_route(route)
        if not info.ok():
            return None
        with self._routes_lock:
            self._routes[topic] = (info, route)
        return info

    def publish_info(self, topic: str) -> TopicPublishInfo:
        """The topic's writable queues (made again whenever the client instance's route
        of the topic changes). Without a usable route: the topic's own from a NameServer,
        else TBW102's for auto-creation (the seeds' tryToFindTopicPublishInfo)."""
        entry = self._routes.get(topic)
        current = self.instance.route(topic)
        if entry is not None:
            info, source = entry
            if (current is None or current is source) and info.ok():
                return info
        if current is not None:
            made = self._publish_from(topic, current)
            if made is not None:
                return made
        made = self._refresh_route(topic) or self._refresh_route(topic, default=True)
        if made is None:
            raise TopicNotExistError(f"No route info of this topic: {topic}")
        return made

    # -- the send path -----------------------------------------------------------------

    def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout_ms: int | None = None,
        born_timestamp: int | None = None,
    ) -> SendResult:
        """Send and wait (SYNC). ``queue``: that queue only; ``sharding_key``: ordered;
        ``born_timestamp`` (ms since the epoch): the message's born time, else now."""
        self.start()
        batching = self._batching
        batched = self.auto_batch and batching is not None
        # a message of only a body (and tags) is checked here and encoded with its batch
        plain = (
            batched
            and born_timestamp is None  # a batch carries the born time of its sending
            and sharding_key is None
            and timeout_ms is None
            and self.encoder.plain_checked(msg)
        )
        encoded: Encoded | None = None
        gather = plain
        if not plain:
            encoded = self.encoder.one(msg)
            encoded.born = _born(born_timestamp)
            gather = (
                batched
                and encoded.born is None
                and AutoBatch.gathers(encoded, msg, sharding_key, timeout_ms)
            )
        if gather and batching is not None:
            acc = batching.accumulator
            key = (msg.topic, queue, False)
            if acc.enter_direct(key):  # the wire is idle: alone, reading its own answer
                try:
                    if encoded is None:
                        encoded = self.encoder.plain_one(msg, msg.body)
                    return self._send(encoded, msg, self.retry_times_when_send_failed, queue=queue)
                finally:
                    acc.leave_direct(key)
            waiter = SyncWaiter()
            nbytes = plain_size(msg) if encoded is None else len(encoded.data)
            if acc.add(key, msg, nbytes, waiter, encoded):
                return batching.wait(waiter)
        if encoded is None:  # the accumulator is full: alone
            encoded = self.encoder.plain_one(msg, msg.body)
        return self._send(
            encoded,
            msg,
            self.retry_times_when_send_failed,
            queue=queue,
            sharding_key=sharding_key,
            timeout_ms=timeout_ms,
        )

    def send_batch(
        self,
        msgs: Sequence[Message],
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
        born_timestamp: int | None = None,
        half: tuple[str, int] | None = None,
    ) -> SendResult:
        """Many messages of one topic in one request; one SendResult for all.

        ``born_timestamp`` (ms since the epoch): every message's born time, instead of
        now (RocketMQ's request carries one born time for its batch). ``half``: a
        (writer, batch) key: the batch is stored as one transactional half, invisible
        until ``commit_batch`` commits that key; the result is the half's (its queue
        offset and offset msgId, for the commit's manifest)."""
        self.start()
        born = _born(born_timestamp)
        local = self._local
        # this thread's scratch holds the batch until it is answered: a send hook that
        # sends a batch meanwhile (same thread) encodes into fresh memory
        nested = getattr(local, "sending", False)
        local.sending = True
        try:
            encoded = self.encoder.batch(msgs, scratch=not nested)
            encoded.born = born
            encoded.half = half
            return self._send(
                encoded,
                list(msgs),
                self.retry_times_when_send_failed,
                queue=queue,
                timeout_ms=timeout_ms,
            )
        finally:
            local.sending = nested

    def commit_batch(
        self,
        broker_name: str,
        writer: str,
        batch_id: int,
        halves: Sequence[Sequence[int]],
        *,
        manifest: Any = None,
        defer: bool = False,
        timeout_ms: int | None = None,
    ) -> dict[str, Any]:
        """Commit, on ``broker_name``'s master, the batch halves of key (``writer``,
        ``batch_id``): ``halves`` are (half queue offset, CommitLog offset) pairs (a
        half's ``send_batch(half=...)`` result: its ``queue_offset``, and its
        ``offset_msg_id`` decoded). All or none; once per key: a repeated commit
        answers ``{"already": True, ...}`` with the halves and ``manifest`` the first
        commit of the key carried, once every half of it is appended. ``defer``: the
        broker only takes the decision; its halves are appended by the next call for
        the key (or its next check pass)."""
        self.start()
        addr = self._master_addr(broker_name)
        body = orjson.dumps(
            {
                "producer_group": self.group,
                "writer": writer,
                "batch": batch_id,
                "halves": [list(h) for h in halves],
                "manifest": manifest,
            }
        )
        timeout_s = (timeout_ms or self.send_msg_timeout_ms * 10) / 1000
        ext = {"defer": "true"} if defer else None
        resp = self.rpc.call(
            addr, RequestCode.COMMIT_TRANSACTION_BATCH, ext, body, timeout_s=timeout_s
        )
        answer: dict[str, Any] = orjson.loads(resp.body)
        return answer

    def rollback_half(self, broker_name: str, half_offset: int, commit_log_offset: int) -> None:
        """END_TRANSACTION rollback of the half at ``commit_log_offset`` on ``broker_name``
        (a batch half's, say); TransactionDecidedError if it was committed."""
        self.start()
        ext = {
            "producerGroup": self.group,
            "tranStateTableOffset": str(half_offset),
            "commitLogOffset": str(commit_log_offset),
            "commitOrRollback": str(SysFlag.TRANSACTION_ROLLBACK),
            "fromTransactionCheck": "false",
        }
        self.rpc.call(
            self._master_addr(broker_name), RequestCode.END_TRANSACTION, ext,
            timeout_s=self.send_msg_timeout_ms / 1000,
        )  # fmt: skip

    def _master_addr(self, broker_name: str) -> str:
        """A broker name's master: from the routes known, else the NameServer's clusters."""
        addr = self.instance.broker_addr(broker_name)
        if addr is None:
            for group in self.namesrv.cluster_info().brokers:
                if group.broker_name == broker_name:
                    addr = group.master_addr()
        if addr is None:
            raise TopicNotExistError(f"broker {broker_name} has no live master")
        return addr

    def new_msg_ids(self, count: int) -> IdBlock:
        """``count`` fresh UNIQ_KEYs, for a ``PreparedBatch`` built by the caller."""
        return self.encoder.uniq.next_block(count)

    def send_prepared_batch(
        self,
        batch: PreparedBatch,
        *,
        queue: MessageQueue | None = None,
        timeout_ms: int | None = None,
        born_timestamp: int | None = None,
        half: tuple[str, int] | None = None,
    ) -> SendResult:
        """As ``send_batch`` for a batch the caller encoded (same send path, retries
        and fault avoidance). Hooks see an empty message list for it."""
        self.start()
        born = _born(born_timestamp)
        topic = validate_topic(batch.topic)
        if not batch.msg_ids or len(batch.msg_ids) != len(batch.record_sizes):
            raise MessageIllegalError("a prepared batch needs one msg id and size per message")
        if len(batch.data) > self.max_message_size:
            raise MessageTooLargeError(
                len(batch.data),
                self.max_message_size,
                message=f"batch of {len(batch.data)} bytes exceeds {self.max_message_size}",
            )
        encoded = Encoded(topic, batch.data, batch.msg_ids, batch.record_sizes, None, born)
        encoded.half = half
        return self._send(
            encoded, [], self.retry_times_when_send_failed, queue=queue, timeout_ms=timeout_ms
        )

    def send_async(
        self,
        msg: Message,
        callback: Callable[[SendResult | None, BaseException | None], None] | None = None,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
    ) -> Future[SendResult]:
        """Send in the background: a future, and ``callback(result, exception)`` if given.

        No thread waits for the answer: the request goes on the broker's connection
        with the others in flight, and the answer completes the future (on the
        connection's reader thread, where ``callback`` runs too: keep it short).
        While sends of the topic are on the wire, plain messages (no delay level,
        sharding key or compressed body) gather into one batch request, each still
        with its own ``SendResult``. Blocks while ``client_async_semaphore_value``
        sends are in flight.
        """
        batching = self._batching
        if batching is None or self._closed:
            self.start()
            batching = self._batching
            assert batching is not None
        # bad input fails here, in the caller's thread; a message of only a body (and
        # tags) is encoded later, with its batch
        plain = sharding_key is None and self.encoder.plain_checked(msg)
        encoded = None if plain else self.encoder.one(msg)
        if not self._async_slots.acquire(timeout=self.send_msg_timeout_ms / 1000):
            raise BrokerBusyError("too many async sends in flight (client_async_semaphore_value)")
        future = SendFuture()
        if callback is not None:
            future.add_done_callback(lambda f: run_callback(callback, f))
        try:
            # a gathered message's slot comes back with its batch (_batch_settled)
            if encoded is None:  # plain
                key = (msg.topic, queue, True)
                if batching.accumulator.add(key, msg, plain_size(msg), future):
                    return future
                encoded = self.encoder.one(msg)
            elif batching.gathers(encoded, msg, sharding_key, None) and batching.add(
                encoded, msg, (encoded.topic, queue, True), future
            ):
                return future
            self.sender.send(
                encoded, msg, self.retry_times_when_send_async_failed,
                settle(future, self._async_slots),
                queue=queue, sharding_key=sharding_key,
            )  # fmt: skip
        except BaseException as exc:
            if not future.done():
                self._async_slots.release(1)
                future.set_exception(exc)
            raise
        return future

    def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without waiting for (or retrying on) the answer (RocketMQ's ONEWAY: the
        broker does not answer)."""
        self.start()
        encoded = self.encoder.one(msg)
        mq, addr = self.policy.target(encoded.topic, None, queue, None)
        if addr is None:
            raise self.policy.no_master(mq)
        self.rpc.client.invoke_oneway(addr, self.requests.command(mq, encoded))

    # -- the sync driver (the async one: connector.client.send_async) ------------------

    def _send(
        self,
        encoded: Encoded,
        msg: Message | list[Message],
        retries: int,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
        timeout_ms: int | None = None,
    ) -> SendResult:
        budget_ms = timeout_ms if timeout_ms is not None else self.send_msg_timeout_ms
        deadline = time.monotonic() + budget_ms / 1000
        attempts = 1 + retries
        last_broker: str | None = None
        last_error: PyMQError | None = None
        policy, requests = self.policy, self.requests
        for attempt in range(attempts):
            remaining_ms = (deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                break
            mq, addr = policy.target(encoded.topic, last_broker, queue, sharding_key)
            if addr is None:
                last_error, last_broker = policy.no_master(mq), mq.broker_name
                continue
            ctx = policy.begin(msg, mq, addr, attempt)
            t0 = time.monotonic()
            try:
                timeout_s = split_send_timeout(remaining_ms, attempts - attempt) / 1000
                resp = self.rpc.client.invoke(addr, requests.command(mq, encoded), timeout_s)
                result = requests.result(addr, mq, encoded, resp)
            except PyMQError as exc:
                policy.ended(ctx, t0, None, exc)
                if not policy.may_retry(exc):
                    raise
                if exc.invalid_metadata:
                    policy.refresh_route(encoded.topic)
                last_error, last_broker = exc, mq.broker_name
                log.debug("send attempt %d to %s failed: %s", attempt + 1, mq.broker_name, exc)
                continue
            policy.ended(ctx, t0, result, None)
            if policy.goes_elsewhere(result, attempt + 1 < attempts):
                last_broker = mq.broker_name
                continue
            return result
        if last_error is None:
            raise timed_out(encoded.topic, budget_ms)
        raise last_error


def _born(born_timestamp: int | None) -> int | None:
    """A caller's born time: whole ms since the epoch, not negative."""
    if born_timestamp is None:
        return None
    if type(born_timestamp) is not int or born_timestamp < 0:
        raise MessageIllegalError(
            f"born_timestamp must be whole ms since the epoch, not {born_timestamp!r}"
        )
    return born_timestamp
