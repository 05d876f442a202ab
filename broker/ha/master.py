"""The master's HA service: its slaves' connections, the in-sync set, confirmOffset.

A slave connects to the HA port and says who it is (HELLO). The master
refuses, with a log line, anything that is not a slave of this broker name
and cluster with the same segment size; otherwise it compares the slave's
epochs with its own (``consistent_point``) and tells the slave where its
log agrees with the master's (WELCOME). The slave truncates to that point;
the master streams CommitLog bytes from there (DATA), never across a
segment's end, and the slave acknowledges how far it has written (ACK).

Streaming is pushed, not polled: every append calls ``notify`` (on the
event loop, or handed to it), which writes what is new straight to each
caught-up slave's socket, so a slave receives a send's bytes while the
master is still answering it (or fdatasync'ing them). A connection whose
socket buffer is full waits for asyncio's ``resume_writing``.

In-sync set and confirmOffset (RocketMQ 5): a slave is in sync while it
caught up with the master at some time in the last
``ha_max_time_slave_not_catchup_ms``; it caught up at time t when it
acknowledged everything the master had at t. ``confirm_offset`` is the
lowest offset every in-sync slave acknowledged (the master's end with
none). Slaves make only that much readable. SYNC_MASTER sends wait
(``wait_replicated``) until the confirm offset passes their end: many sends
share one ACK, as they share an fdatasync; FLUSH_SLAVE_TIMEOUT after
``sync_flush_timeout_ms``, SLAVE_NOT_AVAILABLE when no slave is in sync.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from broker.config import BrokerConfig
from broker.ha.metadata import HAMetadata
from broker.ha.protocol import (
    HA_MAGIC,
    HA_VERSION,
    MAX_CONTROL_FRAME,
    Frame,
    FrameDecoder,
    HaFrameError,
    beat,
    data_header,
    json_frame,
    unpack_ack,
    unpack_json,
)
from broker.store.epochs import EpochFile, consistent_point, parse_entries
from broker.store.results import PutMessageStatus
from broker.store.store import MessageStore
from connector.errors import PyMQError, StoreError
from connector.server.acl import AclService
from connector.server.acl.model import ADMIN

__all__ = ["HAService", "SlaveState"]

log = logging.getLogger(__name__)

HELLO_MAX_BYTES = 64 << 10  # a handshake is small; anything bigger is refused
WRITE_HIGH_WATER = 8 << 20  # socket buffer the master fills before it waits
FULL_TRANSFERS_KEPT = 4096  # caught-up points remembered per slave
SMALL_FRAME = 64 << 10  # a DATA frame up to this size is copied into one write
# an ASYNC_MASTER tells its slaves a new confirm offset at most this long after it moved
# (DATA frames carry it too): a BEAT for every acknowledgement cost as much as the data
ASYNC_BEAT_DELAY_S = 0.002


@dataclass(frozen=True, slots=True)
class SlaveState:
    """One connected slave, as status and metrics show it."""

    broker_id: int
    addr: str
    ack_offset: int
    lag_bytes: int
    in_sync: bool
    caught_up_ms_ago: int | None


class _Waiter:
    __slots__ = ("deadline", "end", "future")

    def __init__(self, end: int, deadline: float, future: asyncio.Future[PutMessageStatus]):
        self.end = end
        self.deadline = deadline
        self.future = future


class HAService:
    """Use from the broker's event loop, except ``notify`` (any thread)."""

    def __init__(
        self,
        store: MessageStore,
        config: BrokerConfig,
        epochs: EpochFile,
        metadata: HAMetadata,
        *,
        clock: Callable[[], float] = time.monotonic,
        acl: AclService | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.acl = acl  # with ACL on, a slave's HELLO is signed by an admin account
        self.tls = tls  # the HA port serves TLS, as the broker's other listeners
        self.epochs = epochs
        self.metadata = metadata
        self.clock = clock
        self.sync = config.broker_role.value == "SYNC_MASTER"
        self.connections: dict[int, _SlaveConnection] = {}
        self.confirm_offset = store.commit_log.max_offset()
        self.refused = 0  # handshakes refused (metrics)
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._tick: asyncio.Task[None] | None = None
        self._meta_version: tuple[Any, ...] = (None,)  # of the metadata last sent
        self._had_in_sync = False
        self._beat_timer: asyncio.TimerHandle | None = None
        # SYNC_MASTER: readers see what the in-sync slaves have (``store.read_limit``);
        # appends wait here, with the CommitLog end when they were made, to wake long
        # polls once they are readable
        self.arrival_listeners: list[Callable[[str, int, int], None]] = []
        self._unreadable: collections.deque[tuple[int, str, int, int]] = collections.deque()

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self.confirm_offset = self.store.commit_log.max_offset()
        self._server = await loop.create_server(
            lambda: _SlaveConnection(self), sock=sock, ssl=self.tls
        )
        self._tick = asyncio.create_task(self._ticker(), name="ha-master-tick")
        self.store.arrival_listeners.append(self.notify)
        self.store.log_listeners.append(self.logged)

    async def stop(self) -> None:
        if self.notify in self.store.arrival_listeners:
            self.store.arrival_listeners.remove(self.notify)
        if self.logged in self.store.log_listeners:
            self.store.log_listeners.remove(self.logged)
        self.store.read_limit = None
        self._release_arrivals()
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._beat_timer is not None:
            self._beat_timer.cancel()
            self._beat_timer = None
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections.values()):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        self._finish_waiters(PutMessageStatus.SLAVE_NOT_AVAILABLE)

    # -- appends -> slaves ---------------------------------------------------------------

    def notify(self, topic: str = "", queue_id: int = 0, offset: int = 0) -> None:
        """Store arrival listener (any thread): push what is new to the slaves, and tell
        ``arrival_listeners`` once it is readable."""
        if threading.get_ident() == self._loop_thread:
            self._arrived(topic, queue_id, offset)
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(self._arrived, topic, queue_id, offset)

    def logged(self) -> None:
        """Store log listener (any thread; under the put lock): records are in the
        CommitLog, their queue entries not yet: push the bytes to the slaves now, so
        they append and acknowledge while this broker dispatches (the arrival that
        follows finds them sent). Off the loop, handed to it."""
        if threading.get_ident() == self._loop_thread:
            self._pump_all()
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(self._pump_all)

    def _pump_all(self) -> None:
        if self.metadata.topics.table.data_version != self._meta_version[0]:
            return  # a topic made since: the arrival sends its config before its records
        for conn in list(self.connections.values()):
            conn.pump()

    def _arrived(self, topic: str, queue_id: int, offset: int) -> None:
        if self.metadata.topics.table.data_version != self._meta_version[0]:
            self._send_metadata()  # a topic made since: its config goes before its records
        for conn in list(self.connections.values()):
            conn.pump()
        if self.store.read_limit is None:
            for listener in self.arrival_listeners:
                listener(topic, queue_id, offset)
        else:
            end = self.store.commit_log.max_offset()  # at or past the arrival's record
            self._unreadable.append((end, topic, queue_id, offset))

    def _send_metadata(self) -> None:
        self._meta_version = self.metadata.version()
        payload = json_frame(Frame.META, self.metadata.snapshot())
        for conn in self.connections.values():
            conn.send_raw(payload)

    def _release_arrivals(self) -> None:
        limit = self.store.read_limit
        pending = self._unreadable
        while pending and (limit is None or pending[0][0] <= limit):
            _, topic, queue_id, offset = pending.popleft()
            for listener in self.arrival_listeners:
                listener(topic, queue_id, offset)

    # -- the in-sync set and the confirm offset -------------------------------------------

    def in_sync(self, conn: _SlaveConnection, now: float | None = None) -> bool:
        if not conn.streaming or conn.caught_up_at is None:
            return False
        now = self.clock() if now is None else now
        return now - conn.caught_up_at <= self.config.ha_max_time_slave_not_catchup_ms / 1000

    def in_sync_count(self) -> int:
        now = self.clock()
        return sum(1 for c in self.connections.values() if self.in_sync(c, now))

    def update_confirm(self) -> None:
        """Recompute the confirm offset; tell the slaves first, then answer the sends
        it covers (so a slave knows an offset is confirmed before any producer does)."""
        now = self.clock()
        acks = [c.ack_offset for c in self.connections.values() if self.in_sync(c, now)]
        max_offset = self.store.commit_log.max_offset()
        confirm = min(acks) if acks else max_offset
        if acks and not self._had_in_sync:
            log.info("HA: %d slave(s) in sync", len(acks))
        elif not acks and self._had_in_sync:
            log.warning("HA: no slave is in sync any more")
        self._had_in_sync = bool(acks)
        if confirm != self.confirm_offset:
            self.confirm_offset = confirm
            if self.sync:  # before any send it covers is answered, or any reader sees it
                self._beat_all()
            elif self._beat_timer is None and self._loop is not None:
                # nobody waits on it: one BEAT for the acknowledgements of a few ms
                self._beat_timer = self._loop.call_later(ASYNC_BEAT_DELAY_S, self._beat_all)
        if self.sync:
            self._limit_reads(confirm if acks else None, max_offset)
        if not acks:
            self._finish_waiters(PutMessageStatus.SLAVE_NOT_AVAILABLE)
            return
        waiters = self._waiters
        while waiters and waiters[0].end <= confirm:
            w = waiters.popleft()
            if not w.future.done():
                w.future.set_result(PutMessageStatus.PUT_OK)

    def _beat_all(self) -> None:
        self._beat_timer = None
        for conn in self.connections.values():
            conn.send_beat()

    def _limit_reads(self, confirm: int | None, max_offset: int) -> None:
        """Readers see what the slaves have confirmed, never less than they saw: with no
        slave in sync, every record (stored, SLAVE_NOT_AVAILABLE); once one is, the
        limit starts at the log's end (all of it was readable) and follows the confirm
        offset up."""
        store = self.store
        if confirm is None:
            store.read_limit = None
        elif store.read_limit is None:
            store.read_limit = max(confirm, max_offset)
        else:
            store.read_limit = max(store.read_limit, confirm)
        self._release_arrivals()

    def _finish_waiters(self, status: PutMessageStatus) -> None:
        waiters, self._waiters = self._waiters, collections.deque()
        for w in waiters:
            if not w.future.done():
                w.future.set_result(status)

    def wait_replicated(self, end_offset: int) -> asyncio.Future[PutMessageStatus]:
        """SYNC_MASTER: PUT_OK once every in-sync slave has the log up to ``end_offset``;
        SLAVE_NOT_AVAILABLE at once (none in sync) or when the last leaves;
        FLUSH_SLAVE_TIMEOUT after ``sync_flush_timeout_ms``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[PutMessageStatus] = loop.create_future()
        if self.in_sync_count() == 0:
            fut.set_result(PutMessageStatus.SLAVE_NOT_AVAILABLE)
        elif self.confirm_offset >= end_offset:
            fut.set_result(PutMessageStatus.PUT_OK)
        else:
            timeout_s = self.store.config.sync_flush_timeout_ms / 1000
            self._waiters.append(_Waiter(end_offset, self.clock() + timeout_s, fut))
        return fut

    def _expire_waiters(self) -> None:
        now = self.clock()
        waiters = self._waiters
        while waiters and waiters[0].deadline <= now:
            w = waiters.popleft()
            if not w.future.done():
                w.future.set_result(PutMessageStatus.FLUSH_SLAVE_TIMEOUT)

    async def _ticker(self) -> None:
        """Heartbeats to idle slaves, metadata, the in-sync set, expired waits, and
        connections that went silent."""
        beat_s = self.config.ha_send_heartbeat_interval_ms / 1000
        meta_s = self.config.ha_metadata_interval_ms / 1000
        silent_s = self.config.ha_housekeeping_interval_ms / 1000
        step = min(beat_s, meta_s, 0.1)
        while True:
            await asyncio.sleep(step)
            try:
                now = self.clock()
                for conn in list(self.connections.values()):
                    if now - conn.heard_at > silent_s:
                        log.warning("HA: slave %s silent for %.0f s; closing", conn.name, silent_s)
                        conn.close()
                    elif now - conn.sent_at >= beat_s:
                        conn.send_beat()
                if self.metadata.version() != self._meta_version:
                    self._send_metadata()
                self.update_confirm()
                self._expire_waiters()
            except Exception:  # keep ticking; the defect is logged
                log.exception("HA master tick failed")

    # -- handshakes ----------------------------------------------------------------------

    def welcome(self, hello: dict[str, Any], peer: str) -> tuple[int, dict[str, Any]]:
        """Check a HELLO; the slave's id and the WELCOME, or HaRefused."""
        cfg = self.config
        if hello.get("magic") != HA_MAGIC or hello.get("version") != HA_VERSION:
            raise HaRefused("BAD_HANDSHAKE", "not a pymq HA handshake of this version")
        if self.acl is not None:
            try:
                self.acl.check_document(hello, peer.rpartition(":")[0], ADMIN)
            except PyMQError as exc:
                raise HaRefused(exc.code, exc.message) from None
        name, cluster = hello.get("broker_name"), hello.get("cluster")
        if name != cfg.broker_name or cluster != cfg.broker_cluster_name:
            raise HaRefused(
                "WRONG_BROKER",
                f"this is the master of {cfg.broker_name} in {cfg.broker_cluster_name}, "
                f"not of {name!r} in {cluster!r}",
            )
        broker_id = hello.get("broker_id")
        if not isinstance(broker_id, int) or isinstance(broker_id, bool) or broker_id <= 0:
            raise HaRefused("BAD_HANDSHAKE", f"a slave's broker id is > 0, not {broker_id!r}")
        segment = self.store.commit_log.segment_size
        if hello.get("segment_size") != segment:
            raise HaRefused(
                "SEGMENT_SIZE_MISMATCH",
                f"the master's CommitLog segments are {segment} bytes, the slave's "
                f"{hello.get('segment_size')!r}: set mapped_file_size_commit_log alike",
            )
        slave_max = hello.get("max_offset")
        if not isinstance(slave_max, int) or isinstance(slave_max, bool) or slave_max < 0:
            raise HaRefused("BAD_HANDSHAKE", "max_offset must be a non-negative integer")
        try:
            slave_epochs = parse_entries(hello.get("epochs", []))
        except StoreError as exc:
            raise HaRefused("BAD_HANDSHAKE", f"epochs: {exc.message}") from None
        log_ = self.store.commit_log
        master_min, master_max = log_.min_offset(), log_.max_offset()
        mine = self.epochs.entries
        point = consistent_point(slave_epochs, slave_max, mine, master_max)
        if point is None:
            start = master_min
            if slave_max > 0:
                log.warning(
                    "HA: slave %s id %d at %s shares no epoch with this master: it starts "
                    "over from %d", name, broker_id, peer, start,
                )  # fmt: skip
        elif point < master_min:
            start = master_min
            log.warning(
                "HA: slave %s id %d at %s is at %d, before this master's oldest offset %d: "
                "it starts over from there", name, broker_id, peer, point, master_min,
            )  # fmt: skip
        else:
            start = point
        welcome = {
            "start_offset": start,
            "epochs": [e.as_list() for e in mine],
            "confirm_offset": self.confirm_offset,
            "master_max_offset": master_max,
        }
        return broker_id, welcome

    def register(self, conn: _SlaveConnection) -> None:
        old = self.connections.get(conn.broker_id)
        if old is not None and old is not conn:
            log.warning("HA: slave %s connected again; closing its old connection", conn.name)
            old.close()
        self.connections[conn.broker_id] = conn

    def forget(self, conn: _SlaveConnection) -> None:
        if self.connections.get(conn.broker_id) is conn:
            del self.connections[conn.broker_id]
            self.update_confirm()

    # -- status ----------------------------------------------------------------------------

    def slaves(self) -> list[SlaveState]:
        now = self.clock()
        max_offset = self.store.commit_log.max_offset()
        return [
            SlaveState(
                broker_id=c.broker_id,
                addr=c.peer,
                ack_offset=c.ack_offset,
                lag_bytes=max(0, max_offset - c.ack_offset),
                in_sync=self.in_sync(c, now),
                caught_up_ms_ago=(
                    None if c.caught_up_at is None else int((now - c.caught_up_at) * 1000)
                ),
            )
            for c in sorted(self.connections.values(), key=lambda c: c.broker_id)
        ]


class HaRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _SlaveConnection(asyncio.Protocol):
    """One slave, from the master's side."""

    def __init__(self, service: HAService) -> None:
        self.service = service
        self.transport: asyncio.Transport | None = None
        self.decoder = FrameDecoder(HELLO_MAX_BYTES)
        self.peer = ""
        self.broker_id = -1
        self.streaming = False
        self.paused = False
        self.closed = False
        self.sent_end = 0  # the stream has gone out up to here
        self.ack_offset = 0  # the slave has written up to here
        self.caught_up_at: float | None = None
        # (end, time) of every transfer that reached the master's end: an ACK that covers
        # one says the slave had everything the master had at that time
        self.full: collections.deque[tuple[int, float]] = collections.deque(
            maxlen=FULL_TRANSFERS_KEPT
        )
        now = service.clock()
        self.heard_at = now
        self.sent_at = now

    @property
    def name(self) -> str:
        return f"id {self.broker_id} at {self.peer}" if self.broker_id > 0 else self.peer

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.peer = f"{peer[0]}:{peer[1]}"
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.streaming:
            log.warning("HA: slave %s disconnected%s", self.name, f": {exc}" if exc else "")
        self.streaming = False
        self.service.forget(self)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.pump()

    def data_received(self, data: bytes) -> None:
        self.heard_at = self.service.clock()
        try:
            frames = self.decoder.feed(data)
            for kind, payload in frames:
                if not self.streaming:
                    self._handshake(kind, payload)
                elif kind is Frame.ACK:
                    self._acked(unpack_ack(payload))
                elif kind is Frame.META:
                    self.service.metadata.merge_from_slave(unpack_json(payload))
                else:
                    raise HaFrameError(f"a slave does not send {kind.name}")
        except HaRefused as exc:
            self.service.refused += 1
            log.warning("HA: refused the handshake from %s: %s", self.peer, exc.message)
            self.send_raw(json_frame(Frame.REFUSE, {"code": exc.code, "message": exc.message}))
            self.close()
        except HaFrameError as exc:
            self.service.refused += not self.streaming
            log.warning("HA: closing the connection from %s: %s", self.name, exc)
            self.close()

    # -- handshake -----------------------------------------------------------------------

    def _handshake(self, kind: Frame, payload: memoryview) -> None:
        if kind is not Frame.HELLO:
            raise HaRefused("BAD_HANDSHAKE", f"the first frame must be HELLO, not {kind.name}")
        hello = unpack_json(payload)
        broker_id, welcome = self.service.welcome(hello, self.peer)
        self.broker_id = broker_id
        self.sent_end = self.ack_offset = welcome["start_offset"]
        self.send_raw(json_frame(Frame.WELCOME, welcome))
        self.decoder.set_limit(MAX_CONTROL_FRAME)
        self.streaming = True
        self.service.register(self)
        log.info(
            "HA: slave %s (%s) streams from %d (it had %d; the master is at %d)",
            self.name, hello.get("broker_name"), self.sent_end, hello.get("max_offset"),
            welcome["master_max_offset"],
        )  # fmt: skip
        svc = self.service
        self.send_raw(json_frame(Frame.META, svc.metadata.snapshot()))
        self.pump()

    # -- acknowledgements --------------------------------------------------------------

    def _acked(self, offset: int) -> None:
        if offset > self.sent_end:
            raise HaFrameError(f"ACK of {offset}, past the {self.sent_end} bytes sent")
        self.ack_offset = offset
        full = self.full
        caught: float | None = None
        while full and full[0][0] <= offset:
            caught = full.popleft()[1]
        if offset >= self.service.store.commit_log.max_offset():
            caught = self.service.clock()
        if caught is not None and (self.caught_up_at is None or caught > self.caught_up_at):
            if not self.service.in_sync(self):
                log.info("HA: slave %s caught up at %d", self.name, offset)
            self.caught_up_at = caught
        self.service.update_confirm()

    # -- sending -------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        t = self.transport
        if t is not None and not self.closed and not t.is_closing():
            t.write(data)
            self.sent_at = self.service.clock()

    def send_beat(self) -> None:
        if self.streaming:
            svc = self.service
            self.send_raw(beat(svc.store.commit_log.max_offset(), svc.confirm_offset))

    def pump(self) -> None:
        """Write what the slave lacks, until the socket's buffer is full."""
        if not self.streaming or self.closed:
            return
        svc = self.service
        log_ = svc.store.commit_log
        batch = svc.config.ha_transfer_batch_bytes
        seg = log_.segment_size
        epoch = svc.epochs.current
        t = self.transport
        assert t is not None
        end = log_.max_offset()
        sent = False
        while self.sent_end < end and not self.paused:
            at = self.sent_end
            n = min(batch, end - at, seg - at % seg)
            data = log_.read(at, n)
            if data is None:  # gone (retention) under a slow slave: it reconnects, starts over
                log.warning("HA: %d is gone from the CommitLog; dropping slave %s", at, self.name)
                self.close()
                return
            header = data_header(at, svc.confirm_offset, epoch, n)
            if n <= SMALL_FRAME:  # one send(): the usual frame under load is a few KB
                t.write(header + data)
            else:
                t.write(header)
                t.write(data)
            self.sent_end = at + n
            self.sent_at = svc.clock()
            sent = True
            if self.sent_end >= end:
                end = log_.max_offset()
        if sent and self.sent_end >= end:
            self.full.append((self.sent_end, svc.clock()))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
