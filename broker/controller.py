"""BrokerController: one broker's parts, wired and started in order.

Store (recovery first), topic and offset tables, processors, the schedule
service, long polling, metrics, HA (a master's service for its slaves, or a
slave's client of its master) and NameServer registration. Shutdown runs in
reverse: unregister, stop replicating and delivering, persist offsets, flush
the store and remove its abort file.

A master begins a new epoch each time it starts (``broker.store.epochs``); a
slave first finishes a truncation a crash interrupted, then replicates. A
slave runs no schedule service (its master delivers delayed messages; their
progress arrives with the metadata).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from broker.client_manager import ClientManager
from broker.config import BrokerConfig
from broker.ha.master import HAService
from broker.ha.metadata import HAMetadata
from broker.ha.slave import HAClient
from broker.longpoll import HeldPull, PullRequestHoldService
from broker.metrics import BrokerMetrics
from broker.processors import AdminProcessor, PullMessageProcessor, SendMessageProcessor
from broker.processors.clients import ClientsProcessor
from broker.processors.config import ConfigProcessor
from broker.processors.send import SendOutcome
from broker.queue_locks import QueueLocks
from broker.registration import BrokerRegistrar
from broker.schedule import ScheduleMessageService
from broker.store.epochs import EpochFile
from broker.store.files import load_json, save_json
from broker.store.lock import StoreLock
from broker.store.offsets import ConsumerOffsetTable
from broker.store.replica import ReplicaLog
from broker.store.results import PutMessageResult, PutMessageStatus, RecoveryReport
from broker.store.store import MessageStore
from broker.store.topics import TopicConfigTable
from broker.topic_manager import TopicManager
from broker.transaction import TransactionService
from connector.protocol.rest import TopicConfigBody, TopicStatus
from connector.protocol.route import RegisterBrokerRequest, UnregisterBrokerRequest
from connector.protocol.tls import client_context, server_context
from connector.server.acl import AclService
from connector.server.limits import RateLimiter

__all__ = ["BrokerController"]

log = logging.getLogger(__name__)
OFFSET_PERSIST_INTERVAL_S = 5.0
CLIENT_SCAN_INTERVAL_S = 10.0  # RocketMQ's ClientHousekeepingService


# (group, client id, request code, ext, body) -> the consumer's answer body
ConsumerCall = Callable[[str, str, int, dict[str, str], bytes], Awaitable[bytes]]


class BrokerController:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        clock: Callable[[], float] = time.time,
        ha_socket: socket.socket | None = None,
    ) -> None:
        """``ha_socket``: a master's bound HA listener (its slaves connect there)."""
        self.config = config
        store_config = config.store_config()
        # first: a store another broker owns is left as it is (StoreLockedError)
        self.store_lock = StoreLock(store_config.store_dir)
        self.store_lock.acquire()
        self.store = MessageStore(store_config, clock=clock)
        cfg_dir = store_config.config_dir
        self.topics = TopicManager(
            TopicConfigTable(cfg_dir / "topics.json"), config, on_change=self._topics_changed
        )
        self.offsets = ConsumerOffsetTable(cfg_dir / "consumerOffset.json")
        self.schedule = ScheduleMessageService(self.store, config.delay_levels_ms, clock=clock)
        self.transactions = TransactionService(self.store, config, clock=clock)
        self.loop: asyncio.AbstractEventLoop | None = None  # the event loop, once started
        self.epochs = EpochFile(store_config.store_dir / "epochs.json")
        self.ha_metadata = HAMetadata(self.topics, self.offsets, self.schedule)
        # both edges and the HA port check requests against it (a bad acl_file stops the
        # start here)
        self.acl = AclService(config.acl_file) if config.acl_enable and config.acl_file else None
        # TLS: what both listeners serve, and what the broker trusts of its NameServers
        tls_files = (config.tls_cert_file, config.tls_key_file)
        self.tls = server_context(*tls_files) if all(tls_files) else None  # type: ignore[arg-type]
        self.tls_client = client_context(config.tls_ca_file) if self.tls is not None else None
        # sends a second per account or address (send_rate_limit; None: no limit)
        rate = config.send_rate_limit
        self.send_limiter = RateLimiter(rate) if rate > 0 else None
        self.ha: HAService | None = None  # a master's
        self.ha_client: HAClient | None = None  # a slave's
        self.replica: ReplicaLog | None = None
        self._ha_socket = ha_socket
        if config.broker_role.is_master:
            self.ha = HAService(
                self.store, config, self.epochs, self.ha_metadata, acl=self.acl, tls=self.tls
            )
        else:
            self.replica = ReplicaLog(self.store, self.epochs)
            self.offsets.track_local = True  # handed to the master when it is back
            self.ha_client = HAClient(
                self.store, self.replica, config, self.ha_metadata,
                lambda: self.registrar.ha_server_addr,
                on_connect_failed=self._master_unreachable, tls=self.tls_client,
            )  # fmt: skip
        self.send = SendMessageProcessor(
            self.store, self.topics, config, clock=clock,
            replicated=self.ha.wait_replicated if self.ha is not None and self.ha.sync else None,
            master_addr=lambda: self.registrar.master_addr,
        )  # fmt: skip
        self.pull = PullMessageProcessor(self.store, self.topics, config)
        self.admin = AdminProcessor(self.store, self.topics, self.offsets, config)
        self.metrics = BrokerMetrics(self.store)
        self.metrics.watch_ha(self.ha_status)
        self.clients = ClientManager()  # live producers and consumers, per group
        # orderly consumers' queue locks, released as soon as their client leaves the group
        self.queue_locks = QueueLocks(lock_max_live_time_ms=config.rebalance_lock_max_live_time_ms)
        self._restore_queue_locks()
        self.clients.on_consumer_dropped = self.queue_locks.release_client
        self.connections = ClientsProcessor(self.clients, self.admin)
        self.settings = ConfigProcessor(config, self.store.config, self._settings_changed)
        self.on_clients_expired: Callable[[], None] = self._scan_clients
        # an operator reset a group's offset (group, topic, queue id, offset): the remoting
        # edge tells the group's live consumers (RESET_CONSUMER_CLIENT_OFFSET)
        self.on_offset_reset: Callable[[str, str, int, int], None] = lambda *_: None
        # ask a live consumer (group, client id, code, ext) and await its answer body: the
        # remoting edge sends the request on the client's connection (GET_CONSUMER_RUNNING_INFO,
        # CONSUME_MESSAGE_DIRECTLY); None until that edge is up
        self.call_consumer: ConsumerCall | None = None
        self.registrar = BrokerRegistrar(
            config.namesrv_addrs,
            self.registration_request,
            period_ms=config.register_name_server_period_ms,
            timeout_ms=config.register_timeout_ms,
            credentials=config.credentials,
            tls=self.tls_client,
        )

        self.hold: PullRequestHoldService | None = None
        self.recovery: RecoveryReport | None = None
        self.started_ms = int(clock() * 1000)
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        self.hold = PullRequestHoldService(loop)
        self.recovery = await asyncio.to_thread(self._start_store)
        if self.ha is not None and self.ha.sync and self._ha_socket is not None:
            self.ha.arrival_listeners.append(self.hold.notify)  # once the slaves have it
        else:
            self.store.arrival_listeners.append(self.hold.notify)
        if self.ha is not None:
            self.schedule.start()
            await asyncio.to_thread(self.transactions.start)
            if self._ha_socket is not None:
                await self.ha.start(self._ha_socket)
        await self.registrar.start()
        if self.ha_client is not None:
            await self.ha_client.start()
        self._tasks.append(asyncio.create_task(self._persist_offsets_periodically()))
        self._tasks.append(asyncio.create_task(self._expire_clients_periodically()))
        log.info(
            "broker %s (%s) started: %s",
            self.config.broker_name, self.config.broker_role.value, self.recovery,
        )  # fmt: skip

    def _start_store(self) -> RecoveryReport:
        self.topics.start()
        self.offsets.load()
        report = self.store.start(replica=self.replica is not None)
        self.epochs.load()
        if self.replica is not None:
            self.schedule.load()
            self.replica.finish_truncation()
        else:
            self.epochs.begin(self.store.commit_log.max_offset())
        return report

    def _settings_changed(self, keys: set[str]) -> None:
        if "broker_permission" in keys:  # routes carry it: tell the NameServers now
            self.registrar.register_soon()

    def _master_unreachable(self) -> None:
        """A slave could not reach its master: ask the NameServers again (the master may
        have come back elsewhere)."""
        self.registrar.register_soon()

    async def stop(self) -> None:
        """Unregister, stop delivering, persist offsets, flush, remove the abort file."""
        await self.registrar.stop(self.unregistration_request())
        if self.ha_client is not None:
            await self.ha_client.stop()
        if self.ha is not None:
            await self.ha.stop()
        if self.hold is not None:
            self.hold.wake_all()
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        await asyncio.to_thread(self._stop_store)
        self.store_lock.release()
        log.info("broker %s stopped cleanly", self.config.broker_name)

    def _stop_store(self) -> None:
        self.schedule.stop()
        if self.ha is not None:
            self.transactions.stop()
        self.offsets.persist()
        if self.replica is not None:
            self.schedule.persist()  # the master's progress, as last received
        self.store.shutdown()

    def stopping(self) -> None:
        """On SIGTERM: long polls answer now instead of holding the shutdown, and the
        queue locks stay as they are (the connections about to close are this broker's
        leaving, not its clients': their holders keep them across the restart)."""
        self.queue_locks.freeze()
        if self.hold is not None:
            self.hold.loop.call_soon_threadsafe(self.hold.wake_all)

    def hold_pull(
        self, topic: str, queue_id: int, offset: int, wait_ms: int, on_done: Callable[[bool], None]
    ) -> HeldPull:
        """Long polling with a callback (loop thread): ``on_done(True)`` once the queue
        holds a message past ``offset``, run inside the append that put it there;
        ``on_done(False)`` after ``wait_ms`` (at most ``max_pull_wait_ms``)."""
        assert self.hold is not None
        store = self.store
        return self.hold.hold(
            topic,
            queue_id,
            offset,
            min(wait_ms, self.config.max_pull_wait_ms) / 1000,
            lambda: store.get_max_offset_in_queue(topic, queue_id),
            on_done,
        )

    async def arrival(self, topic: str, queue_id: int, offset: int, wait_ms: int) -> bool:
        """Long polling: True once the queue holds a message past ``offset``; False after
        ``wait_ms`` (at most ``max_pull_wait_ms``) with nothing new."""
        assert self.hold is not None
        store = self.store
        return await self.hold.wait(
            topic,
            queue_id,
            offset,
            min(wait_ms, self.config.max_pull_wait_ms) / 1000,
            lambda: store.get_max_offset_in_queue(topic, queue_id),
        )

    async def _persist_offsets_periodically(self) -> None:
        delay: dict[int, int] = {}
        while True:
            await asyncio.sleep(OFFSET_PERSIST_INTERVAL_S)
            try:
                if self.offsets.dirty:
                    await asyncio.to_thread(self.offsets.persist)
                if self.replica is not None and self.schedule.offsets != delay:
                    delay = dict(self.schedule.offsets)  # a slave keeps its master's progress
                    await asyncio.to_thread(self.schedule.persist)
            except OSError:
                log.exception("persisting consumer offsets failed; retrying")

    def _restore_queue_locks(self) -> None:
        """The orderly queue locks held before a restart, back (``broker.queue_locks``);
        from now on written whenever a lock changes hands."""
        path = self.store.config.config_dir / "queue_locks.json"
        taken = self.queue_locks.restore(load_json(path))
        if taken:
            log.info(
                "%d orderly queue lock(s) held before the restart kept for their holders", taken
            )
        self.queue_locks.on_change = lambda: save_json(path, self.queue_locks.snapshot())

    def _scan_clients(self) -> None:
        self.clients.scan_expired()

    async def _expire_clients_periodically(self) -> None:
        while True:
            await asyncio.sleep(CLIENT_SCAN_INTERVAL_S)
            self.on_clients_expired()

    # -- HA ------------------------------------------------------------------------------

    def suggested_broker_id(self) -> str:
        """Where a pull client should read next (a pull answer's suggestWhichBrokerId):
        the master ("0") while it is up; a slave that lost its master keeps readers."""
        client = self.ha_client
        if client is None or client.connected:
            return "0"
        return str(self.config.broker_id)

    def ha_status(self) -> dict[str, Any]:
        """Role, epochs and replication state (REST ``/health`` and ``pymq admin``)."""
        log_ = self.store.commit_log
        out: dict[str, Any] = {
            "role": self.config.broker_role.value,
            "epoch": self.epochs.current,
            "epochs": [e.as_list() for e in self.epochs.entries],
            "max_offset": log_.max_offset(),
            "dispatched_offset": self.store.dispatched_offset,
        }
        if self.ha is not None:
            out["confirm_offset"] = self.ha.confirm_offset
            out["ha_addr"] = self.config.ha_addr if self._ha_socket is not None else None
            out["slaves"] = [dataclasses.asdict(st) for st in self.ha.slaves()]
            out["handshakes_refused"] = self.ha.refused
        if self.ha_client is not None:
            c = self.ha_client
            out.update(
                master_connected=c.connected,
                master_ha_addr=c.master_addr,
                confirm_offset=c.confirm_offset,
                master_max_offset=c.master_max_offset,
                lag_bytes=c.lag_bytes,
                last_error=c.last_error or None,
            )
        return out

    def admit_send(self, sender: str) -> None:
        """Count a send request against ``send_rate_limit`` (BrokerBusyError over it)."""
        if self.send_limiter is not None:
            self.send_limiter.admit(sender)

    # -- registration ------------------------------------------------------------------

    def _topics_changed(self) -> None:
        self.registrar.register_soon()

    # -- topics (both edges) -----------------------------------------------------------

    async def put_topic(self, topic: str, body: TopicConfigBody) -> TopicStatus:
        """Create or update a topic; answered once every NameServer has the broker's
        new registration (or its timeout passed), as RocketMQ's createTopic does, so a
        client started right after finds the topic's own route, not TBW102's."""
        self.send.check_master()  # a slave takes its topics from its master
        status = self.admin.put_topic(topic, body)
        await self.registrar.register_now()
        return status

    async def delete_topic(self, topic: str) -> None:
        """Delete a topic; answered once the NameServers have the registration without it."""
        self.send.check_master()
        self.admin.delete_topic(topic)
        await self.registrar.register_now()

    def registration_request(self) -> RegisterBrokerRequest:
        c = self.config
        return RegisterBrokerRequest(
            cluster=c.broker_cluster_name,
            broker_name=c.broker_name,
            broker_id=c.broker_id,
            broker_addr=c.addr,
            data_version=self.topics.data_version(),
            topics=self.topics.registration_topics(),
            http_addr=c.http_addr,
            ha_addr=c.ha_addr if self._ha_socket is not None else None,
        )

    def unregistration_request(self) -> UnregisterBrokerRequest:
        c = self.config
        return UnregisterBrokerRequest(
            cluster=c.broker_cluster_name,
            broker_name=c.broker_name,
            broker_id=c.broker_id,
            broker_addr=c.addr,
        )

    # -- send helpers ------------------------------------------------------------------

    async def replicated(self) -> PutMessageStatus:
        """SYNC_MASTER: once every in-sync slave has the log as it is now (a transaction's
        decision, written off the send path); PUT_OK at once on other roles."""
        if self.ha is None or not self.ha.sync:
            return PutMessageStatus.PUT_OK
        return await self.ha.wait_replicated(self.store.commit_log.max_offset())

    async def stored(self, outcome: SendOutcome) -> PutMessageResult:
        """The append's result once it is as durable as the flush mode promises
        (raises the send's error when a pending append was refused)."""
        if outcome.pending is not None:
            return outcome.settle(await outcome.pending, self.topics)
        return outcome.put
