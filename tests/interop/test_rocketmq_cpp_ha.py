"""PyPI ``rocketmq`` 0.4.4's push consumer (Apache's C++ core) through the death of a
master: it goes on consuming from the slave, and back on the master when it returns."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from connector import Message, MessageQueue, Producer, SendStatus
from connector.local import LocalCluster
from tests.support.rocketmq_cpp import CppClient
from tests.support.waits import wait_until

TOPIC = "CppFailover"
# 2,000 a queue: more than the client prefetches (1,000 a queue), and a slow listener
# (4 threads, 5 ms a message: ~800 a second), so much is left to read once the master
# dies, however fast it pulled until then; the client sees the master gone from the
# route within its route refresh (30 s)
COUNT = 8000


def pulled(http_addr: str) -> float:
    """Messages the broker's pulls have returned (its ``pymq_pull_messages``)."""
    for line in httpx.get(f"http://{http_addr}/metrics", timeout=10).text.splitlines():
        if line.startswith("pymq_pull_messages_total "):
            return float(line.split()[1])
    return 0.0


@pytest.fixture(scope="module")
def ha_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(
        PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500",
        PYMQ_BROKER_ROLE="SYNC_MASTER",
        # the NameServer drops a dead master within ~3 s: RocketMQ clients move to a
        # slave once the route lists no master (findBrokerAddressInSubscribe)
        PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS="3000",
        PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS="500",
    )
    with LocalCluster(tmp_path_factory.mktemp("cpp-ha"), brokers=1, slaves=1, env=env) as c:
        yield c


def test_cpp_push_consumer_consumes_through_a_masters_death(
    ha_cluster: LocalCluster, cpp_client: CppClient
) -> None:
    master = ha_cluster.broker("broker-a")
    r = httpx.put(
        f"http://{master.http_addr}/topics/{TOPIC}",
        json={"read_queue_nums": 4, "write_queue_nums": 4, "perm": 6},
        timeout=10,
    )
    assert r.status_code == 200, r.text
    ns = ha_cluster.namesrv_addr
    probes = 0
    with Producer(group="cpp-ha-fill", namesrv=ns) as producer:
        mq = MessageQueue(TOPIC, "broker-a", 0)

        def probe() -> bool:
            nonlocal probes
            probes += 1  # stored either way (SEND_OK or SLAVE_NOT_AVAILABLE)
            res = producer.send(Message(topic=TOPIC, body=b"probe"), queue=mq)
            return res.status is SendStatus.SEND_OK

        wait_until(probe, 30, what="the slave in sync")
        for k in range(0, COUNT, 100):
            msgs = [Message(topic=TOPIC, body=f"m-{i}".encode()) for i in range(k, k + 100)]
            res = producer.send_batch(msgs, queue=MessageQueue(TOPIC, "broker-a", k // 100 % 4))
            assert res.status is SendStatus.SEND_OK, res
    result: dict[str, Any] = {}

    def consume() -> None:
        res = cpp_client.push(
            namesrv=ns, topic=TOPIC, group="CID_CPP_HA", expected=COUNT + probes,
            thread_count=4, consume_delay_s=0.005, count_distinct=True, timeout_s=240,
        )  # fmt: skip
        result.update(res)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    # the consumer is busy with broker-a's queues: the master dies under it
    wait_until(lambda: pulled(master.http_addr) >= 1000, 60, what="the consumer reading the master")
    master.kill()
    slave_http = ha_cluster.broker("broker-a-s1").http_addr
    wait_until(lambda: pulled(slave_http) > 0, 120, what="the consumer reading the slave")
    ha_cluster.restart_broker("broker-a", crash=True)
    consumer.join(260)
    assert result.get("ok"), {k: result.get(k) for k in ("error", "stderr", "received")}
    bodies = Counter(m["body"] for m in result["messages"])
    want = {f"m-{i}" for i in range(COUNT)} | {"probe"}
    assert set(bodies) == want, f"missing {len(want - set(bodies))}"
    # at least once: a queue whose offset was not committed yet is read again there
    repeated = sum(n - 1 for n in bodies.values())
    assert repeated < COUNT // 2, repeated
