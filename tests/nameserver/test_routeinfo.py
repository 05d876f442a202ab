"""RouteInfoManager: registration, data versions, slaves, expiry, unregister, copies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from pydantic import ValidationError

from connector.errors import TopicNotExistError
from connector.protocol.route import (
    RegisterBrokerRequest,
    TopicRouteData,
)
from nameserver.routeinfo import ORDER_TOPIC_CONFIG, RouteInfoManager
from tests.support.clocks import FakeMsClock
from tests.support.namesrv import CLUSTER, queues, register_request, unregister_request

EXPIRE_MS = 120_000
A0 = "127.0.0.1:10911"
A1 = "127.0.0.1:10921"
B0 = "127.0.0.1:20911"


@pytest.fixture
def clock() -> FakeMsClock:
    return FakeMsClock()


@pytest.fixture
def rim(clock: FakeMsClock) -> RouteInfoManager:
    return RouteInfoManager(broker_channel_expired_time_ms=EXPIRE_MS, clock=clock)


def queue_nums(route: TopicRouteData) -> dict[str, tuple[int, int, int]]:
    return {q.broker_name: (q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queues}


def tables_empty(rim: RouteInfoManager) -> bool:
    info = rim.cluster_info()
    return not (info.clusters or info.brokers or info.live or rim.topic_list().topics)


# -- table-driven registration scenarios ---------------------------------------------------------


@dataclass
class Case:
    """Registrations applied in order, then the route of ``topic`` (None: must not exist)."""

    name: str
    steps: list[RegisterBrokerRequest]
    topic: str
    route: dict[str, tuple[int, int, int]] | None
    addrs: dict[str, dict[str, str]] = field(default_factory=dict)


CASES = [
    Case(
        "new master creates its topics",
        [register_request(topics={"T": queues(8), "U": queues(2)})],
        "T",
        {"broker-a": (8, 8, 6)},
        {"broker-a": {"0": A0}},
    ),
    Case(
        "same data version does not rewrite queue data",
        [
            register_request(version=1, topics={"T": queues(8)}),
            register_request(version=1, topics={"T": queues(2)}),
        ],
        "T",
        {"broker-a": (8, 8, 6)},
    ),
    Case(
        "a new data version rewrites queue data",
        [
            register_request(version=1, topics={"T": queues(8)}),
            register_request(version=2, topics={"T": queues(2, perm=4)}),
        ],
        "T",
        {"broker-a": (2, 2, 4)},
    ),
    Case(
        "a slave never changes queue data but is listed in addrs",
        [
            register_request(version=1, topics={"T": queues(8)}),
            register_request(
                broker_id=1, addr=A1, version=9, topics={"T": queues(1), "S": queues(1)}
            ),
        ],
        "T",
        {"broker-a": (8, 8, 6)},
        {"broker-a": {"0": A0, "1": A1}},
    ),
    Case(
        "a slave alone creates no topic",
        [register_request(broker_id=1, addr=A1, topics={"S": queues(1)})],
        "S",
        None,
    ),
    Case(
        "a topic dropped from the master's config loses its queues",
        [
            register_request(version=1, topics={"T": queues(4), "GONE": queues(4)}),
            register_request(version=2, topics={"T": queues(4)}),
        ],
        "GONE",
        None,
    ),
    Case(
        "two brokers on one topic",
        [
            register_request(topics={"T": queues(4)}),
            register_request("broker-b", addr=B0, topics={"T": queues(2)}),
        ],
        "T",
        {"broker-a": (4, 4, 6), "broker-b": (2, 2, 6)},
        {"broker-a": {"0": A0}, "broker-b": {"0": B0}},
    ),
    Case(
        "TBW102 is registered like any topic",
        [register_request(topics={"TBW102": queues(8)})],
        "TBW102",
        {"broker-a": (8, 8, 6)},
    ),
    Case(
        "a slave promoted on the same address replaces its old id",
        [
            register_request(broker_id=1, addr=A1, topics={}),
            register_request(broker_id=0, addr=A1, topics={"T": queues(3)}),
        ],
        "T",
        {"broker-a": (3, 3, 6)},
        {"broker-a": {"0": A1}},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_register_scenarios(rim: RouteInfoManager, clock: FakeMsClock, case: Case) -> None:
    for step in case.steps:
        clock.advance(1000)
        result = rim.register_broker(step)
        assert result.ok
    if case.route is None:
        with pytest.raises(TopicNotExistError):
            rim.pick_topic_route(case.topic)
        assert case.topic not in rim.topic_list().topics
        return
    route = rim.pick_topic_route(case.topic)
    assert route.topic == case.topic
    assert queue_nums(route) == case.route
    assert [q.broker_name for q in route.queues] == sorted(case.route)
    assert [b.broker_name for b in route.brokers] == sorted(case.route)
    if case.addrs:
        assert {b.broker_name: b.addrs for b in route.brokers} == case.addrs


def test_version_gate_step_by_step(rim: RouteInfoManager) -> None:
    req = register_request(version=1, topics={"T": queues(8)})
    rim.register_broker(req)
    assert queue_nums(rim.pick_topic_route("T")) == {"broker-a": (8, 8, 6)}
    # same request object, topics mutated, version kept: the heartbeat changes nothing
    req.topics["T"] = queues(1)
    req.topics["NEW"] = queues(1)
    rim.register_broker(req)
    assert queue_nums(rim.pick_topic_route("T")) == {"broker-a": (8, 8, 6)}
    assert rim.topic_list().topics == ["T"]
    # bump the version: now the config is taken
    req.data_version.counter += 1
    rim.register_broker(req)
    assert queue_nums(rim.pick_topic_route("T")) == {"broker-a": (1, 1, 6)}
    assert rim.topic_list().topics == ["NEW", "T"]


def test_result_carries_master_addr(rim: RouteInfoManager) -> None:
    assert rim.register_broker(register_request(broker_id=1, addr=A1)).master_addr is None
    assert rim.register_broker(register_request()).master_addr == A0
    assert rim.register_broker(register_request(broker_id=1, addr=A1)).master_addr == A0


def test_heartbeat_refreshes_live_entry(rim: RouteInfoManager, clock: FakeMsClock) -> None:
    rim.register_broker(register_request(version=1))
    clock.advance(5000)
    rim.register_broker(register_request(version=3))
    (live,) = rim.cluster_info().live
    assert live.last_update_timestamp == int(clock())
    assert (live.data_version.counter, live.addr, live.broker_id) == (3, A0, 0)


def test_cluster_info(rim: RouteInfoManager) -> None:
    rim.register_broker(register_request("broker-b", addr=B0))
    rim.register_broker(register_request())
    rim.register_broker(register_request("broker-x", addr="h:1", cluster="Other"))
    info = rim.cluster_info()
    assert info.clusters == {CLUSTER: ["broker-a", "broker-b"], "Other": ["broker-x"]}
    assert [b.broker_name for b in info.brokers] == ["broker-a", "broker-b", "broker-x"]
    assert {lb.addr for lb in info.live} == {A0, B0, "h:1"}
    assert rim.live_count() == 3


def test_broker_moving_cluster_leaves_the_old_one(rim: RouteInfoManager) -> None:
    rim.register_broker(register_request(cluster="Old"))
    rim.register_broker(register_request(cluster="New"))
    info = rim.cluster_info()
    assert info.clusters == {"New": ["broker-a"]}
    assert info.brokers[0].cluster == "New"


# -- expiry -------------------------------------------------------------------------------------


def test_expiry_removes_everything(rim: RouteInfoManager, clock: FakeMsClock) -> None:
    rim.register_broker(register_request(topics={"T": queues(4), "ONLY_A": queues(1)}))
    rim.register_broker(register_request(broker_id=1, addr=A1))
    clock.advance(EXPIRE_MS)
    assert rim.scan_not_active_broker() == []  # exactly at the limit is still alive
    clock.advance(1)
    assert sorted(rim.scan_not_active_broker()) == sorted([A0, A1])
    assert tables_empty(rim)
    with pytest.raises(TopicNotExistError):
        rim.pick_topic_route("T")
    assert rim.live_count() == 0


def test_expiry_keeps_fresh_brokers(rim: RouteInfoManager, clock: FakeMsClock) -> None:
    rim.register_broker(register_request(topics={"T": queues(4), "ONLY_A": queues(1)}))
    rim.register_broker(
        register_request("broker-b", addr=B0, cluster="C2", topics={"T": queues(2)})
    )
    clock.advance(EXPIRE_MS // 2)
    rim.register_broker(
        register_request("broker-b", addr=B0, cluster="C2", topics={"T": queues(2)})
    )
    clock.advance(EXPIRE_MS // 2 + 1)
    assert rim.scan_not_active_broker() == [A0]
    assert queue_nums(rim.pick_topic_route("T")) == {"broker-b": (2, 2, 6)}
    assert rim.topic_list().topics == ["T"]  # ONLY_A went with its broker
    info = rim.cluster_info()
    assert info.clusters == {"C2": ["broker-b"]}  # the emptied cluster is gone
    assert [b.broker_name for b in info.brokers] == ["broker-b"]


def test_expired_master_keeps_queues_while_its_slave_lives(
    rim: RouteInfoManager, clock: FakeMsClock
) -> None:
    rim.register_broker(register_request())
    clock.advance(EXPIRE_MS)
    rim.register_broker(register_request(broker_id=1, addr=A1))
    clock.advance(1)
    assert rim.scan_not_active_broker() == [A0]
    route = rim.pick_topic_route("T")
    assert route.brokers[0].addrs == {"1": A1}
    assert route.brokers[0].master_addr() is None


def test_reregister_after_expiry_restores_queue_data(
    rim: RouteInfoManager, clock: FakeMsClock
) -> None:
    rim.register_broker(register_request(version=1))
    clock.advance(EXPIRE_MS + 1)
    rim.scan_not_active_broker()
    rim.register_broker(register_request(version=1))  # same version, but new to the tables
    assert queue_nums(rim.pick_topic_route("T")) == {"broker-a": (4, 4, 6)}


# -- unregister ---------------------------------------------------------------------------------


def test_unregister(rim: RouteInfoManager) -> None:
    rim.register_broker(register_request())
    rim.register_broker(register_request(broker_id=1, addr=A1))
    assert rim.unregister_broker(unregister_request(broker_id=1, addr=A1))
    assert rim.pick_topic_route("T").brokers[0].addrs == {"0": A0}
    assert rim.live_count() == 1
    assert rim.unregister_broker(unregister_request())
    assert tables_empty(rim)


def test_unregister_unknown_or_stale_is_a_no_op(rim: RouteInfoManager) -> None:
    assert not rim.unregister_broker(unregister_request())
    rim.register_broker(register_request())
    # an old process of the same broker id on another address
    assert not rim.unregister_broker(unregister_request(addr="127.0.0.1:1"))
    assert rim.pick_topic_route("T").brokers[0].addrs == {"0": A0}
    assert rim.live_count() == 1


# -- reads hand out copies ----------------------------------------------------------------------


def test_returned_objects_are_copies(rim: RouteInfoManager) -> None:
    rim.register_broker(register_request(topics={"T": queues(4)}))
    route = rim.pick_topic_route("T")
    route.queues[0].write_queue_nums = 99
    route.queues.clear()
    route.brokers[0].addrs["0"] = "evil:1"
    info = rim.cluster_info()
    info.clusters[CLUSTER].append("ghost")
    info.brokers[0].addrs.clear()
    rim.topic_list().topics.append("ghost")
    again = rim.pick_topic_route("T")
    assert queue_nums(again) == {"broker-a": (4, 4, 6)}
    assert again.brokers[0].addrs == {"0": A0}
    assert rim.cluster_info().clusters == {CLUSTER: ["broker-a"]}
    assert rim.topic_list().topics == ["T"]


def test_request_mutation_after_register_does_not_leak(rim: RouteInfoManager) -> None:
    req = register_request(topics={"T": queues(4)})
    rim.register_broker(req)
    req.topics["T"].write_queue_nums = 1
    assert queue_nums(rim.pick_topic_route("T")) == {"broker-a": (4, 4, 6)}


# -- unknown topics and the order conf ----------------------------------------------------------


def test_unknown_topic(rim: RouteInfoManager) -> None:
    with pytest.raises(TopicNotExistError) as info:
        rim.pick_topic_route("NOPE")
    assert info.value.code == "TOPIC_NOT_EXIST"


def test_order_topic_conf_from_kv(rim: RouteInfoManager) -> None:
    rim.register_broker(register_request())
    seen: list[tuple[str, str]] = []

    def lookup(namespace: str, key: str) -> str | None:
        seen.append((namespace, key))
        return "broker-a:4"

    kv: Callable[[str, str], str | None] = lookup
    assert rim.pick_topic_route("T", kv_lookup=kv).order_topic_conf == "broker-a:4"
    assert seen == [(ORDER_TOPIC_CONFIG, "T")]
    assert rim.pick_topic_route("T").order_topic_conf is None


# -- request validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"broker_name": "bad name"},
        {"broker_name": ""},
        {"cluster": "a/b"},
        {"broker_id": -1},
        {"broker_addr": "no-port"},
        {"broker_addr": "host:99999"},
        {"topics": {"bad topic": {"read_queue_nums": 1, "write_queue_nums": 1, "perm": 6}}},
        {"topics": {"T": {"read_queue_nums": -1, "write_queue_nums": 1, "perm": 6}}},
        {"topics": {"T": {"read_queue_nums": 1, "write_queue_nums": 1, "perm": 8}}},
    ],
)
def test_register_request_validation(overrides: dict[str, object]) -> None:
    body = register_request().model_dump(mode="json") | overrides
    with pytest.raises(ValidationError):
        RegisterBrokerRequest.model_validate(body)


def test_address_reused_by_another_broker_name(rim: RouteInfoManager) -> None:
    rim.register_broker(register_request("broker-old", topics={"OLD": queues(1)}))
    rim.register_broker(register_request("broker-new", topics={"NEW": queues(2)}))
    info = rim.cluster_info()
    assert info.clusters == {CLUSTER: ["broker-new"]}
    assert [(lb.broker_name, lb.addr) for lb in info.live] == [("broker-new", A0)]
    assert rim.topic_list().topics == ["NEW"]


def test_slot_taken_over_by_a_new_address_drops_the_old_live_entry(
    rim: RouteInfoManager,
) -> None:
    rim.register_broker(register_request(addr=A0))
    rim.register_broker(register_request(addr=B0))  # broker-a's master restarted elsewhere
    assert [lb.addr for lb in rim.cluster_info().live] == [B0]
    assert rim.pick_topic_route("T").brokers[0].addrs == {"0": B0}
