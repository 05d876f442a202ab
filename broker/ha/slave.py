"""The slave's HA client: find the master, agree on a start, replicate, acknowledge.

The master's HA address comes from ``ha_master_address`` or from the
NameServers (the answer to the slave's registration names its master's).
On every connection the slave says who it is and what it has (HELLO: its
end and its epochs); the master answers where their logs agree (WELCOME);
the slave truncates to that point (crash-safely, ``ReplicaLog``) and takes
the master's epochs. Then every DATA frame is appended byte for byte, and
after each read from the socket the slave acknowledges its end once (one
ACK for everything that read brought) and makes readable what the master
confirmed. Consumer offsets committed on the slave go to the master in a
META frame. A lost connection is retried every ``RETRY_S``; meanwhile the
slave serves reads of what it has (confirmed) and tells pull clients to
stay (``suggestWhichBrokerId``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from broker.config import BrokerConfig
from broker.ha.metadata import HAMetadata
from broker.ha.protocol import (
    HA_MAGIC,
    HA_VERSION,
    MAX_CONTROL_FRAME,
    Frame,
    FrameDecoder,
    HaFrameError,
    ack,
    json_frame,
    unpack_beat,
    unpack_data,
    unpack_json,
)
from broker.store.epochs import parse_entries
from broker.store.replica import ReplicaLog
from broker.store.store import MessageStore
from connector.errors import StoreError
from connector.protocol.acl import sign_document

__all__ = ["HAClient"]

log = logging.getLogger(__name__)

RETRY_S = 1.0  # between connection attempts
# what the master confirmed is made readable at most this long after it arrived: one
# dispatch then covers the records of many reads (a dispatch costs ~0.2 ms however few
# records it has, and under load a read brings a few dozen); an ACK never waits for it.
# 5 ms -> 20 ms took the slave's CPU a message under ha_bench's durable load from
# 21-23 to 15-17 us (alternating runs); a slave's reads (while its master is down)
# trail by at most this much more.
DISPATCH_DELAY_S = 0.02
# ... in slices of about this many records, one a turn of the event loop: the master's
# next records are read and acknowledged between them, not after a whole backlog's
# dispatch. A slice costs ~0.2 ms however few records it has plus ~0.3 us a record
# (the compiled grouping, recovery.py's ``_dispatch_appends``): 2,048 holds the loop
# ~0.8 ms; 512 -> 2,048 took the slave's CPU a batch under ha_bench's batched load from
# 1.9-2.3 to 1.35-2.0 ms (alternating runs), its durable load unchanged.
DISPATCH_SLICE = 2048
CONNECT_TIMEOUT_S = 3.0
READ_BYTES = 4 << 20


class HARefusedError(Exception):
    """The master refused the handshake (REFUSE)."""


class HAClient:
    """Use from the broker's event loop."""

    def __init__(
        self,
        store: MessageStore,
        replica: ReplicaLog,
        config: BrokerConfig,
        metadata: HAMetadata,
        master_ha_addr: Callable[[], str | None],
        *,
        on_connect_failed: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.tls = tls  # the master's HA port is TLS: its certificate checked with this
        self.store = store
        self.replica = replica
        self.config = config
        self.metadata = metadata
        self.master_ha_addr = master_ha_addr
        self.on_connect_failed = on_connect_failed
        self.clock = clock
        self.connected = False
        self.master_addr: str | None = None
        self.confirm_offset = 0
        self.master_max_offset = 0
        self.heard_at: float | None = None
        self.last_error = ""
        self._task: asyncio.Task[None] | None = None
        self._dispatch_timer: asyncio.Handle | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ha-slave")

    async def stop(self) -> None:
        if self._dispatch_timer is not None:
            self._dispatch_timer.cancel()
            self._dispatch_timer = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    @property
    def lag_bytes(self) -> int:
        return max(0, self.master_max_offset - self.replica.max_offset)

    async def _run(self) -> None:
        announced = ""
        while True:
            addr = self.config.ha_master_address or self.master_ha_addr()
            if not addr:
                if announced != "none":
                    log.warning("HA: no master known for %s yet", self.config.broker_name)
                    announced = "none"
            else:
                try:
                    await self._session(addr)
                except (OSError, asyncio.TimeoutError, HaFrameError, HARefusedError) as exc:
                    self.last_error = str(exc) or type(exc).__name__
                    if announced != self.last_error:
                        log.warning("HA: replication from %s stopped: %s", addr, self.last_error)
                        announced = self.last_error
                    if self.on_connect_failed is not None:
                        self.on_connect_failed()
                except StoreError as exc:
                    self.last_error = exc.message
                    log.error("HA: replication from %s failed: %s", addr, exc.message)
                except Exception as exc:  # a defect: logged, and the slave tries again
                    self.last_error = repr(exc)
                    log.exception("HA: replication from %s failed", addr)
                finally:
                    self.connected = False
            await asyncio.sleep(RETRY_S)

    async def _session(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host.strip("[]"),
                int(port),
                limit=READ_BYTES,
                ssl=self.tls,
                server_hostname=host.strip("[]") if self.tls else None,
            ),
            CONNECT_TIMEOUT_S,
        )
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        keepalive: asyncio.Task[None] | None = None
        try:
            writer.write(json_frame(Frame.HELLO, self._hello()))
            decoder = FrameDecoder(MAX_CONTROL_FRAME)
            welcome, early = await asyncio.wait_for(
                self._welcome(reader, decoder), CONNECT_TIMEOUT_S
            )
            start = int(welcome["start_offset"])
            epochs = parse_entries(welcome.get("epochs", []))
            have = self.replica.max_offset
            why = f"the master's log ({addr}) agrees with this one up to {start}"
            await asyncio.to_thread(self.replica.truncate_to, start, epochs, why=why)
            self.confirm_offset = int(welcome.get("confirm_offset", 0))
            self.master_max_offset = int(welcome.get("master_max_offset", 0))
            writer.write(ack(self.replica.max_offset))
            self.connected = True
            self.master_addr = addr
            self.heard_at = self.clock()
            log.info(
                "HA: replicating %s from %s at %d (this log was at %d)",
                self.config.broker_name, addr, start, have,
            )  # fmt: skip
            keepalive = asyncio.create_task(self._keepalive(writer))
            self._take(early, writer)  # what came in the read that brought the WELCOME
            await self._stream(reader, writer, decoder)
        finally:
            if keepalive is not None:
                keepalive.cancel()
            writer.close()

    def _hello(self) -> dict[str, Any]:
        cfg = self.config
        hello = {
            "magic": HA_MAGIC,
            "version": HA_VERSION,
            "cluster": cfg.broker_cluster_name,
            "broker_name": cfg.broker_name,
            "broker_id": cfg.broker_id,
            "segment_size": self.store.commit_log.segment_size,
            "max_offset": self.replica.max_offset,
            "epochs": [e.as_list() for e in self.replica.epochs.entries],
        }
        creds = cfg.credentials
        if creds is not None:  # a master with ACL on takes only an admin account's slaves
            sign_document(hello, creds)
        return hello

    async def _welcome(
        self, reader: asyncio.StreamReader, decoder: FrameDecoder
    ) -> tuple[dict[str, Any], list[tuple[Frame, memoryview]]]:
        """The WELCOME, and the frames that followed it in the same read."""
        while True:
            data = await reader.read(READ_BYTES)
            if not data:
                raise ConnectionError("the master closed the connection during the handshake")
            frames = decoder.feed(data)
            if not frames:
                continue
            kind, payload = frames[0]
            if kind is Frame.REFUSE:
                refusal = unpack_json(payload)
                raise HARefusedError(f"{refusal.get('code')}: {refusal.get('message')}")
            if kind is not Frame.WELCOME:
                raise HaFrameError(f"expected WELCOME, got {kind.name}")
            return unpack_json(payload), frames[1:]

    async def _stream(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, decoder: FrameDecoder
    ) -> None:
        while True:
            data = await reader.read(READ_BYTES)
            if not data:
                raise ConnectionError("the master closed the connection")
            self.heard_at = self.clock()
            self._take(decoder.feed(data), writer)

    def _take(self, frames: list[tuple[Frame, memoryview]], writer: asyncio.StreamWriter) -> None:
        """Apply the frames of one read; then one ACK, and what became readable."""
        replica = self.replica
        wrote = False
        for kind, payload in frames:
            if kind is Frame.DATA:
                offset, confirm, _epoch, chunk = unpack_data(payload)
                self.master_max_offset = max(self.master_max_offset, offset + len(chunk))
                replica.append(offset, chunk)
                self.confirm_offset = confirm
                wrote = True
            elif kind is Frame.BEAT:
                self.master_max_offset, self.confirm_offset = unpack_beat(payload)
            elif kind is Frame.META:
                self.metadata.apply(unpack_json(payload))
            elif kind is Frame.REFUSE:
                raise HARefusedError(str(unpack_json(payload).get("message")))
            else:
                raise HaFrameError(f"a master does not send {kind.name}")
        if wrote:
            writer.write(ack(replica.max_offset))
        if self.confirm_offset > replica.dispatched and self._dispatch_timer is None:
            loop = asyncio.get_running_loop()
            self._dispatch_timer = loop.call_later(DISPATCH_DELAY_S, self._dispatch)
        self._send_local_offsets(writer)

    def _dispatch(self) -> None:
        """Make readable what the master confirmed (and wake the long polls on it). Runs
        whether or not the connection still stands: a master that dies right after
        confirming an offset has it readable here."""
        self._dispatch_timer = None
        listeners = self.store.arrival_listeners
        replica = self.replica
        before = replica.dispatched
        try:
            touched = replica.dispatch_to(self.confirm_offset, max_records=DISPATCH_SLICE)
        except StoreError as exc:
            log.error("HA: dispatching replicated records failed: %s", exc.message)
            return
        for (topic, queue_id), max_offset in touched.items():
            for listener in listeners:
                listener(topic, queue_id, max_offset)
        if replica.dispatched > before and replica.pending(self.confirm_offset):  # next turn
            self._dispatch_timer = asyncio.get_running_loop().call_soon(self._dispatch)

    def _send_local_offsets(self, writer: asyncio.StreamWriter) -> None:
        local = self.metadata.offsets.take_local()
        if local:
            writer.write(json_frame(Frame.META, {"offsets": local}))

    async def _keepalive(self, writer: asyncio.StreamWriter) -> None:
        """An ACK every heartbeat interval (the master's sign of life); a master silent
        for ``ha_housekeeping_interval_ms`` is dropped and connected to again."""
        beat_s = self.config.ha_send_heartbeat_interval_ms / 1000
        silent_s = self.config.ha_housekeeping_interval_ms / 1000
        while True:
            await asyncio.sleep(beat_s)
            if self.heard_at is not None and self.clock() - self.heard_at > silent_s:
                log.warning("HA: master silent for %.0f s; reconnecting", silent_s)
                writer.close()
                return
            writer.write(ack(self.replica.max_offset))
            self._send_local_offsets(writer)
