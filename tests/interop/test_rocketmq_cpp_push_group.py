"""A consumer group mixed of RocketMQ's C++ push consumer and pymq's PushConsumer,
both allocating averagely: they split the queues without overlap."""

from __future__ import annotations

import threading
from typing import Any

from connector import Admin, ConsumeStatus, Message, MessageQueue, Producer, PushConsumer
from connector.local import LocalCluster
from tests.support.rocketmq_cpp import CppClient
from tests.support.waits import wait_until

TOPIC, GROUP, COUNT = "CppPushMixed", "CID_MIXED_PUSH", 400


def test_a_group_of_the_cpp_push_consumer_and_pymqs_splits_without_overlap(
    cluster: LocalCluster, cpp_client: CppClient
) -> None:
    ns = cluster.namesrv_addr
    with Admin(namesrv=ns) as admin:
        admin.create_topic(TOPIC, read_queue_nums=4, write_queue_nums=4)
        wait_until(
            lambda: len(admin.topic_route(TOPIC).queues) == 2, 30, what="the topic on both brokers"
        )
    lock = threading.Lock()
    ours: list[Any] = []

    def listener(msgs: list[Any], context: Any) -> ConsumeStatus:
        with lock:
            ours.extend((m.msg_id, context.queue) for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    theirs: dict[str, Any] = {}
    consumer = PushConsumer(group=GROUP, namesrv=ns, listener=listener, allocate="averagely")
    consumer.subscribe(TOPIC, "*")
    consumer.start()
    try:
        cpp = threading.Thread(
            target=lambda: theirs.update(
                cpp_client.push(
                    namesrv=ns,
                    topic=TOPIC,
                    group=GROUP,
                    expected=None,
                    deadline_s=30,
                    timeout_s=50,
                )
            )
        )
        cpp.start()

        def split() -> bool:  # pymq saw the C++ member join and gave up half
            return len([q for q in consumer.owned_queues() if q.topic == TOPIC]) == 4

        wait_until(split, 30, what="pymq owning 4 of 8 queues")
        sent: dict[str, MessageQueue] = {}
        with Producer(group="mixed-producer", namesrv=ns) as producer:
            for i in range(COUNT):
                r = producer.send(Message(topic=TOPIC, body=f"m{i}".encode()))
                sent[r.msg_id] = r.queue
        cpp.join(60)
    finally:
        consumer.shutdown()
    assert theirs.get("messages") is not None, theirs
    cpp_ids = {m["msg_id"] for m in theirs["messages"]}
    with lock:
        our_ids = {msg_id for msg_id, _ in ours}
        our_queues = {mq for _, mq in ours}
    cpp_queues = {sent[i] for i in cpp_ids}
    assert cpp_ids | our_ids == set(sent)  # everything consumed
    assert not cpp_ids & our_ids  # nothing twice
    assert not cpp_queues & our_queues  # no queue shared
    assert len(our_queues) == 4 and len(cpp_queues) == 4


def test_the_cpp_orderly_push_consumer_locks_its_queues_on_pymqs_broker(
    cluster: LocalCluster, cpp_client: CppClient
) -> None:
    """RocketMQ's orderly push consumer consumes only the queues it locked
    (LOCK_BATCH_MQ): it gets everything, each key in order."""
    topic, keys, per_key = "CppOrderly", [f"k{i}" for i in range(6)], 30
    with Admin(namesrv=cluster.namesrv_addr) as admin:
        admin.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
        wait_until(
            lambda: len(admin.topic_route(topic).queues) == 2, 30, what="the topic on both brokers"
        )
    with Producer(group="cpp-orderly-producer", namesrv=cluster.namesrv_addr) as producer:
        for n in range(per_key):
            for k in keys:
                producer.send(Message(topic=topic, body=f"{k}:{n}".encode()), sharding_key=k)
    res = cpp_client.push(
        namesrv=cluster.namesrv_addr, topic=topic, group="CID_CPP_ORDERLY",
        expected=len(keys) * per_key, orderly=True, thread_count=2, timeout_s=90,
    )  # fmt: skip
    assert res["ok"], res.get("error")
    bodies = [m["body"] for m in res["messages"]]
    assert set(bodies) == {f"{k}:{n}" for k in keys for n in range(per_key)}
    for k in keys:
        got = [int(b.split(":")[1]) for b in bodies if b.startswith(f"{k}:")]
        assert got == sorted(got), k
