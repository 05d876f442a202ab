"""One client instance per process and NameServer set (RocketMQ's MQClientInstance).

Producers, pull consumers and push consumers of a process that name the same
NameServers (and the same account, TLS and ``instance_name``) share one
``ClientInstance``: one set of connections (one ``Rpc``), one route table with
its refresh every ``poll_name_server_interval_ms``, one heartbeat to every
broker carrying each registered group's producer and consumer data, and the
answers to the brokers' calls, handed to the member of the group they name.
None of its members keeps routes of its own.

A client id is ``host@instance_name`` (RocketMQ's ``ip@instanceName``); the
default instance name is the process id. A group is registered once per
instance: a second producer (or consumer) of a group in the same process,
with the default instance name, gets an instance of its own (``pid-1``,
``pid-2``, ...), so it is a member of its own, as in separate processes
(RocketMQ refuses it unless given another instance name); with an explicit
``instance_name`` it is refused.

The instance is created by its first member and closed (connections, its
thread) when its last member leaves.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from connector.client.connection import DEFAULT_BUSY_POLL_US, RemotingConnection
from connector.client.namesrv import NameServerClient, parse_namesrv
from connector.client.rpc import Rpc
from connector.errors import ConfigError, CorruptRecordError, PyMQError
from connector.protocol.acl import Credentials
from connector.protocol.properties import PropertyKeys
from connector.protocol.record import decode_record
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.protocol.route import TopicRouteData
from connector.protocol.tls import client_context, tls_settings

__all__ = ["ClientInstance", "ConsumerMember", "ProducerMember"]

log = logging.getLogger(__name__)

_TICK_S = 0.5  # members' periodic work (a producer's probes of isolated brokers)
_HEARTBEAT_TIMEOUT_S = 3.0
DEFAULT_POLL_NAME_SERVER_INTERVAL_MS = 30_000
DEFAULT_HEARTBEAT_BROKER_INTERVAL_MS = 30_000


class ProducerMember(Protocol):
    group: str

    def tick(self) -> None:
        """Every half second, on the instance's thread."""

    def on_request(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        """A broker's call for this producer's group (CHECK_TRANSACTION_STATE)."""


class ConsumerMember(Protocol):
    group: str

    def consumer_data(self) -> dict[str, Any] | None:
        """This consumer's entry of a heartbeat's ``consumerDataSet`` (None: not now)."""

    def on_request(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        """A broker's call for this consumer's group (on a connection's reader thread)."""


@dataclass(frozen=True)
class _Key:
    namesrv: tuple[str, ...]
    instance_name: str
    busy_poll_us: int
    credentials: Credentials | None
    tls: bool
    tls_ca_file: str | None


@dataclass
class _Settings:
    """What a member asks of its instance; the instance does the most frequent asked."""

    poll_name_server_interval_ms: int = DEFAULT_POLL_NAME_SERVER_INTERVAL_MS
    heartbeat_broker_interval_ms: int = DEFAULT_HEARTBEAT_BROKER_INTERVAL_MS


class _Registry:
    """The process's instances by key."""

    def __init__(self) -> None:
        self.instances: dict[_Key, ClientInstance] = {}
        self.lock = threading.Lock()

    def forget(self) -> None:
        """In a forked child the parent's instances are not usable (their threads are
        gone, their sockets are the parent's; the lock may have been held by a thread
        that is not there): its clients make instances of their own."""
        self.instances = {}
        self.lock = threading.Lock()


_REGISTRY = _Registry()
os.register_at_fork(after_in_child=_REGISTRY.forget)


class ClientInstance:
    """See the module. Get one with ``ClientInstance.join``; leave with ``leave``."""

    def __init__(self, key: _Key) -> None:
        self.key = key
        self.namesrv_addrs = list(key.namesrv)
        self.instance_name = key.instance_name
        self.client_id = f"{socket.gethostname()}@{key.instance_name}"
        tls_ctx: ssl.SSLContext | None = client_context(key.tls_ca_file) if key.tls else None
        # no handler of the brokers' calls until a member takes them: until then a lone
        # caller reads its own answer (see connector.client.connection)
        self.rpc = Rpc(busy_poll_us=key.busy_poll_us, credentials=key.credentials, tls=tls_ctx)
        self._listening = False
        self.namesrv = NameServerClient(self.namesrv_addrs, self.rpc)
        self._routes: dict[str, TopicRouteData] = {}
        # route(topic): the topic's route as last fetched (None: not fetched, or none);
        # the dict's own get, as it is on every send's path
        self.route: Callable[[str], TopicRouteData | None] = self._routes.get
        self._watched: set[str] = set()  # topics asked for although the NameServer had none
        self._producers: dict[str, ProducerMember] = {}
        self._consumers: dict[str, ConsumerMember] = {}
        self._members: dict[int, _Settings] = {}  # by id(member): every member, grouped or not
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._beat_now = threading.Event()
        self._thread: threading.Thread | None = None
        self.closed = False

    # -- joining and leaving -----------------------------------------------------------

    @classmethod
    def join(
        cls,
        member: object,
        *,
        namesrv: str | Sequence[str] | None,
        instance_name: str | None = None,
        busy_poll_us: int = DEFAULT_BUSY_POLL_US,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: bool = False,
        tls_ca_file: str | None = None,
        producer_group: str | None = None,
        consumer_group: str | None = None,
        listen: bool = False,
        poll_name_server_interval_ms: int = DEFAULT_POLL_NAME_SERVER_INTERVAL_MS,
        heartbeat_broker_interval_ms: int = DEFAULT_HEARTBEAT_BROKER_INTERVAL_MS,
    ) -> ClientInstance:
        """The instance ``member`` uses from now on, with ``member`` registered as the
        producer of ``producer_group`` / the consumer of ``consumer_group`` if given
        (neither: a member without a group, such as a pull consumer). ``listen``: the
        member answers brokers' calls (``on_request``): from now on every connection
        of the instance reads them."""
        addrs = tuple(parse_namesrv(namesrv))
        credentials = Credentials.of(access_key, secret_key)
        use_tls = tls_settings(tls, tls_ca_file)
        settings = _Settings(poll_name_server_interval_ms, heartbeat_broker_interval_ms)
        base = instance_name or str(os.getpid())
        registry = _REGISTRY
        with registry.lock:
            for n in range(1 << 16):
                name = base if n == 0 else f"{base}-{n}"
                key = _Key(addrs, name, busy_poll_us, credentials, use_tls, tls_ca_file)
                inst = registry.instances.get(key)
                if inst is None:
                    inst = registry.instances[key] = cls(key)
                if inst._add(member, settings, producer_group, consumer_group):
                    if listen:
                        inst._listen()
                    return inst
                if instance_name is not None:
                    kind = "producer" if producer_group else "consumer"
                    group = producer_group or consumer_group
                    raise ConfigError(
                        f"the client instance {name!r} has a {kind} of group {group} already: "
                        f"give this one another instance_name"
                    )
        raise ConfigError("too many client instances in this process")  # pragma: no cover

    def _add(
        self,
        member: object,
        settings: _Settings,
        producer_group: str | None,
        consumer_group: str | None,
    ) -> bool:
        with self._lock:
            if producer_group is not None and producer_group in self._producers:
                return False
            if consumer_group is not None and consumer_group in self._consumers:
                return False
            if producer_group is not None:
                self._producers[producer_group] = member  # type: ignore[assignment]
            if consumer_group is not None:
                self._consumers[consumer_group] = member  # type: ignore[assignment]
            self._members[id(member)] = settings
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"pymq-client-{self.instance_name}", daemon=True
                )
                self._thread.start()
        if producer_group is not None or consumer_group is not None:
            self._beat_now.set()  # the brokers known learn of the group now
        return True

    def _listen(self) -> None:
        with self._lock:
            if self._listening:
                return
            self._listening = True
        self.rpc.client.listen(self._on_request)

    def leave(self, member: object) -> None:
        """``member`` is done: its groups are unregistered from the brokers; the last
        member to leave closes the instance."""
        with self._lock:
            if self._members.pop(id(member), None) is None:
                return
            producers = [g for g, m in self._producers.items() if m is member]
            consumers = [g for g, m in self._consumers.items() if m is member]
            for g in producers:
                del self._producers[g]
            for g in consumers:
                del self._consumers[g]
            last = not self._members
        for g in producers:
            self._unregister(producer_group=g)
        for g in consumers:
            self._unregister(consumer_group=g)
        if not last:
            return
        registry = _REGISTRY
        with registry.lock:
            with self._lock:
                if self._members:  # joined again meanwhile
                    return
                self.closed = True
            if registry.instances.get(self.key) is self:
                del registry.instances[self.key]
        self._stop.set()
        self._beat_now.set()  # wake the loop now, not at its next tick (_TICK_S)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)
        self.rpc.close()

    def _unregister(self, *, producer_group: str = "", consumer_group: str = "") -> None:
        """UNREGISTER_CLIENT of one group to every broker this instance talks to (oneway)."""
        ext = {
            "clientID": self.client_id,
            "producerGroup": producer_group,
            "consumerGroup": consumer_group,
        }
        namesrvs = set(self.namesrv_addrs)
        for conn in self.rpc.client.connections():
            if conn.addr in namesrvs:
                continue
            try:
                self.rpc.oneway(conn.addr, RequestCode.UNREGISTER_CLIENT, ext)
            except PyMQError as exc:
                log.debug("unregistering from %s failed: %s", conn.addr, exc)

    # -- routes ------------------------------------------------------------------------

    def fetch_route(self, topic: str, *, watch: bool = False) -> TopicRouteData | None:
        """The topic's route from a NameServer, now, and kept; None when no broker
        serves it (the route kept, if any, stays). ``watch``: ask again at every
        refresh even while there is none (a topic the brokers will create)."""
        route = self.namesrv.topic_route(topic)
        with self._lock:
            if route is not None:
                self._routes[topic] = route
                self._watched.discard(topic)
            elif watch:
                self._watched.add(topic)
        return route

    def refresh_routes(self) -> None:
        """Every route known (and every topic watched) fetched again now."""
        with self._lock:
            topics = sorted({*self._routes, *self._watched})
        for topic in topics:
            try:
                self.fetch_route(topic)
            except PyMQError as exc:
                log.warning("refreshing the route of %s failed: %s", topic, exc)

    def broker_addr(self, broker_name: str) -> str | None:
        """A broker name's master address, from any route known."""
        for route in list(self._routes.values()):
            for b in route.brokers:
                if b.broker_name == broker_name and (addr := b.master_addr()):
                    return addr
        return None

    # -- heartbeats --------------------------------------------------------------------

    def heartbeat_body(self) -> bytes:
        with self._lock:
            producers = sorted(self._producers)
            consumers = list(self._consumers.values())
        return orjson.dumps(
            {
                "clientID": self.client_id,
                "producerDataSet": [{"groupName": g} for g in producers],
                "consumerDataSet": [d for c in consumers if (d := c.consumer_data())],
            }
        )

    def heartbeat_targets(self) -> set[str]:
        """Every master of the routes known; their slaves too when a consumer is
        registered (it may read from them while a master is down)."""
        with_slaves = bool(self._consumers)
        out = set()
        for route in list(self._routes.values()):
            for b in route.brokers:
                for broker_id, addr in b.addrs.items():
                    if addr and (with_slaves or str(broker_id) == "0"):
                        out.add(addr)
        return out

    def heartbeat_all(self) -> None:
        """HEART_BEAT to every broker known (see ``heartbeat_targets``); failures are
        logged and left to the next round."""
        with self._lock:
            if not self._producers and not self._consumers:
                return
        body = self.heartbeat_body()
        for addr in sorted(self.heartbeat_targets()):
            self.heartbeat(addr, body, timeout_s=_HEARTBEAT_TIMEOUT_S)

    def heartbeat(self, addr: str, body: bytes | None = None, *, timeout_s: float) -> bool:
        """One HEART_BEAT to ``addr``; whether it was answered."""
        try:
            # a heartbeat must not leave a sender's connection with a reader thread
            self.rpc.call(
                addr, RequestCode.HEART_BEAT, None, body or self.heartbeat_body(),
                timeout_s=timeout_s, busy_poll=False, background=True,
            )  # fmt: skip
        except PyMQError as exc:
            log.debug("heartbeat to %s failed: %s", addr, exc)
            return False
        return True

    # -- the brokers' calls ------------------------------------------------------------

    def _on_request(self, conn: RemotingConnection, cmd: RemotingCommand) -> None:
        """A broker's request, on the connection's reader thread: to the member of the
        group it names."""
        member: ConsumerMember | ProducerMember | None
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            member = self._producers.get(_producer_group(cmd) or "")
            if member is None and len(self._producers) == 1:
                member = next(iter(self._producers.values()), None)
        else:
            group = cmd.ext.get("consumerGroup") or cmd.ext.get("group") or ""
            member = self._consumers.get(group)
        if member is None:
            log.debug("a call (code %d) from %s for no member of this client", cmd.code, conn.addr)
            return
        member.on_request(conn, cmd)

    # -- the thread --------------------------------------------------------------------

    def _intervals(self) -> tuple[float, float]:
        with self._lock:
            settings = list(self._members.values())
        poll = min((s.poll_name_server_interval_ms for s in settings), default=30_000)
        beat = min((s.heartbeat_broker_interval_ms for s in settings), default=30_000)
        return poll / 1000, beat / 1000

    def _run(self) -> None:
        poll_s, beat_s = self._intervals()
        now = time.monotonic()
        next_poll, next_beat = now + poll_s, now + beat_s
        while not self._stop.is_set():
            beat = self._beat_now.wait(_TICK_S)
            if self._stop.is_set():
                return
            try:
                self._each_member(lambda m: getattr(m, "tick", _nothing)())
                poll_s, beat_s = self._intervals()
                now = time.monotonic()
                if now >= next_poll:
                    next_poll = now + poll_s
                    self.refresh_routes()
                if beat or now >= next_beat:
                    self._beat_now.clear()
                    next_beat = now + beat_s
                    self.heartbeat_all()
            except Exception:  # a defect: logged, the loop goes on
                log.exception("the client instance's loop failed a round")

    def _each_member(self, call: Callable[[object], None]) -> None:
        with self._lock:
            members = {id(m): m for m in [*self._producers.values(), *self._consumers.values()]}
        for m in members.values():
            try:
                call(m)
            except Exception:
                log.exception("a member of the client instance failed its periodic work")

    def __repr__(self) -> str:
        return f"ClientInstance({self.client_id!r}, namesrv={';'.join(self.namesrv_addrs)!r})"


def _nothing() -> None:
    return None


def _producer_group(cmd: RemotingCommand) -> str | None:
    """The producer group of a check-back's half (its PGROUP property)."""
    try:
        return decode_record(bytes(cmd.body)).properties.get(PropertyKeys.PRODUCER_GROUP)
    except CorruptRecordError:
        return None
