"""Producer(auto_batch=True) against real brokers: single sends gathered into batch
requests, each message still answered with its own id, queue and offset."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter

import pytest

from connector.client.consumer import PullConsumer
from connector.client.producer import Producer
from connector.client.results import SendResult
from connector.errors import ConfigError, MessageIllegalError, PyMQError
from connector.local import LocalCluster
from connector.protocol.message import Message, MessageExt, MessageQueue, SysFlag
from connector.protocol.status import PullStatus, SendStatus
from tests.support.cluster import Recorder, pull_all, wait_route


def stored(consumer: PullConsumer, topic: str) -> dict[str, MessageExt]:
    return {m.msg_id: m for m in pull_all(consumer, topic)}


def test_sync_and_async_sends_share_batches_and_keep_their_own_results(
    cluster: LocalCluster,
) -> None:
    ns, topic = cluster.namesrv_addr, "E2eAutoBatch"
    hooks = Recorder()
    with (
        Producer(group="e2e", namesrv=ns, auto_batch=True) as producer,
        PullConsumer(group="g", namesrv=ns) as consumer,
    ):
        producer.register_send_hook(hooks)
        producer.send(Message(topic=topic, body=b"first"))  # creates the topic
        wait_route(producer, topic, 1)
        sent: dict[bytes, Message] = {}
        results: list[tuple[bytes, SendResult]] = []
        lock = threading.Lock()

        def sender(k: int) -> None:
            for i in range(40):
                msg = Message(
                    topic=topic, body=b"s%d-%d" % (k, i), tags=f"T{i % 3}", keys=[f"k{k}"]
                )
                r = producer.send(msg)
                with lock:
                    sent[msg.body] = msg
                    results.append((msg.body, r))

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        async_msgs = [
            Message(topic=topic, body=b"a%d" % i, properties={"n": str(i)}) for i in range(300)
        ]
        futures = [producer.send_async(m) for m in async_msgs]
        for t in threads:
            t.join(60)
        for m, f in zip(async_msgs, futures, strict=True):
            sent[m.body] = m
            results.append((m.body, f.result(30)))
        assert len(results) == 16 * 40 + 300

        by_id = stored(consumer, topic)
        for body, r in results:
            assert r.status is SendStatus.SEND_OK
            m = by_id[r.msg_id]  # its own UNIQ_KEY, stored where its result says
            assert (m.body, m.offset_msg_id) == (body, r.offset_msg_id)
            assert (m.queue_id, m.queue_offset) == (r.queue.queue_id, r.queue_offset)
            assert m.tags == sent[body].tags and m.keys == sent[body].keys
            assert m.properties.get("n") == sent[body].properties.get("n")
        assert len({(r.queue, r.queue_offset) for _, r in results}) == len(results)
        # they travelled together: far fewer requests than messages, some of many
        batches = [c for c in hooks.after if isinstance(c.message, list)]
        assert len(hooks.after) < len(results) / 2
        assert max(len(c.message) for c in batches) > 10
        assert all(c.exception is None for c in hooks.after)


def test_what_cannot_be_batched_is_sent_alone(cluster: LocalCluster) -> None:
    ns, topic = cluster.namesrv_addr, "E2eAutoAlone"
    hooks = Recorder()
    with (
        Producer(group="e2e", namesrv=ns, auto_batch=True) as producer,
        PullConsumer(group="g", namesrv=ns) as consumer,
    ):
        producer.register_send_hook(hooks)
        r0 = producer.send(Message(topic=topic, body=b"first"))
        wait_route(producer, topic, 1)
        mq = MessageQueue(topic, r0.queue.broker_name, 1)
        big = bytes(range(256)) * 40  # compressed: single path
        results = [
            producer.send(Message(topic=topic, body=big)),
            producer.send(Message(topic=topic, body=b"ordered"), sharding_key="user-1"),
            producer.send(Message(topic=topic, body=b"own timeout"), timeout_ms=2000),
            producer.send(Message(topic=topic, body=b"delayed", delay_level=1)),
        ]
        pinned = [producer.send(Message(topic=topic, body=b"p%d" % i), queue=mq) for i in range(5)]
        assert all(r.queue == mq for r in pinned)  # a named queue is kept in a batch too
        # async sends of the same kinds amid plain ones that keep the wire busy: the plain
        # ones gather into batches, these never join one
        alone = [
            Message(topic=topic, body=big),
            Message(topic=topic, body=b"async ordered"),
            Message(topic=topic, body=b"async delayed", delay_level=1),
        ]
        futures = []
        for i in range(300):
            futures.append(producer.send_async(Message(topic=topic, body=b"q%d" % i)))
            if i % 100 == 50:
                msg = alone[i // 100]
                key = "user-2" if msg.body == b"async ordered" else None
                futures.append(producer.send_async(msg, sharding_key=key))
        assert all(f.result(30).status is SendStatus.SEND_OK for f in futures)
        batched = [m for c in hooks.after if isinstance(c.message, list) for m in c.message]
        assert len(batched) > 100  # the plain ones did gather
        assert not any(m in alone for m in batched)
        by_id = stored(consumer, topic)
        assert by_id[results[0].msg_id].body == big
        assert by_id[results[0].msg_id].sys_flag & SysFlag.COMPRESSED
        assert [by_id[r.msg_id].body for r in pinned] == [b"p%d" % i for i in range(5)]
        with pytest.raises(MessageIllegalError):  # bad input fails in the caller's thread
            producer.send(Message(topic=topic, body=b""))
        with pytest.raises(MessageIllegalError):
            producer.send_async(Message(topic=topic, body=b"x", tags="a\x01b"))


def test_small_batch_limits_and_total_hold(cluster: LocalCluster) -> None:
    ns, topic = cluster.namesrv_addr, "E2eAutoLimits"
    hooks = Recorder()
    with Producer(group="e2e", namesrv=ns, auto_batch=True, batch_max_bytes=1000) as producer:
        producer.register_send_hook(hooks)
        producer.send(Message(topic=topic, body=b"first"))
        futures = [producer.send_async(Message(topic=topic, body=b"x" * 200)) for _ in range(60)]
        assert all(f.result(30).status is SendStatus.SEND_OK for f in futures)
        sizes = Counter(len(c.message) if isinstance(c.message, list) else 1 for c in hooks.after)
        assert 2 <= max(sizes) <= 4  # ~250 bytes a message: at most 4 fit 1,000 bytes
    hooks = Recorder()
    with Producer(group="e2e", namesrv=ns, auto_batch=True, total_batch_max_bytes=1) as producer:
        producer.register_send_hook(hooks)
        futures = [producer.send_async(Message(topic=topic, body=b"y")) for _ in range(20)]
        assert all(f.result(30).status is SendStatus.SEND_OK for f in futures)
        assert all(isinstance(c.message, Message) for c in hooks.after)  # nothing held


def test_shutdown_sends_what_was_gathered(cluster: LocalCluster) -> None:
    ns, topic = cluster.namesrv_addr, "E2eAutoShutdown"
    producer = Producer(group="e2e", namesrv=ns, auto_batch=True, batch_max_delay_ms=30_000)
    producer.send(Message(topic=topic, body=b"first"))
    futures = [producer.send_async(Message(topic=topic, body=b"z%d" % i)) for i in range(200)]
    producer.shutdown()
    assert all(f.done() and f.result().status is SendStatus.SEND_OK for f in futures)
    with pytest.raises(PyMQError, match="shut down"):
        producer.send(Message(topic=topic, body=b"late"))
    wait_route(Producer(group="e2e", namesrv=ns), topic, 1)
    expected = {b"z%d" % i for i in range(200)}
    deadline = time.monotonic() + 10  # the auto-created topic's route may lag its queues
    with PullConsumer(group="g", namesrv=ns) as consumer:
        while True:
            bodies = {m.body for m in pull_all(consumer, topic)}
            if expected <= bodies or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert expected <= bodies


def test_a_failed_batch_fails_every_send_in_it() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        ns = f"127.0.0.1:{s.getsockname()[1]}"
    with Producer(namesrv=ns, auto_batch=True, send_msg_timeout_ms=500) as producer:
        futures = [producer.send_async(Message(topic="Nowhere", body=b"x")) for _ in range(5)]
        with pytest.raises(PyMQError):
            producer.send(Message(topic="Nowhere", body=b"x"))
        for f in futures:
            assert isinstance(f.exception(30), PyMQError)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("batch_max_delay_ms", 0),
        ("batch_max_delay_ms", 30_001),
        ("batch_max_bytes", 0),
        ("batch_max_bytes", 2 * 1024 * 1024 + 1),
        ("total_batch_max_bytes", 0),
    ],
)
def test_batch_settings_are_checked(option: str, value: int) -> None:
    with pytest.raises(ConfigError, match=option):
        Producer(namesrv="127.0.0.1:9876", auto_batch=True, **{option: value})


def test_pull_status_is_unchanged_by_batching(cluster: LocalCluster) -> None:
    """A queue written by auto-batches reads back like any other: offsets without gaps."""
    ns, topic = cluster.namesrv_addr, "E2eAutoOffsets"
    with (
        Producer(group="e2e", namesrv=ns, auto_batch=True) as producer,
        PullConsumer(group="g", namesrv=ns) as consumer,
    ):
        r0 = producer.send(Message(topic=topic, body=b"first"))
        mq = r0.queue
        msgs = [Message(topic=topic, body=b"o%d" % i) for i in range(100)]
        futures = [producer.send_async(m, queue=mq) for m in msgs]
        results = [f.result(30) for f in futures]
        assert sorted(r.queue_offset for r in results) == list(range(1, 101))
        wait_route(producer, topic, 1)
        res = consumer.pull(mq, 0, 200)
        assert res.status is PullStatus.FOUND and res.next_begin_offset == 101
        assert [m.queue_offset for m in res.messages] == list(range(101))


def test_by_default_a_lone_sync_send_goes_alone_and_concurrent_ones_gather(
    cluster: LocalCluster,
) -> None:
    """The default producer: one thread's sync sends each go out alone, read by their
    caller (no reader thread starts); sends of many threads at once gather behind
    the ones on the wire, each with its own result."""
    ns, topic = cluster.namesrv_addr, "E2eAutoDefault"
    hooks = Recorder()
    with Producer(group="e2e", namesrv=ns) as producer:
        producer.register_send_hook(hooks)
        producer.send(Message(topic=topic, body=b"first"))
        wait_route(producer, topic, 1)
        alone = [producer.send(Message(topic=topic, body=b"one%d" % i)) for i in range(50)]
        assert all(isinstance(c.message, Message) for c in hooks.after)
        assert len(hooks.after) == 51
        readers = [t.name for t in threading.enumerate() if t.name.startswith("pymq-remoting-")]
        assert readers == []  # every caller read its own answer
        assert len({(r.queue, r.queue_offset) for r in alone}) == 50

        results: list[SendResult] = []
        lock = threading.Lock()
        start = threading.Barrier(16)

        def sender(k: int) -> None:
            start.wait(10)
            for i in range(50):
                r = producer.send(Message(topic=topic, body=b"m%d-%d" % (k, i)))
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 16 * 50
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert len({(r.queue, r.queue_offset) for r in results}) == len(results)
        batches = [c for c in hooks.after[51:] if isinstance(c.message, list)]
        assert batches and max(len(c.message) for c in batches) > 2
        assert len(hooks.after) - 51 < len(results)  # fewer requests than messages
    with Producer(group="e2e", namesrv=ns, auto_batch=False) as producer:
        hooks = Recorder()
        producer.register_send_hook(hooks)
        threads = [
            threading.Thread(
                target=lambda: [producer.send(Message(topic=topic, body=b"x")) for _ in range(20)]
            )
            for _ in range(8)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(hooks.after) == 160  # a request each: auto_batch=False never gathers
        assert all(isinstance(c.message, Message) for c in hooks.after)
