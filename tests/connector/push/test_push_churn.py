"""Members joining and leaving one at a time while messages flow, with ``sticky``
and with ``averagely``: each step settles to every queue owned once, nothing is
lost, and what moved and what came twice is printed (measured, not asserted:
the pure comparison over many id sets is in test_push_allocate.py)."""

from __future__ import annotations

import collections
import threading
from typing import Any

import pytest

from connector import ConsumeStatus, Message, Producer, PushConsumer
from connector.local import LocalCluster
from connector.protocol.message import MessageQueue
from tests.support.cluster import create_topic
from tests.support.waits import wait_until


@pytest.mark.parametrize("strategy", ["sticky", "averagely"])
def test_members_join_and_leave_one_at_a_time(cluster: LocalCluster, strategy: str) -> None:
    topic, group = f"PushChurn-{strategy}", f"push-churn-{strategy}"
    create_topic(cluster, topic, queues=8)  # 16 queues
    lock = threading.Lock()
    counts: collections.Counter[str] = collections.Counter()

    def listener(msgs: list[Any], context: Any) -> ConsumeStatus:
        with lock:
            counts.update(m.body.decode() for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    def member(i: int) -> PushConsumer:
        c = PushConsumer(
            group=group, namesrv=cluster.namesrv_addr, listener=listener, allocate=strategy,
            instance_name=f"m{i}", consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            persist_consumer_offset_interval_ms=500,
        )  # fmt: skip
        c.subscribe(topic)
        return c.start()

    def owners(live: list[PushConsumer]) -> dict[MessageQueue, str] | None:
        out: dict[MessageQueue, str] = {}
        for c in live:
            for mq in c.owned_queues():
                if mq.topic == topic:
                    if mq in out:
                        return None
                    out[mq] = c.client_id
        loads = collections.Counter(out.values())
        balanced = len(loads) == len(live) and max(loads.values()) - min(loads.values()) <= 1
        return out if len(out) == 16 and balanced else None  # every member rebalanced

    sent: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        with Producer(group="push-churn-producer", namesrv=cluster.namesrv_addr) as p:
            while not stop.is_set():
                body = f"{strategy}-{len(sent)}"
                p.send(Message(topic=topic, body=body.encode()))
                sent.append(body)
                stop.wait(0.001)

    live: list[PushConsumer] = []
    moved, previous = 0, None
    producer = threading.Thread(target=produce)
    producer.start()
    try:
        for step in range(7):  # join m0..m3, then m0, m1, m2 leave
            if step < 4:
                live.append(member(step))
            else:
                live.pop(0).shutdown()
            wait_until(lambda: owners(live) is not None, 30, what=f"step {step} settled")
            now = owners(live)
            assert now is not None
            if previous is not None:
                moved += sum(1 for mq, cid in now.items() if previous[mq] != cid)
            previous = now
    finally:
        stop.set()
        producer.join(10)
    try:

        def all_consumed() -> bool:
            with lock:
                return set(sent) <= set(counts)

        wait_until(all_consumed, 30, what="every message")
    finally:
        for c in live:
            c.shutdown()
    twice = sum(n - 1 for n in counts.values() if n > 1)
    print(f"{strategy}: {moved} queue moves, {twice} of {len(sent)} messages consumed twice")
