"""Route models: what brokers register with a NameServer and what clients read back.

The JSON is snake_case. RocketMQ's names map one to one (``brokerName`` ->
``broker_name``, ``queueDatas`` -> ``queues``, ``brokerDatas`` -> ``brokers``).
Models validate what arrives over the wire; unknown fields are ignored so an
older NameServer accepts a newer broker's registration.

Permission bits (``perm``) are RocketMQ's ``PermName``: 4 read, 2 write, 1 inherit.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from connector.protocol.names import validate_topic

__all__ = [
    "MASTER_ID",
    "PERM_INHERIT",
    "PERM_READ",
    "PERM_WRITE",
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "KvEntry",
    "KvValue",
    "LiveBroker",
    "QueueData",
    "RegisterBrokerRequest",
    "RegisterBrokerResult",
    "TopicList",
    "TopicQueueConfig",
    "TopicRouteData",
    "UnregisterBrokerRequest",
]

MASTER_ID = 0
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1

_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,127}$"
_MAX_QUEUE_NUMS = 65_535


def _check_addr(addr: str) -> str:
    """``host:port`` with a non-empty host and a port in 1..65535 (``[v6]:port`` too)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"broker address {addr!r} is not host:port")
    if any(c.isspace() for c in addr) or "/" in addr:
        raise ValueError(f"broker address {addr!r} contains whitespace or '/'")
    return addr


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class DataVersion(_Model):
    """Version of a broker's topic config: changes whenever a topic is created/updated."""

    timestamp: int = Field(ge=0, description="ms since the epoch of the last change")
    counter: int = Field(ge=0, description="changes since the broker started")


class TopicQueueConfig(_Model):
    """One topic as a broker reports it in a registration."""

    read_queue_nums: int = Field(ge=0, le=_MAX_QUEUE_NUMS)
    write_queue_nums: int = Field(ge=0, le=_MAX_QUEUE_NUMS)
    perm: int = Field(ge=0, le=7, description="PermName bits: 4 read, 2 write, 1 inherit")
    topic_sys_flag: int = 0
    order: bool = False


class _BrokerIdentity(_Model):
    cluster: str = Field(pattern=_NAME_PATTERN)
    broker_name: str = Field(pattern=_NAME_PATTERN)
    broker_id: int = Field(ge=0, description="0 is the master, >0 a slave")
    broker_addr: str = Field(description="host:port of the broker's remoting service")

    @field_validator("broker_addr")
    @classmethod
    def _addr(cls, value: str) -> str:
        return _check_addr(value)


class RegisterBrokerRequest(_BrokerIdentity):
    """A broker's heartbeat: its identity and its full topic config.

    Reserved topics such as TBW102 are legal here (a broker with auto-create
    on registers TBW102); only the name rules of ``validate_topic`` apply.
    """

    data_version: DataVersion
    topics: dict[str, TopicQueueConfig] = Field(default_factory=dict)
    http_addr: str | None = Field(default=None, description="http://host:port of its REST API")
    ha_addr: str | None = Field(
        default=None, description="host:port of a master's HA port, where its slaves connect"
    )

    @field_validator("ha_addr")
    @classmethod
    def _ha(cls, value: str | None) -> str | None:
        return None if value is None else _check_addr(value)

    @field_validator("topics")
    @classmethod
    def _topic_names(cls, value: dict[str, TopicQueueConfig]) -> dict[str, TopicQueueConfig]:
        for topic in value:
            validate_topic(topic)
        return value


class RegisterBrokerResult(_Model):
    """The answer to a registration: the master of the broker's group, if known: its
    remoting address and its HA address (RocketMQ's ``masterAddr``, ``haServerAddr``),
    from which a slave replicates."""

    ok: bool = True
    master_addr: str | None = None
    ha_server_addr: str | None = None


class UnregisterBrokerRequest(_BrokerIdentity):
    """Sent by a broker that shuts down cleanly."""


class QueueData(_Model):
    """The queues one broker (group) holds for one topic."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


class BrokerData(_Model):
    """A broker group: ``addrs`` maps broker id (as a string, ``"0"`` = master) to the
    remoting host:port, ``http_addrs`` the same ids to each REST API's base URL."""

    cluster: str
    broker_name: str
    addrs: dict[str, str] = Field(default_factory=dict)
    http_addrs: dict[str, str] = Field(default_factory=dict)

    def master_addr(self) -> str | None:
        """The master's address, or None while the group has no live master."""
        return self.addrs.get(str(MASTER_ID))


class TopicRouteData(_Model):
    """Where a topic lives: its queues per broker and those brokers' addresses."""

    topic: str
    queues: list[QueueData]
    brokers: list[BrokerData]
    order_topic_conf: str | None = None


class LiveBroker(_Model):
    """One broker process the NameServer has heard from recently."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    last_update_timestamp: int = Field(description="ms since the epoch of the last heartbeat")
    data_version: DataVersion
    http_addr: str | None = None


class ClusterInfo(_Model):
    """Clusters with their (sorted) broker names, every broker group, every live broker."""

    clusters: dict[str, list[str]]
    brokers: list[BrokerData]
    live: list[LiveBroker]


class TopicList(_Model):
    topics: list[str]


class KvEntry(_Model):
    namespace: str
    key: str
    value: str


class KvValue(_Model):
    value: str


# -- RocketMQ's JSON (remoting bodies): camelCase, RocketMQ's field names -----------------


def route_to_remoting(route: TopicRouteData) -> dict[str, object]:
    """GET_ROUTEINFO_BY_TOPIC's body: RocketMQ's TopicRouteData, plus each broker's
    ``httpAddrs`` (which RocketMQ clients ignore)."""
    return {
        "orderTopicConf": route.order_topic_conf,
        "queueDatas": [
            {
                "brokerName": q.broker_name,
                "readQueueNums": q.read_queue_nums,
                "writeQueueNums": q.write_queue_nums,
                "perm": q.perm,
                "topicSysFlag": q.topic_sys_flag,
                "topicSynFlag": q.topic_sys_flag,
            }
            for q in route.queues
        ],
        "brokerDatas": [_broker_to_remoting(b) for b in route.brokers],
        "filterServerTable": {},
    }


def _broker_to_remoting(b: BrokerData) -> dict[str, object]:
    return {
        "cluster": b.cluster,
        "brokerName": b.broker_name,
        "brokerAddrs": b.addrs,
        "httpAddrs": b.http_addrs,
    }


def _broker_from_remoting(raw: dict[str, object]) -> BrokerData:
    return BrokerData(
        cluster=str(raw.get("cluster", "")),
        broker_name=str(raw["brokerName"]),
        addrs={str(k): str(v) for k, v in dict(raw.get("brokerAddrs") or {}).items()},  # type: ignore[call-overload]
        http_addrs={str(k): str(v) for k, v in dict(raw.get("httpAddrs") or {}).items()},  # type: ignore[call-overload]
    )


def route_from_remoting(topic: str, raw: dict[str, object]) -> TopicRouteData:
    """The inverse of ``route_to_remoting`` (KeyError / ValueError when it is not one)."""
    queues = [
        QueueData(
            broker_name=str(q["brokerName"]),
            read_queue_nums=int(q["readQueueNums"]),
            write_queue_nums=int(q["writeQueueNums"]),
            perm=int(q["perm"]),
            topic_sys_flag=int(q.get("topicSysFlag", 0)),
        )
        for q in raw.get("queueDatas") or []  # type: ignore[attr-defined]
    ]
    brokers = [_broker_from_remoting(b) for b in raw.get("brokerDatas") or []]  # type: ignore[attr-defined]
    conf = raw.get("orderTopicConf")
    return TopicRouteData(
        topic=topic,
        queues=queues,
        brokers=brokers,
        order_topic_conf=None if conf is None else str(conf),
    )


def cluster_to_remoting(info: ClusterInfo) -> dict[str, object]:
    """GET_BROKER_CLUSTER_INFO's body: RocketMQ's ClusterInfo, plus ``liveBrokers``."""
    return {
        "brokerAddrTable": {b.broker_name: _broker_to_remoting(b) for b in info.brokers},
        "clusterAddrTable": info.clusters,
        "liveBrokers": [lb.model_dump(mode="json") for lb in info.live],
    }


def cluster_from_remoting(raw: dict[str, object]) -> ClusterInfo:
    table = raw.get("brokerAddrTable") or {}
    assert isinstance(table, dict)
    clusters = raw.get("clusterAddrTable") or {}
    assert isinstance(clusters, dict)
    return ClusterInfo(
        clusters={str(c): sorted(str(n) for n in names) for c, names in clusters.items()},
        brokers=sorted(
            (_broker_from_remoting(b) for b in table.values()), key=lambda b: b.broker_name
        ),
        live=[LiveBroker.model_validate(x) for x in raw.get("liveBrokers") or []],  # type: ignore[attr-defined]
    )
