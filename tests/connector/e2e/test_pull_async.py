"""PullConsumer.pull_async against a real broker: answers come to a callback (decoded or
as records), a long poll is answered when a message lands, errors and timeouts reach the
callback, and a chain of pulls from the callback reads a queue to its end."""

from __future__ import annotations

import os
import queue
import signal
import threading
import time

import pytest

from connector.client.consumer import PullCallback, PullConsumer
from connector.client.producer import Producer
from connector.client.results import PullResult
from connector.errors import RemotingTimeoutError, TopicNotExistError
from connector.local import LocalCluster
from connector.protocol.message import Message, MessageQueue
from connector.protocol.scan import index_records
from connector.protocol.status import PullStatus
from tests.support.cluster import fill

Outcome = tuple[PullResult | None, BaseException | None, str]


def answers() -> tuple[queue.Queue[Outcome], PullCallback]:
    got: queue.Queue[Outcome] = queue.Queue()

    def callback(res: PullResult | None, err: BaseException | None) -> None:
        got.put((res, err, threading.current_thread().name))

    return got, callback


def test_an_answer_comes_to_the_callback_on_the_reader_thread(cluster: LocalCluster) -> None:
    mq = fill(cluster, "E2ePullAsync", 300)
    got, callback = answers()
    with PullConsumer(group="g", namesrv=cluster.namesrv_addr) as consumer:
        consumer.pull_async(mq, 10, callback, 50)
        res, err, thread = got.get(timeout=30)
        assert err is None and res is not None and res.status is PullStatus.FOUND
        assert [m.body for m in res.messages] == [b"m%d" % i for i in range(10, 60)]
        assert res.next_begin_offset == 60 and res.max_offset == 300
        assert thread.startswith("pymq-remoting-")  # not the caller's thread

        # the same page as records, and with a tag filter decoded like pull's
        consumer.pull_async(mq, 10, callback, 50, records=True)
        res, err, _ = got.get(timeout=30)
        assert err is None and res is not None and not res.messages
        assert index_records(res.records).queue_offset.tolist() == list(range(10, 60))
        consumer.pull_async(mq, 0, callback, 30, tags="B")
        res, err, _ = got.get(timeout=30)
        assert res is not None
        assert res.messages == consumer.pull(mq, 0, 30, tags="B").messages
        assert {m.tags for m in res.messages} == {"B"}

        consumer.pull_async(mq, 300, callback, 50)
        res, err, _ = got.get(timeout=30)
        assert res is not None and res.status is PullStatus.NO_NEW_MSG
        consumer.pull_async(mq, 9999, callback, 50)
        res, err, _ = got.get(timeout=30)
        assert res is not None and res.status is PullStatus.OFFSET_ILLEGAL


def test_a_long_poll_is_answered_when_a_message_lands(cluster: LocalCluster) -> None:
    mq = fill(cluster, "E2ePullAsyncWait", 5)
    got, callback = answers()
    ns = cluster.namesrv_addr
    with PullConsumer(group="g", namesrv=ns) as consumer, Producer(group="p", namesrv=ns) as p:
        t0 = time.monotonic()
        consumer.pull_async(mq, 5, callback, 10, wait_ms=20_000)
        with pytest.raises(queue.Empty):
            got.get(timeout=0.3)  # nothing new: the broker holds it
        p.send(Message(topic=mq.topic, body=b"late"), queue=mq)
        res, err, _ = got.get(timeout=30)
        assert err is None and res is not None
        assert [m.body for m in res.messages] == [b"late"]
        assert time.monotonic() - t0 < 15  # answered by the arrival, not the timeout


def test_errors_reach_the_callback_or_the_caller(cluster: LocalCluster) -> None:
    mq = fill(cluster, "E2ePullAsyncErr", 3)
    got, callback = answers()
    ns = cluster.namesrv_addr
    with PullConsumer(group="g", namesrv=ns, timeout_ms=200) as consumer:
        # no route: raised at once, nothing sent
        with pytest.raises(TopicNotExistError):
            consumer.pull_async(MessageQueue("NoSuchTopicPA", mq.broker_name, 0), 0, callback)
        consumer.pull_async(mq, 3, callback, 10)
        res, err, _ = got.get(timeout=30)
        assert err is None and res is not None and res.status is PullStatus.NO_NEW_MSG
        # a broker that does not answer (stopped for a moment): a timeout, in the callback
        broker = cluster.broker(mq.broker_name)
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            consumer.pull_async(mq, 0, callback, 10)
            res, err, thread = got.get(timeout=10)
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        assert res is None and isinstance(err, RemotingTimeoutError), err
        assert thread == "pymq-remoting-timeouts"
        # the connection goes on: the late answer is dropped, the next pull answered
        consumer.timeout_ms = 10_000
        consumer.pull_async(mq, 0, callback, 10)
        res, err, _ = got.get(timeout=30)
        assert err is None and res is not None and len(res.messages) == 3


def test_pulls_chained_from_the_callback_read_every_queue_to_its_end(
    cluster: LocalCluster,
) -> None:
    topic = "E2ePullAsyncChain"
    ns = cluster.namesrv_addr
    sent = 2000
    with Producer(group="p", namesrv=ns) as producer:
        for i in range(0, sent, 100):
            producer.send_batch([Message(topic=topic, body=b"c%d" % j) for j in range(i, i + 100)])
    bodies: list[bytes] = []
    lock = threading.Lock()
    ended = threading.Semaphore(0)
    with PullConsumer(group="g", namesrv=ns) as consumer:
        queues = consumer.fetch_queues(topic)

        def pull(mq: MessageQueue, offset: int) -> None:
            def callback(res: PullResult | None, err: BaseException | None) -> None:
                assert err is None and res is not None
                if res.status is not PullStatus.FOUND:
                    ended.release()  # this queue is read to its end
                    return
                with lock:
                    bodies.extend(m.body for m in res.messages)
                pull(mq, res.next_begin_offset)

            consumer.pull_async(mq, offset, callback, 64)

        for mq in queues:
            pull(mq, 0)
        for _ in queues:
            assert ended.acquire(timeout=60)
    assert sorted(bodies) == sorted(b"c%d" % i for i in range(sent))
