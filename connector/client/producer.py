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
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from typing import Any

import orjson

from connector.client.accumulator import (
    BatchKey,
    Done,
    Gathered,
    ProduceAccumulator,
    SyncWaiter,
    Waiter,
)
from connector.client.connection import DEFAULT_BUSY_POLL_US, RemotingConnection
from connector.client.futures import SendFuture
from connector.client.instance import ClientInstance
from connector.client.latency import (
    DEFAULT_LATENCY_MAX_MS,
    DEFAULT_NOT_AVAILABLE_DURATION_MS,
    MQFaultStrategy,
    split_send_timeout,
)
from connector.client.publish_info import TopicPublishInfo
from connector.client.results import SendContext, SendMessageHook, SendResult
from connector.client.rpc import error_for_response
from connector.errors import (
    BrokerBusyError,
    ConfigError,
    MessageIllegalError,
    MessageTooLargeError,
    PyMQError,
    RemotingError,
    RemotingTimeoutError,
    TopicNotExistError,
)
from connector.protocol.acl import Credentials
from connector.protocol.batch import BATCH_ENTRY_OVERHEAD, PreparedBatch, encode_batch
from connector.protocol.compression import CompressionType, compress
from connector.protocol.message import Message, MessageQueue, SysFlag
from connector.protocol.msgid import IdBlock, UniqKeyGenerator, offset_msg_ids
from connector.protocol.names import DEFAULT_TOPIC, validate_group, validate_topic
from connector.protocol.properties import PropertyKeys, encode_properties
from connector.protocol.record import MESSAGE_MAGIC_CODE, record_size
from connector.protocol.remoting import SEND_V2_LETTERS as V2
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from connector.protocol.route import TopicRouteData
from connector.protocol.status import SendStatus
from connector.protocol.wire import batch_offsets

__all__ = ["Producer"]

log = logging.getLogger(__name__)
MiB = 1 << 20
_ENTRY_HEAD = struct.Struct(">iIiii")  # a batch entry: TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN
_PROPLEN = struct.Struct(">h")
# answers that mean "stored" (the producer's SendStatus)
_STORED: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


class _Encoded:
    """A send's request body and what is needed to read its answer."""

    __slots__ = ("born", "compression", "data", "half", "msg_ids", "sizes", "topic")

    def __init__(
        self,
        topic: str,
        data: bytes | memoryview,
        msg_ids: Sequence[str],
        sizes: list[int],
        compression: CompressionType | None,
        born: int | None = None,
    ) -> None:
        self.topic = topic
        self.data = data
        self.msg_ids = msg_ids
        self.sizes = sizes
        self.compression = compression  # of a single message's body, or None
        self.born = born  # the request's born time (ms) if the caller set it, else now
        self.half: tuple[str, int] | None = None  # a batch half's (writer, batch) key


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
        self._accumulator: ProduceAccumulator | None = None
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
        self._uniq = UniqKeyGenerator()
        self._hooks: list[SendMessageHook] = []
        # by topic: its publish info and the route it was made from (the topic's own, or
        # TBW102's for a topic the brokers will create), as the client instance had it
        self._routes: dict[str, tuple[TopicPublishInfo, TopicRouteData]] = {}
        self._routes_lock = threading.Lock()
        self._local = threading.local()  # per thread: the batch encoding scratch
        self._headers: dict[tuple[str, int, CompressionType | None], dict[str, str]] = {}
        self._async_slots = _Slots(client_async_semaphore_value)
        self._async_workers = async_workers
        self._executor: ThreadPoolExecutor | None = None
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
                self._accumulator = ProduceAccumulator(
                    self._send_gathered,
                    on_settled=self._batch_settled,
                    max_delay_ms=self.batch_max_delay_ms,
                    max_bytes=self.batch_max_bytes,
                    total_max_bytes=self.total_batch_max_bytes,
                    name=self.group,
                )
                self._started = True
        return self

    def shutdown(self) -> None:
        """Wait for async sends in flight, stop background work, close connections."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            executor, self._executor = self._executor, None
        if self._accumulator is not None:  # what it gathered is sent first
            self._accumulator.close()
        if executor is not None:
            executor.shutdown(wait=True)
        self.instance.leave(self)  # UNREGISTER_CLIENT of the group; the last one closes

    def __enter__(self) -> Producer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def register_send_hook(self, hook: SendMessageHook) -> None:
        """``hook.send_message_before(ctx)`` / ``send_message_after(ctx)`` on every attempt."""
        self._hooks.append(hook)

    # -- routes ------------------------------------------------------------------------

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

    # -- encoding ----------------------------------------------------------------------

    def _check(self, msg: Message) -> None:
        validate_topic(msg.topic)
        msg.validate()
        if not msg.body:
            raise MessageIllegalError("message body is empty")
        if len(msg.body) > self.max_message_size:
            raise MessageTooLargeError(len(msg.body), self.max_message_size)

    def _encode_one(self, msg: Message) -> _Encoded:
        body = msg.body
        if (
            type(body) is bytes
            and 0 < len(body) <= self.compress_msg_body_over_howmuch
            and not (msg._keys or msg.properties or msg.delay_level or msg.flag)
        ):  # the common case, without a properties dict: ~2x faster per message
            return self._encode_plain_one(msg, body)
        self._check(msg)
        props = msg.all_properties()
        uniq = props.get(PropertyKeys.UNIQ_KEY) or self._uniq.next_id()
        props[PropertyKeys.UNIQ_KEY] = uniq
        body, compression = msg.body, None
        if len(body) > self.compress_msg_body_over_howmuch:
            packed = compress(body, self.compress_type, self.compress_level)
            if len(packed) < len(body):
                body, compression = packed, self.compress_type
        encoded_props = encode_properties(props)
        size = record_size(len(body), len(msg.topic.encode()), len(encoded_props))
        data = encode_batch([(body, msg.flag, encoded_props)])
        return _Encoded(msg.topic, data, [uniq], [size], compression)

    def _encode_plain_one(self, msg: Message, body: bytes) -> _Encoded:
        """A message of only a body (and perhaps tags), encoded as ``_encode_one`` would
        (the same batch entry, byte for byte)."""
        topic = msg.topic
        validate_topic(topic)
        tags = msg.tags
        uniq = self._uniq.next_id()
        props = b"UNIQ_KEY\x01" + uniq.encode() + b"\x02"
        if tags:
            msg.validate()
            props = b"TAGS\x01" + tags.encode() + b"\x02" + props
        n, plen = len(body), len(props)
        data = b"".join(
            (
                _ENTRY_HEAD.pack(
                    BATCH_ENTRY_OVERHEAD + n + plen, MESSAGE_MAGIC_CODE,
                    zlib.crc32(body) & 0x7FFFFFFF, 0, n,
                ),
                body,
                _PROPLEN.pack(plen),
                props,
            )
        )  # fmt: skip
        size = record_size(n, len(topic.encode()), plen)
        return _Encoded(topic, data, [uniq], [size], None)

    def _encode_batch(self, msgs: Sequence[Message], *, scratch: bool = False) -> _Encoded:
        if not msgs:
            raise MessageIllegalError("a batch needs at least one message")
        topic = validate_topic(msgs[0].topic)
        if len(msgs) >= _COMPILED_BATCH_MIN and _plain(msgs, topic):
            plain = self._encode_plain(msgs, topic, scratch=scratch)
            if plain is not None:
                return plain
        topic_len = len(topic.encode())
        limit = self.max_message_size
        entries, sizes, msg_ids = [], [], []
        ids = self._uniq.next_ids(len(msgs))
        for msg, uniq in zip(msgs, ids, strict=True):
            body = msg.body
            if msg.topic != topic:
                raise MessageIllegalError("every message of a batch must have the same topic")
            if not body or not isinstance(body, bytes):
                raise MessageIllegalError("message body must be non-empty bytes")
            if len(body) > limit:
                raise MessageTooLargeError(len(body), limit)
            if msg.delay_level:
                raise MessageIllegalError("delay levels are not supported in batches")
            if msg.tags or msg._keys or msg.properties:  # _keys: None unless keys were set
                msg.validate()
                props = msg.all_properties()
                key = props.setdefault(PropertyKeys.UNIQ_KEY, uniq)  # the caller's, if set
                encoded = encode_properties(props)
            else:  # the common case, without building a dict
                key = uniq
                encoded = b"UNIQ_KEY\x01" + uniq.encode() + b"\x02"
            entries.append((body, msg.flag, encoded))
            sizes.append(record_size(len(body), topic_len, len(encoded)))
            msg_ids.append(key)
        data = encode_batch(entries)
        if len(data) > limit:
            raise MessageTooLargeError(
                len(data), limit, message=f"batch of {len(data)} bytes exceeds {limit}"
            )
        return _Encoded(topic, data, msg_ids, sizes, None)

    def _scratch(self, size: int) -> Any:
        """This thread's buffer for encoding a batch of ``size`` bytes (a numpy uint8
        array, grown as needed): a sync ``send_batch`` is done with it before the
        thread encodes the next one (see ``send_batch`` for a hook that sends)."""
        buf = getattr(self._local, "scratch", None)
        if buf is None or len(buf) < size:
            import numpy as np  # noqa: PLC0415

            buf = self._local.scratch = np.empty(max(size, 1 << 20), dtype=np.uint8)
        return buf

    def _encode_plain(
        self, msgs: Sequence[Message], topic: str, *, scratch: bool
    ) -> _Encoded | None:
        """Messages with a body and perhaps tags, encoded in compiled code (see
        ``connector.protocol.fastbatch``); None sends them down the per-message path."""
        import numpy as np  # noqa: PLC0415 - numpy loads with the first large batch

        from connector.protocol.fastbatch import encode_plain  # noqa: PLC0415

        n = len(msgs)
        bodies = [m.body for m in msgs]
        tags = [m.tags for m in msgs]
        tag_data = tag_off = has_tag = None
        if any(tags):
            try:
                raw = [t.encode() if t else b"" for t in tags]
            except UnicodeEncodeError:  # a lone surrogate: the per-message path says so
                return None
            tag_data = np.frombuffer(b"".join(raw), dtype=np.uint8)
            tag_off = _offsets(np, map(len, raw), n)
            has_tag = np.fromiter(map(bool, raw), dtype=np.bool_, count=n)
        body = np.frombuffer(b"".join(bodies), dtype=np.uint8)
        body_off = _offsets(np, map(len, bodies), n)
        ids = self._uniq.next_block(n)
        limit = self.max_message_size
        batch = encode_plain(
            topic, body, body_off, tag_data, tag_off, has_tag, ids, limit,
            scratch=self._scratch if scratch else None,
        )  # fmt: skip
        if len(batch.data) > limit:
            raise MessageTooLargeError(
                len(batch.data), limit, message=f"batch of {len(batch.data)} bytes exceeds {limit}"
            )
        return _Encoded(topic, batch.data, ids, batch.record_sizes, None)

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
        encoded = self._encode_one(msg)
        encoded.born = _born(born_timestamp)
        if (
            self.auto_batch
            and encoded.born is None  # a batch carries the born time of its sending
            and self._gathers(encoded, msg, sharding_key, timeout_ms)
        ):
            acc = self._accumulator
            assert acc is not None
            key = (encoded.topic, queue, False)
            if acc.enter_direct(key):  # the wire is idle: alone, reading its own answer
                try:
                    return self._send(encoded, msg, self.retry_times_when_send_failed, queue=queue)
                finally:
                    acc.leave_direct(key)
            waiter = SyncWaiter()
            if self._accumulator_add(encoded, msg, key, waiter):
                return self._wait(waiter)
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
            encoded = self._encode_batch(msgs, scratch=not nested)
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
        return self._uniq.next_block(count)

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
        encoded = _Encoded(topic, batch.data, batch.msg_ids, batch.record_sizes, None, born)
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
        acc = self._accumulator
        if acc is None or self._closed:
            self.start()
            acc = self._accumulator
            assert acc is not None
        # bad input fails here, in the caller's thread; a message of only a body (and
        # tags) is encoded later, with its batch
        plain = sharding_key is None and self._plain_checked(msg)
        encoded = None if plain else self._encode_one(msg)
        if not self._async_slots.acquire(timeout=self.send_msg_timeout_ms / 1000):
            raise BrokerBusyError("too many async sends in flight (client_async_semaphore_value)")
        future = SendFuture()
        if callback is not None:
            future.add_done_callback(lambda f: _run_callback(callback, f))
        try:
            # a gathered message's slot comes back with its batch (_batch_settled)
            if encoded is None:  # plain
                if acc.add((msg.topic, queue, True), msg, _plain_size(msg), future):
                    return future
                encoded = self._encode_one(msg)
            elif self._gathers(encoded, msg, sharding_key, None) and self._accumulator_add(
                encoded, msg, (encoded.topic, queue, True), future
            ):
                return future
            self._send_async(
                encoded, msg, self.retry_times_when_send_async_failed,
                _settle(future, self._async_slots),
                queue=queue, sharding_key=sharding_key,
            )  # fmt: skip
        except BaseException as exc:
            if not future.done():
                self._async_slots.release(1)
                future.set_exception(exc)
            raise
        return future

    def _plain_checked(self, msg: Message) -> bool:
        """Whether ``msg`` is only a body (bytes, not compressed) and perhaps tags, which
        a batch encodes in compiled code; such a message is checked here."""
        body = msg.body
        if not (
            type(body) is bytes
            and 0 < len(body) <= self.compress_msg_body_over_howmuch
            and not (msg._keys or msg.properties or msg.delay_level or msg.flag)
        ):
            return False
        validate_topic(msg.topic)
        tags = msg.tags
        if tags:
            msg.validate()
            try:
                tags.encode()
            except UnicodeEncodeError:
                raise MessageIllegalError("tags are not valid text (a lone surrogate?)") from None
        return True

    def _batch_settled(self, key: BatchKey, count: int) -> None:
        if key[2]:  # async sends: their slots
            self._async_slots.release(count)

    # -- auto-batching -----------------------------------------------------------------

    def _gathers(
        self, encoded: _Encoded, msg: Message, sharding_key: str | None, timeout_ms: int | None
    ) -> bool:
        """Whether ``msg`` may join a batch: not with a compressed body, a delay level,
        a sharding key or a timeout of its own."""
        return (
            self._accumulator is not None
            and encoded.compression is None
            and not msg.delay_level
            and sharding_key is None
            and timeout_ms is None
        )

    def _accumulator_add(
        self, encoded: _Encoded, msg: Message, key: BatchKey, waiter: Waiter
    ) -> bool:
        """False when the accumulator holds ``total_batch_max_bytes``: send it alone."""
        acc = self._accumulator
        assert acc is not None
        # a single message's encoding is bytes of its own, never a view of the scratch
        assert isinstance(encoded.data, bytes)
        return acc.add(key, msg, len(encoded.data), waiter, encoded)

    def _wait(self, waiter: SyncWaiter) -> SendResult:
        """A sync send's result from its batch: its wait behind the batch on the wire and
        its own send are each bounded by ``send_msg_timeout_ms``."""
        limit_s = (self.batch_max_delay_ms + 2 * self.send_msg_timeout_ms) / 1000 + 5
        result = waiter.wait(limit_s)
        if result is None:
            raise RemotingTimeoutError(f"no answer for an auto-batched send within {limit_s:.1f} s")
        return result

    def _send_gathered(self, key: BatchKey, batch: Gathered, done: Done) -> None:
        topic, queue, is_async = key
        msgs = batch.msgs
        encoded: _Encoded | None = None
        if len(msgs) >= _COMPILED_BATCH_MIN and not any(batch.encoded):
            encoded = self._encode_plain(msgs, topic, scratch=False)
        if encoded is None:
            parts: list[bytes] = []
            ids: list[str] = []
            sizes: list[int] = []
            for msg, pre in zip(msgs, batch.encoded, strict=True):
                one = pre if isinstance(pre, _Encoded) else self._encode_plain_one(msg, msg.body)
                parts.append(one.data)  # type: ignore[arg-type]  # a single message: bytes
                ids.append(one.msg_ids[0])
                sizes.append(one.sizes[0])
            encoded = _Encoded(topic, b"".join(parts), ids, sizes, None)
        retries = (
            self.retry_times_when_send_async_failed
            if is_async
            else self.retry_times_when_send_failed
        )
        self._send_async(encoded, msgs[0] if len(msgs) == 1 else msgs, retries, done, queue=queue)

    def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        """Send without waiting for (or retrying on) the answer (RocketMQ's ONEWAY: the
        broker does not answer)."""
        self.start()
        encoded = self._encode_one(msg)
        info = self.publish_info(encoded.topic)
        mq = self._pick_queue(info, None, queue, None)
        addr = info.broker_addrs.get(mq.broker_name)
        if addr is None:
            raise TopicNotExistError(f"broker {mq.broker_name} has no master address")
        cmd = self._send_command(mq, encoded)
        self.rpc.client.invoke_oneway(addr, cmd)

    def _pick_queue(
        self,
        info: TopicPublishInfo,
        last_broker: str | None,
        queue: MessageQueue | None,
        sharding_key: str | None,
    ) -> MessageQueue:
        if queue is not None:
            return queue
        if sharding_key is not None:
            queues = info.message_queues
            return queues[zlib.crc32(sharding_key.encode()) % len(queues)]
        return self.fault_strategy.select_one_message_queue(info, last_broker)

    def _send(
        self,
        encoded: _Encoded,
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
        for attempt in range(attempts):
            remaining_ms = (deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                break
            info = self.publish_info(encoded.topic)
            mq = self._pick_queue(info, last_broker, queue, sharding_key)
            addr = info.broker_addrs.get(mq.broker_name)
            if addr is None:
                last_error = TopicNotExistError(f"broker {mq.broker_name} has no master address")
                self._refresh_route(encoded.topic)
                last_broker = mq.broker_name
                continue
            ctx = SendContext(self.group, msg, mq, mq.broker_name, addr, attempt)
            self._hooks_before(ctx)
            t0 = time.monotonic()
            try:
                result = self._send_once(
                    addr, mq, encoded, split_send_timeout(remaining_ms, attempts - attempt)
                )
            except PyMQError as exc:
                self._attempt_ended(ctx, t0, None, exc)
                if not (exc.retriable or exc.invalid_metadata):
                    raise
                if exc.invalid_metadata:
                    self._refresh_route(encoded.topic)
                last_error, last_broker = exc, mq.broker_name
                log.debug("send attempt %d to %s failed: %s", attempt + 1, mq.broker_name, exc)
                continue
            self._attempt_ended(ctx, t0, result, None)
            if self._retries_status(result, attempt + 1 < attempts):
                last_broker = mq.broker_name
                continue
            return result
        if last_error is None:
            raise RemotingTimeoutError(
                f"send to {encoded.topic} timed out after {budget_ms} ms (send_msg_timeout_ms)"
            )
        raise last_error

    def _attempt_ended(
        self, ctx: SendContext, t0: float, result: SendResult | None, exc: PyMQError | None
    ) -> None:
        """An attempt's outcome into its context, the broker's fault item and the hooks
        (a failure that may mean the broker is down isolates it)."""
        ctx.latency_ms = (time.monotonic() - t0) * 1000
        ctx.result, ctx.exception = result, exc
        self.fault_strategy.update_fault_item(
            ctx.broker_name, ctx.latency_ms, isolation=exc is not None and exc.retriable
        )
        self._hooks_after(ctx)

    def _retries_status(self, result: SendResult, attempts_left: bool) -> bool:
        """A stored but not SEND_OK answer goes to another broker when so configured."""
        return (
            result.status is not SendStatus.SEND_OK
            and self.retry_another_broker_when_not_store_ok
            and attempts_left
        )

    def _send_command(self, mq: MessageQueue, encoded: _Encoded) -> RemotingCommand:
        """SEND_BATCH_MESSAGE of ``encoded`` to ``mq`` (one message is a batch of one;
        the broker applies the single-message rules to it)."""
        compression = encoded.compression
        key = (mq.topic, mq.queue_id, compression)
        ext = self._headers.get(key)
        if ext is None:  # the fields that depend on the queue only, made once per queue
            sys_flag = SysFlag.COMPRESSED | compression.flag if compression else 0
            ext = {
                V2["producerGroup"]: self.group,
                V2["topic"]: mq.topic,
                V2["defaultTopic"]: DEFAULT_TOPIC,
                V2["defaultTopicQueueNums"]: str(self.default_topic_queue_nums),
                V2["queueId"]: str(mq.queue_id),
                V2["sysFlag"]: str(sys_flag),
                V2["flag"]: "0",
                V2["properties"]: "",
                V2["reconsumeTimes"]: "0",
                V2["unitMode"]: "false",
                V2["batch"]: "true",
                V2["brokerName"]: mq.broker_name,
                "offsetRuns": "true",  # pymq's broker: where a batch landed, not every msgId
            }
            if len(self._headers) < 65_536:
                self._headers[key] = ext
        ext = dict(ext)
        born = encoded.born
        ext[V2["bornTimestamp"]] = str(int(time.time() * 1000) if born is None else born)
        if encoded.half is not None:  # one half holding the batch, for a batch commit
            ext[V2["sysFlag"]] = str(SysFlag.TRANSACTION_PREPARED)
            ext["txWriter"], ext["txBatch"] = encoded.half[0], str(encoded.half[1])
            del ext["offsetRuns"]
        return RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, ext, encoded.data)

    def _result_of(
        self, addr: str, mq: MessageQueue, encoded: _Encoded, resp: RemotingCommand
    ) -> SendResult:
        """The answer to a send as a ``SendResult``, or the error it carries."""
        status = _STORED.get(resp.code)
        if status is None:
            raise error_for_response(addr, resp)
        r = resp.ext
        queue = MessageQueue(mq.topic, mq.broker_name, int(r["queueId"]))
        queue_offset = int(r["queueOffset"])
        if encoded.half is not None:  # the half's place: for the batch commit
            return SendResult(status, encoded.msg_ids[0], r["msgId"], queue, queue_offset)
        sizes = encoded.sizes
        if "offsetRuns" not in r:  # one message (or a server that answers as RocketMQ)
            given = tuple(r["msgId"].split(","))
            ids = tuple(encoded.msg_ids)
            return SendResult(status, ids[0], given[0], queue, queue_offset, ids, given)
        host = r["storeHost"]
        runs = [
            [int(i), int(o)] for i, _, o in (p.partition(":") for p in r["offsetRuns"].split(";"))
        ]

        # a batch: its offset msgIds (~0.3 us each) are made when first read
        def offset_ids() -> tuple[str, ...]:
            return offset_msg_ids(host, batch_offsets(runs, sizes))

        return SendResult.of_batch(status, queue, queue_offset, encoded.msg_ids, offset_ids)

    def _send_once(
        self, addr: str, mq: MessageQueue, encoded: _Encoded, timeout_ms: float
    ) -> SendResult:
        cmd = self._send_command(mq, encoded)
        resp = self.rpc.client.invoke(addr, cmd, timeout_ms / 1000)
        return self._result_of(addr, mq, encoded, resp)

    # -- the asynchronous send path ----------------------------------------------------

    def _send_async(
        self,
        encoded: _Encoded,
        msg: Message | list[Message],
        retries: int,
        done: Done,
        *,
        queue: MessageQueue | None = None,
        sharding_key: str | None = None,
    ) -> None:
        """The send path of ``_send`` without a thread waiting: each attempt is a request
        in flight whose answer (or timeout) decides; ``done(result, error)`` runs once."""
        deadline = time.monotonic() + self.send_msg_timeout_ms / 1000
        state = _AsyncSend(encoded, msg, 1 + retries, deadline, queue, sharding_key, done)
        self._attempt_async(state)

    def _attempt_async(self, st: _AsyncSend) -> None:
        topic = st.encoded.topic
        while st.attempt < st.attempts:
            remaining_ms = (st.deadline - time.monotonic()) * 1000
            if remaining_ms <= 0:
                break
            attempt = st.attempt
            st.attempt += 1
            try:
                info = self.publish_info(topic)
            except PyMQError as exc:
                st.done(None, exc)
                return
            mq = self._pick_queue(info, st.last_broker, st.queue, st.sharding_key)
            addr = info.broker_addrs.get(mq.broker_name)
            if addr is None:
                st.last_error = TopicNotExistError(f"broker {mq.broker_name} has no master address")
                st.last_broker = mq.broker_name
                continue
            ctx = SendContext(self.group, st.msg, mq, mq.broker_name, addr, attempt)
            self._hooks_before(ctx)
            timeout_s = split_send_timeout(remaining_ms, st.attempts - attempt) / 1000
            t0 = time.monotonic()

            def answered(
                resp: RemotingCommand | None,
                err: BaseException | None,
                mq: MessageQueue = mq,
                addr: str = addr,
                ctx: SendContext = ctx,
                t0: float = t0,
            ) -> None:
                self._answered_async(st, mq, addr, ctx, t0, resp, err)

            try:
                conn = self.rpc.client.connection(addr)
                conn.invoke_async(self._send_command(mq, st.encoded), answered, timeout_s)
            except PyMQError as exc:
                if self._failed_async(st, mq, ctx, t0, exc):
                    continue
                return
            return
        st.done(None, st.last_error or _timed_out(topic, self.send_msg_timeout_ms))

    def _answered_async(
        self,
        st: _AsyncSend,
        mq: MessageQueue,
        addr: str,
        ctx: SendContext,
        t0: float,
        resp: RemotingCommand | None,
        err: BaseException | None,
    ) -> None:
        """A send's answer, on the connection's reader thread (or the timeout's)."""
        result: SendResult | None = None
        if resp is not None:
            try:
                result = self._result_of(addr, mq, st.encoded, resp)
            except PyMQError as exc:
                err = exc
            except Exception as exc:  # noqa: BLE001 - a defect: the sender learns it
                st.done(None, exc)
                return
        if result is None:
            failure = err if isinstance(err, PyMQError) else RemotingError(str(err))
            if self._failed_async(st, mq, ctx, t0, failure):
                self._retry_async(st, failure)
            return
        self._attempt_ended(ctx, t0, result, None)
        if self._retries_status(result, st.attempt < st.attempts):
            st.last_broker = mq.broker_name
            self._retry_async(st, None)
            return
        st.done(result, None)

    def _failed_async(
        self, st: _AsyncSend, mq: MessageQueue, ctx: SendContext, t0: float, exc: PyMQError
    ) -> bool:
        """Record a failed attempt; True if another may follow, else ``done`` was called."""
        self._attempt_ended(ctx, t0, None, exc)
        if not (exc.retriable or exc.invalid_metadata) or st.attempt >= st.attempts:
            st.done(None, exc)
            return False
        log.debug("send attempt %d to %s failed: %s", st.attempt, mq.broker_name, exc)
        st.last_error, st.last_broker = exc, mq.broker_name
        return True

    def _retry_async(self, st: _AsyncSend, exc: PyMQError | None) -> None:
        """The next attempt, on the producer's pool: it may look a route up (blocking),
        which must not hold a connection's reader thread."""

        def run() -> None:
            if exc is not None and exc.invalid_metadata:
                try:
                    self._refresh_route(st.encoded.topic)
                except PyMQError as refresh_error:
                    log.debug("refreshing the route failed: %s", refresh_error)
            self._attempt_async(st)

        executor = self._executor
        try:
            if executor is None:
                raise RuntimeError("shut down")
            executor.submit(run)
        except RuntimeError:  # shut down: the send ends with its last error
            st.done(None, st.last_error or PyMQError("this producer was shut down"))

    def _hooks_before(self, ctx: SendContext) -> None:
        for hook in self._hooks:
            try:
                hook.send_message_before(ctx)
            except Exception:  # a broken hook must not break sending; it is logged
                log.exception("send hook %r failed before a send", hook)

    def _hooks_after(self, ctx: SendContext) -> None:
        for hook in self._hooks:
            try:
                hook.send_message_after(ctx)
            except Exception:  # a broken hook must not break sending; it is logged
                log.exception("send hook %r failed after a send", hook)


class _Slots:
    """``client_async_semaphore_value``: async sends in flight, counted. A free slot
    is a token in a deque (its pop and extend are atomic, no lock to take); a sender
    waits on the condition only when all are taken."""

    __slots__ = ("_cond", "_tokens", "_waiting", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._tokens = collections.deque(itertools.repeat(None, limit))
        self._cond = threading.Condition(threading.Lock())
        self._waiting = 0

    def acquire(self, timeout: float) -> bool:
        try:
            self._tokens.pop()
            return True
        except IndexError:
            pass
        deadline = time.monotonic() + timeout
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    try:
                        self._tokens.pop()
                        return True
                    except IndexError:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return False
                        self._cond.wait(left)
            finally:
                self._waiting -= 1

    def release(self, count: int) -> None:
        self._tokens.extend(itertools.repeat(None, count))
        if self._waiting:  # a waiter counted itself before its last look at the tokens
            with self._cond:
                self._cond.notify(count)


class _AsyncSend:
    """One asynchronous send across its attempts."""

    __slots__ = (
        "attempt", "attempts", "deadline", "done", "encoded", "last_broker", "last_error",
        "msg", "queue", "sharding_key",
    )  # fmt: skip

    def __init__(
        self,
        encoded: _Encoded,
        msg: Message | list[Message],
        attempts: int,
        deadline: float,
        queue: MessageQueue | None,
        sharding_key: str | None,
        done: Done,
    ) -> None:
        self.encoded = encoded
        self.msg = msg
        self.attempts = attempts
        self.attempt = 0
        self.deadline = deadline
        self.queue = queue
        self.sharding_key = sharding_key
        self.done = _once(done)
        self.last_broker: str | None = None
        self.last_error: PyMQError | None = None


def _once(done: Done) -> Done:
    fired = threading.Lock()

    def call(result: SendResult | None, error: BaseException | None) -> None:
        if fired.acquire(blocking=False):
            done(result, error)

    return call


def _settle(future: Future[SendResult], slots: _Slots) -> Done:
    def done(result: SendResult | None, error: BaseException | None) -> None:
        slots.release(1)
        with contextlib.suppress(InvalidStateError):  # cancelled by its caller
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]

    return done


def _born(born_timestamp: int | None) -> int | None:
    """A caller's born time: whole ms since the epoch, not negative."""
    if born_timestamp is None:
        return None
    if type(born_timestamp) is not int or born_timestamp < 0:
        raise MessageIllegalError(
            f"born_timestamp must be whole ms since the epoch, not {born_timestamp!r}"
        )
    return born_timestamp


def _plain_size(msg: Message) -> int:
    """About what a plain message takes in a batch request: its body, its tags and
    the entry's fixed part with a UNIQ_KEY."""
    tags = msg.tags
    return len(msg.body) + (len(tags) + 6 if tags else 0) + 62


def _timed_out(topic: str, budget_ms: int) -> RemotingTimeoutError:
    return RemotingTimeoutError(
        f"send to {topic} timed out after {budget_ms} ms (send_msg_timeout_ms)"
    )


def _run_callback(
    callback: Callable[[SendResult | None, BaseException | None], None],
    future: Future[SendResult],
) -> None:
    exc = future.exception()
    try:
        callback(None if exc else future.result(), exc)
    except Exception:  # the caller's callback: log, never kill the worker
        log.exception("send_async callback failed")


# batches at least this large are encoded in compiled code when their messages are plain
_COMPILED_BATCH_MIN = 32


def _plain(msgs: Sequence[Message], topic: str) -> bool:
    """Every message has ``topic``, a bytes body, and nothing but perhaps tags."""
    for m in msgs:
        if (
            m.topic != topic
            or m._keys  # None unless keys were set (reading .keys would make a list)
            or m.properties
            or m.delay_level
            or m.flag
            or type(m.body) is not bytes
        ):
            return False
    return True


def _offsets(np: Any, lengths: Iterable[int], n: int) -> Any:
    """``[0, l0, l0+l1, ...]`` as int64: where each of n pieces starts in their join."""
    out = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(lengths, dtype=np.int64, count=n), out=out[1:])
    return out
