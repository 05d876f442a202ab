"""Admin: the mqadmin of pymq, as a Python class (``pymq admin`` is its command line).

Cluster-wide operations go through the NameServer's view: creating a topic
puts its config on every master of a cluster (the brokers then register
it); status, progress and lookups ask each broker that holds the topic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from connector.client.namesrv import NameServerClient, parse_namesrv
from connector.client.rest import DEFAULT_TIMEOUT_MS, RestClient, path
from connector.client.rpc import Rpc
from connector.errors import (
    ConfigError,
    MessageIllegalError,
    MessageNotExistError,
    NotFoundError,
    PyMQError,
    TopicNotExistError,
)
from connector.protocol.acl import Credentials
from connector.protocol.msgid import decode_offset_msg_id, is_msg_id
from connector.protocol.names import validate_group, validate_topic
from connector.protocol.route import ClusterInfo, TopicRouteData
from connector.protocol.tls import client_context, tls_settings

__all__ = ["Admin"]


class Admin:
    def __init__(
        self,
        *,
        namesrv: str | Sequence[str] | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        access_key: str | None = None,
        secret_key: str | None = None,
        tls: bool = False,
        tls_ca_file: str | None = None,
    ) -> None:
        """``timeout_ms`` bounds each connect, write and read of a broker's REST call;
        ``access_key`` / ``secret_key``: the account requests are signed with (servers
        with ACL on; admin requests need an admin account); ``tls``: servers that serve
        TLS, verified against ``tls_ca_file`` (else the system's CAs)."""
        creds = self.credentials = Credentials.of(access_key, secret_key)
        self.tls = tls_settings(tls, tls_ca_file)
        self.tls_ca_file = tls_ca_file
        context = client_context(tls_ca_file) if self.tls else None
        # the NameServer over remoting; brokers' admin calls over their REST API, whose
        # base URL every route and cluster listing carries
        self.rpc = Rpc(credentials=creds, tls=context)
        self.namesrv = NameServerClient(parse_namesrv(namesrv), self.rpc)
        self.rest = RestClient(timeout_ms=timeout_ms, credentials=creds, tls=context)

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.rest.close()
        self.rpc.close()

    def _call(self, base_url: str, method: str, target: str, payload: Any = None) -> Any:
        return self.rest.call(base_url, method, target, payload)

    # -- cluster -----------------------------------------------------------------------

    def cluster_list(self) -> ClusterInfo:
        return self.namesrv.cluster_info()

    def masters(self, cluster: str | None = None) -> dict[str, str]:
        """broker name -> its master's REST base URL (``http://h:p``), for one cluster or all."""
        info = self.namesrv.cluster_info()
        names = set(info.clusters.get(cluster, [])) if cluster else None
        if cluster and not names:
            raise PyMQError(f"cluster {cluster} has no live broker")
        return {
            b.broker_name: b.http_addrs["0"]
            for b in info.brokers
            if "0" in b.http_addrs and (names is None or b.broker_name in names)
        }

    def _http_of(self, addr: str) -> str:
        """The REST base URL of the broker whose remoting address is ``addr``, or of the
        master of the broker named ``addr`` (the address itself when no broker has it:
        it may be a REST address already)."""
        for b in self.namesrv.cluster_info().brokers:
            if b.broker_name == addr and "0" in b.http_addrs:
                return b.http_addrs["0"]
            for broker_id, remoting in b.addrs.items():
                if remoting == addr and broker_id in b.http_addrs:
                    return b.http_addrs[broker_id]
        return addr

    def broker_status(self, addr: str) -> dict[str, Any]:
        """``/health`` of the broker at ``addr`` (its remoting or REST address, or a
        broker name: its master)."""
        out: dict[str, Any] = self._call(self._http_of(addr), "GET", "/health")
        return out

    def broker_config(self, addr: str) -> dict[str, Any]:
        """Every setting of the broker at ``addr`` (as ``broker_status``), as it runs."""
        out: dict[str, Any] = self._call(self._http_of(addr), "GET", "/config")
        return out

    def update_broker_config(self, addr: str, changes: dict[str, Any]) -> dict[str, Any]:
        """Change settings of a running broker (until it stops); its settings after."""
        out: dict[str, Any] = self._call(self._http_of(addr), "PUT", "/config", changes)
        return out

    # -- topics ------------------------------------------------------------------------

    def topic_list(self) -> list[str]:
        return self.namesrv.topic_list()

    def topic_route(self, topic: str) -> TopicRouteData:
        route = self.namesrv.topic_route(validate_topic(topic))
        if route is None:
            raise TopicNotExistError(f"No route info of this topic: {topic}")
        return route

    def create_topic(
        self,
        topic: str,
        *,
        cluster: str = "DefaultCluster",
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
    ) -> list[str]:
        """Create (or update) ``topic`` on every master of ``cluster``; their names."""
        validate_topic(topic)
        body = {
            "read_queue_nums": read_queue_nums,
            "write_queue_nums": write_queue_nums,
            "perm": perm,
        }
        masters = self.masters(cluster)
        for addr in masters.values():
            self._call(addr, "PUT", path("topics", topic), body)
        return sorted(masters)

    def update_topic(self, topic: str, *, perm: int) -> list[dict[str, Any]]:
        """Change ``topic``'s permission (2 write, 4 read, 6 both; RocketMQ's) on every
        broker that has it, its queues kept; each broker's new config."""
        if perm not in (0, 2, 4, 6):
            raise ConfigError(f"perm must be 2 (write), 4 (read), 6 (both) or 0, got {perm}")
        out = []
        for name, addr in sorted(self._topic_brokers(topic).items()):
            now = self._call(addr, "GET", path("topics", topic))
            body = {k: now[k] for k in ("read_queue_nums", "write_queue_nums", "order") if k in now}
            done = self._call(addr, "PUT", path("topics", topic), {**body, "perm": perm})
            out.append({"broker_name": name, **{k: v for k, v in done.items() if k != "queues"}})
        return out

    def _topic_brokers(self, topic: str) -> dict[str, str]:
        route = self.topic_route(topic)
        holders = {q.broker_name for q in route.queues}
        return {
            b.broker_name: b.http_addrs["0"]
            for b in route.brokers
            if b.broker_name in holders and "0" in b.http_addrs
        }

    def delete_topic(self, topic: str) -> list[str]:
        """Delete ``topic`` from every broker that has it; their names."""
        brokers = self._topic_brokers(topic)
        for addr in brokers.values():
            self._call(addr, "DELETE", path("topics", topic))
        return sorted(brokers)

    def topic_status(self, topic: str) -> list[dict[str, Any]]:
        """Per broker and queue: min and max offset, last store time."""
        rows = []
        for name, addr in sorted(self._topic_brokers(topic).items()):
            status = self._call(addr, "GET", path("topics", topic))
            for q in status["queues"]:
                rows.append({"broker_name": name, **q})
        return rows

    # -- messages ----------------------------------------------------------------------

    def get_message(self, msg_id: str, *, topic: str | None = None) -> dict[str, Any]:
        """The message ``msg_id`` names: its offset msgId, or the msgId its send returned
        (UNIQ_KEY), as RocketMQ's queryMsgById. The broker an offset msgId names is asked
        first, then every master (which looks a UNIQ_KEY up in ``topic``'s index, or in
        every topic's)."""
        if not is_msg_id(msg_id):
            raise MessageIllegalError(f"{msg_id!r} is not a msgId (32 hex characters)")
        try:
            host, _ = decode_offset_msg_id(msg_id)
        except PyMQError:  # a UNIQ_KEY whose bytes are no address and offset
            host = ""
        info = self.namesrv.cluster_info()
        masters = [
            b.http_addrs["0"]
            for b in sorted(info.brokers, key=lambda b: b.broker_name)
            if "0" in b.http_addrs
        ]
        named = [
            b.http_addrs[i]
            for b in info.brokers
            for i, a in b.addrs.items()
            if a == host and i in b.http_addrs
        ]
        target = path("messages", msg_id, query={"topic": topic})
        for addr in dict.fromkeys([*named, *masters]):
            try:
                out: dict[str, Any] = self._call(addr, "GET", target)
            except MessageNotExistError:
                continue
            return out
        raise MessageNotExistError(f"no broker has a message with msgId {msg_id}")

    def topic_queues(self, topic: str) -> list[tuple[str, str, dict[str, Any]]]:
        """Every queue of ``topic``: (broker name, its REST base URL, the queue's status:
        ``queue_id``, ``min_offset``, ``max_offset``, ``last_update_timestamp``)."""
        out = []
        for name, addr in sorted(self._topic_brokers(topic).items()):
            for q in self._call(addr, "GET", path("topics", topic))["queues"]:
                out.append((name, addr, q))
        return out

    def pull(
        self,
        broker: str,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        max_nums: int = 32,
        wait_ms: int = 0,
    ) -> dict[str, Any]:
        """One pull from ``broker`` (a REST base URL) that commits nothing: ``status``,
        ``next_begin_offset``, ``min_offset``, ``max_offset``, ``messages``; with
        ``wait_ms`` an empty answer waits (long polling) that long for a message."""
        target = path(
            "topics",
            topic,
            "queues",
            queue_id,
            "messages",
            query={"offset": offset, "max": max_nums, "wait_ms": wait_ms},
        )
        out: dict[str, Any] = self._call(broker, "GET", target)
        return out

    def offset_by_time(self, broker: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The offset of the first message of a queue stored at or after a time."""
        target = path(
            "topics", topic, "queues", queue_id, "offset-by-time", query={"timestamp": timestamp_ms}
        )
        return int(self._call(broker, "GET", target)["offset"])

    def query_message(self, topic: str, key: str, max_num: int = 32) -> list[dict[str, Any]]:
        """Messages of ``topic`` with KEYS or UNIQ_KEY ``key``, from every broker."""
        out: list[dict[str, Any]] = []
        for name, addr in sorted(self._topic_brokers(topic).items()):
            raw = self._call(
                addr, "GET", path("topics", topic, "messages", query={"key": key, "max": max_num})
            )
            out += [{"broker_name": name, **m} for m in raw["messages"]]
        return out

    # -- consumers ---------------------------------------------------------------------

    def consumer_progress(self, group: str) -> list[dict[str, Any]]:
        """Per queue the group consumed: broker offset, consumer offset, lag."""
        validate_group(group)
        rows = []
        for name, addr in sorted(self.masters().items()):
            raw = self._call(addr, "GET", path("consumers", group, "progress"))
            rows += [{"broker_name": name, **q} for q in raw["queues"]]
        return rows

    def _merge_masters(self, target: str) -> list[tuple[str, Any]]:
        return [
            (name, self._call(addr, "GET", target)) for name, addr in sorted(self.masters().items())
        ]

    def consumer_groups(self) -> list[dict[str, Any]]:
        """Every consumer group a master knows (clients online or offsets committed):
        ``group``, ``clients`` (distinct ids online), ``consume_type``,
        ``message_model``, ``topics``, ``total_lag`` (summed over the masters)."""
        groups: dict[str, dict[str, Any]] = {}
        online: dict[str, set[str]] = {}
        for name, answer in self._merge_masters("/consumers"):
            for g in answer:
                row = groups.setdefault(
                    g["group"],
                    {
                        "group": g["group"],
                        "clients": 0,
                        "consume_type": "",
                        "message_model": "",
                        "topics": [],
                        "total_lag": 0,
                        "brokers": [],
                    },
                )
                row["total_lag"] += g["total_lag"]
                row["topics"] = sorted(set(row["topics"]) | set(g["topics"]))
                row["consume_type"] = row["consume_type"] or g["consume_type"]
                row["message_model"] = row["message_model"] or g["message_model"]
                row["brokers"].append(name)
                if g["clients"]:
                    online.setdefault(g["group"], set()).add(name)
        for group, row in groups.items():
            if group in online:  # a client heartbeats every broker: count ids once
                row["clients"] = len(
                    {c["client_id"] for c in self.consumer_connections(group)["connections"]}
                )
        return [groups[g] for g in sorted(groups)]

    def consumer_connections(self, group: str) -> dict[str, Any]:
        """The group's clients online (``connections``: client_id, addr, language,
        version, last_heartbeat_ms), merged over the masters, and ``subscriptions``."""
        validate_group(group)
        out: dict[str, Any] = {
            "group": group,
            "consume_type": "",
            "message_model": "",
            "consume_from_where": "",
            "subscriptions": {},
        }
        clients: dict[str, dict[str, Any]] = {}
        for _, answer in self._merge_masters(path("consumers", group, "connections")):
            for key in ("consume_type", "message_model", "consume_from_where"):
                out[key] = out[key] or answer[key]
            out["subscriptions"].update(answer["subscriptions"])
            for c in answer["connections"]:
                seen = clients.get(c["client_id"])
                if seen is None or c["last_heartbeat_ms"] > seen["last_heartbeat_ms"]:
                    clients[c["client_id"]] = c
        out["connections"] = [clients[c] for c in sorted(clients)]
        return out

    def consumer_running_info(self, group: str, client_id: str) -> dict[str, Any]:
        """A live consumer's own view (GET_CONSUMER_RUNNING_INFO, asked by the first master
        it is connected to): ``properties`` (its settings), ``subscriptionSet``,
        ``mqTable`` (per queue held: ``commitOffset``, ``cachedMsgCount``, ...).
        NotFoundError if no master has it online."""
        validate_group(group)
        target = path("consumers", group, "clients", client_id, "running-info")
        for _, addr in sorted(self.masters().items()):
            try:
                info: dict[str, Any] = self._call(addr, "GET", target)
            except NotFoundError:
                continue
            return info
        raise NotFoundError(f"consumer {client_id} of group {group} is not online")

    def consume_directly(
        self, group: str, client_id: str, msg_id: str, topic: str | None = None
    ) -> dict[str, Any]:
        """Give message ``msg_id`` to a live consumer's listener now
        (CONSUME_MESSAGE_DIRECTLY, sent by the master that stores it): ``consumeResult``
        (CR_SUCCESS, CR_LATER, CR_THROW_EXCEPTION), ``remark``, ``spentTimeMills``.
        Offsets do not move. NotFoundError if no master has both."""
        validate_group(group)
        target = path("consumers", group, "clients", client_id, "consume", msg_id,
                      query={"topic": topic})  # fmt: skip
        for _, addr in sorted(self.masters().items()):
            try:
                answer: dict[str, Any] = self._call(addr, "POST", target)
            except NotFoundError:
                continue
            return answer
        raise NotFoundError(f"no master has both message {msg_id} and consumer {client_id}")

    def producer_connections(self, group: str) -> dict[str, Any]:
        """The producer group's clients online, merged over the masters."""
        validate_group(group)
        clients: dict[str, dict[str, Any]] = {}
        for _, answer in self._merge_masters(path("producers", group, "connections")):
            for c in answer["connections"]:
                seen = clients.get(c["client_id"])
                if seen is None or c["last_heartbeat_ms"] > seen["last_heartbeat_ms"]:
                    clients[c["client_id"]] = c
        return {"group": group, "connections": [clients[c] for c in sorted(clients)]}

    def reset_offset(self, group: str, topic: str, timestamp_ms: int) -> list[dict[str, Any]]:
        """Move the group's offsets in ``topic`` to the first message at/after a time;
        the group's live push consumers are told, and consume from there."""
        validate_group(group)
        rows = []
        for name, addr, q in self.topic_queues(topic):
            qid = q["queue_id"]
            offset = self.offset_by_time(addr, topic, qid, timestamp_ms)
            self._call(
                addr, "PUT", path("consumers", group, "offsets", topic, qid),
                {"offset": offset, "notify_consumers": True},
            )  # fmt: skip
            rows.append({"broker_name": name, "queue_id": qid, "offset": offset})
        return rows
