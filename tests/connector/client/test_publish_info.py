"""TopicPublishInfo: the publish list from a route, round-robin, the TBW102 fallback."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from connector.client.publish_info import QueueIndex, TopicPublishInfo
from connector.errors import ConfigError, TopicNotExistError
from connector.protocol.message import MessageQueue
from connector.protocol.route import BrokerData, QueueData, TopicRouteData


def make_route(
    topic: str = "T",
    queues: dict[str, int] | None = None,
    *,
    perm: dict[str, int] | None = None,
    read_queues: dict[str, int] | None = None,
    no_master: tuple[str, ...] = (),
    order_topic_conf: str | None = None,
) -> TopicRouteData:
    queues = {"broker-b": 2, "broker-a": 3} if queues is None else queues
    perm = perm or {}
    read_queues = read_queues or {}
    return TopicRouteData(
        topic=topic,
        queues=[
            QueueData(
                broker_name=name,
                read_queue_nums=read_queues.get(name, n),
                write_queue_nums=n,
                perm=perm.get(name, 6),
            )
            for name, n in queues.items()
        ],
        brokers=[
            BrokerData(
                cluster="DefaultCluster",
                broker_name=name,
                addrs={"1": f"10.0.0.{i}:10912"}
                if name in no_master
                else {"0": f"10.0.0.{i}:10911", "1": f"10.0.0.{i}:10912"},
            )
            for i, name in enumerate(queues, start=1)
        ],
        order_topic_conf=order_topic_conf,
    )


def mq(broker: str, queue_id: int, topic: str = "T") -> MessageQueue:
    return MessageQueue(topic, broker, queue_id)


# -- the publish list -------------------------------------------------------------------------


def test_queues_sorted_by_broker_then_queue_id() -> None:
    info = TopicPublishInfo.from_route(make_route())
    assert info.message_queues == (
        mq("broker-a", 0),
        mq("broker-a", 1),
        mq("broker-a", 2),
        mq("broker-b", 0),
        mq("broker-b", 1),
    )
    assert info.topic == "T"
    assert info.broker_names == ("broker-a", "broker-b")
    assert info.ok()
    assert not info.order_topic


@pytest.mark.parametrize(
    ("perm", "expected_brokers"),
    [
        ({"broker-a": 6, "broker-b": 6}, ("broker-a", "broker-b")),
        ({"broker-a": 4, "broker-b": 6}, ("broker-b",)),  # read-only: not writable
        ({"broker-a": 2, "broker-b": 7}, ("broker-a", "broker-b")),  # write-only, all bits
        ({"broker-a": 1, "broker-b": 0}, ()),
    ],
)
def test_only_writable_queues(perm: dict[str, int], expected_brokers: tuple[str, ...]) -> None:
    info = TopicPublishInfo.from_route(make_route(perm=perm))
    assert info.broker_names == expected_brokers
    assert info.ok() is bool(expected_brokers)


def test_brokers_without_master_are_left_out() -> None:
    info = TopicPublishInfo.from_route(make_route(no_master=("broker-a",)))
    assert info.broker_names == ("broker-b",)
    assert dict(info.broker_addrs) == {"broker-b": "10.0.0.1:10911"}
    assert info.find_broker_addr("broker-a") is None


def test_broker_queue_data_missing_is_left_out() -> None:
    route = make_route()
    route = route.model_copy(update={"brokers": route.brokers[:1]})  # only broker-b's data
    info = TopicPublishInfo.from_route(route)
    assert info.broker_names == ("broker-b",)


def test_broker_addrs_are_masters_and_read_only() -> None:
    info = TopicPublishInfo.from_route(make_route())
    assert dict(info.broker_addrs) == {"broker-b": "10.0.0.1:10911", "broker-a": "10.0.0.2:10911"}
    assert info.broker_addrs.get("broker-a") == "10.0.0.2:10911"
    assert info.find_broker_addr("broker-b") == "10.0.0.1:10911"
    with pytest.raises(TypeError):
        info.broker_addrs["broker-a"] = "evil:1"  # type: ignore[index]


def test_empty_route_is_not_ok_and_select_raises() -> None:
    info = TopicPublishInfo.from_route(make_route(queues={}))
    assert not info.ok()
    with pytest.raises(TopicNotExistError, match="No route info of this topic"):
        info.select_one_message_queue()


def test_zero_write_queues() -> None:
    info = TopicPublishInfo.from_route(make_route(queues={"broker-a": 0, "broker-b": 1}))
    assert info.message_queues == (mq("broker-b", 0),)
    assert info.queues_of("broker-a") == ()


def test_queues_of() -> None:
    info = TopicPublishInfo.from_route(make_route())
    assert info.queues_of("broker-b") == (mq("broker-b", 0), mq("broker-b", 1))
    assert info.queues_of("broker-z") == ()


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ("broker-a:2;broker-b:1", [("broker-a", 0), ("broker-a", 1), ("broker-b", 0)]),
        ("broker-b:1;broker-a:1", [("broker-b", 0), ("broker-a", 0)]),  # conf order kept
        ("broker-a:2;garbage;broker-b:x;:3;broker-c:0;", [("broker-a", 0), ("broker-a", 1)]),
    ],
)
def test_order_topic_conf(conf: str, expected: list[tuple[str, int]]) -> None:
    # an ordered topic keeps its queues even while a broker has no master (keys stay put)
    route = make_route(order_topic_conf=conf, no_master=("broker-b",), perm={"broker-a": 4})
    info = TopicPublishInfo.from_route(route)
    assert info.order_topic
    assert info.message_queues == tuple(mq(b, q) for b, q in expected)


# -- round-robin ------------------------------------------------------------------------------


def test_round_robin_from_start_index() -> None:
    info = TopicPublishInfo.from_route(make_route(), start_index=3)
    picked = [info.select_one_message_queue() for _ in range(6)]
    q = info.message_queues
    assert picked == [q[3], q[4], q[0], q[1], q[2], q[3]]


@pytest.mark.parametrize("start", [None, 0, 7, 2**31 - 1])
def test_round_robin_covers_all_queues_evenly(start: int | None) -> None:
    info = TopicPublishInfo.from_route(make_route(), start_index=start)
    rounds = 40
    counts = Counter(info.select_one_message_queue() for _ in range(rounds * 5))
    assert counts == dict.fromkeys(info.message_queues, rounds)


@pytest.mark.parametrize("start", range(5))
def test_retry_skips_the_last_broker(start: int) -> None:
    info = TopicPublishInfo.from_route(make_route(), start_index=start)
    for _ in range(20):
        assert info.select_one_message_queue("broker-a").broker_name == "broker-b"
        assert info.select_one_message_queue("broker-b").broker_name == "broker-a"


def test_retry_with_a_single_broker_uses_it() -> None:
    info = TopicPublishInfo.from_route(make_route(queues={"broker-a": 2}), start_index=0)
    assert info.select_one_message_queue("broker-a") == mq("broker-a", 0)
    assert info.select_one_message_queue("broker-a") == mq("broker-a", 1)


def test_retry_with_unknown_last_broker_is_plain_round_robin() -> None:
    info = TopicPublishInfo.from_route(make_route(), start_index=0)
    assert info.select_one_message_queue("broker-z") == info.message_queues[0]


def test_queue_index_random_start_in_range() -> None:
    starts = {QueueIndex().get_and_increment() for _ in range(20)}
    assert all(0 <= s < 2**31 for s in starts)
    assert len(starts) > 1


def test_queue_index_thread_safe() -> None:
    index = QueueIndex(0)
    seen: list[list[int]] = []

    def work() -> None:
        seen.append([index.get_and_increment() for _ in range(2000)])

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    values = sorted(v for chunk in seen for v in chunk)
    assert values == list(range(16000))


# -- TBW102 fallback --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("default_nums", "read_nums", "expected"),
    [(4, 8, 4), (4, 2, 2), (1, 8, 1), (16, 8, 8)],
)
def test_default_topic_queue_nums(default_nums: int, read_nums: int, expected: int) -> None:
    tbw = make_route(
        "TBW102",
        {"broker-a": 8, "broker-b": 8},
        read_queues={"broker-a": read_nums, "broker-b": read_nums},
        perm={"broker-a": 7, "broker-b": 7},
    )
    before = tbw.model_dump()
    info = TopicPublishInfo.from_route_for_default_topic(tbw, "NewTopic", default_nums)
    assert info.topic == "NewTopic"
    assert info.message_queues == tuple(
        mq(b, i, "NewTopic") for b in ("broker-a", "broker-b") for i in range(expected)
    )
    assert info.route.topic == "NewTopic"
    assert {q.write_queue_nums for q in info.route.queues} == {expected}
    assert {q.read_queue_nums for q in info.route.queues} == {expected}
    assert tbw.model_dump() == before  # the TBW102 route is not rewritten (RocketMQ did)
    assert info.route.brokers[0] is not tbw.brokers[0]


def test_default_topic_queue_nums_must_be_positive() -> None:
    with pytest.raises(ConfigError):
        TopicPublishInfo.from_route_for_default_topic(make_route("TBW102"), "X", 0)


def test_route_is_kept_and_never_mutated() -> None:
    route = make_route()
    before = route.model_dump()
    info = TopicPublishInfo.from_route(route, start_index=0)
    queues_before = info.message_queues
    for last in (None, "broker-a", "broker-b"):
        for _ in range(50):
            info.select_one_message_queue(last)
    assert info.route is route
    assert route.model_dump() == before
    assert info.message_queues is queues_before
    assert info.message_queues == TopicPublishInfo.from_route(route).message_queues


def test_repr() -> None:
    text = repr(TopicPublishInfo.from_route(make_route()))
    assert "queues=5" in text
    assert "broker-a" in text
