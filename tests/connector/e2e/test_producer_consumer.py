"""Producer and PullConsumer against real NameServer and broker processes."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pyarrow as pa
import pytest

from connector.client.consumer import PullConsumer
from connector.client.producer import Producer
from connector.client.results import SendContext, SendResult
from connector.errors import ConfigError, MessageIllegalError, MessageTooLargeError
from connector.local import LocalCluster
from connector.protocol.batch import PreparedBatch
from connector.protocol.compression import CompressionType
from connector.protocol.message import Message, MessageQueue, SysFlag
from connector.protocol.status import PullStatus, SendStatus
from connector.spark.encode import encode_columns
from tests.support.cluster import Recorder, pull_all, wait_route


def test_send_paths_round_trip(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    hooks = Recorder()
    with Producer(group="e2e", namesrv=ns) as producer, PullConsumer(group="g", namesrv=ns) as c:
        producer.register_send_hook(hooks)
        # a topic nobody created: auto-created through TBW102 on the first send
        first = producer.send(Message(topic="E2eAuto", body=b"hello", tags="A", keys=["k1"]))
        assert first.status is SendStatus.SEND_OK
        wait_route(producer, "E2eAuto", 1)
        results: list[SendResult] = [first]
        results += [producer.send(Message(topic="E2eAuto", body=b"m%d" % i)) for i in range(40)]
        big = bytes(range(256)) * 40  # 10 KiB: compressed on the wire
        results.append(producer.send(Message(topic="E2eAuto", body=big)))
        batch = producer.send_batch([Message(topic="E2eAuto", body=b"b%d" % i) for i in range(5)])
        assert len(batch.msg_ids) == 5 and batch.msg_id == ",".join(batch.msg_ids)
        futures = [
            producer.send_async(Message(topic="E2eAuto", body=b"a%d" % i)) for i in range(20)
        ]
        results += [f.result(10) for f in futures]
        got = pull_all(c, "E2eAuto")
        by_id = {m.msg_id: m for m in got}
        for r in results:
            m = by_id[r.msg_id]
            assert (m.queue_id, m.queue_offset) == (r.queue.queue_id, r.queue_offset)
            assert m.offset_msg_id == r.offset_msg_id
        for uid, off in zip(batch.msg_ids, batch.offset_msg_ids, strict=True):
            assert by_id[uid].offset_msg_id == off
        assert by_id[first.msg_id].body == b"hello" and by_id[first.msg_id].keys == ["k1"]
        stored_big = by_id[results[41].msg_id]
        assert stored_big.body == big and stored_big.sys_flag & SysFlag.COMPRESSED
        assert len(got) == len(results) + 5
        # a hook sees every request: each sync send, the batch, and the async sends, which
        # gather into batch requests while others are on the wire
        sync_sends = len(results) - len(futures)
        assert len(hooks.before) == len(hooks.after) >= sync_sends + 2
        assert all(ctx.exception is None for ctx in hooks.after)


def test_ordered_and_explicit_queue(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    with Producer(group="e2e", namesrv=ns) as producer, PullConsumer(group="g", namesrv=ns) as c:
        producer.send(Message(topic="E2eOrder", body=b"warm-up"))
        wait_route(producer, "E2eOrder", 1)
        queues = Counter()
        for i in range(30):
            r = producer.send(Message(topic="E2eOrder", body=b"o%d" % i), sharding_key="user-7")
            queues[(r.queue.broker_name, r.queue.queue_id)] += 1
        assert len(queues) == 1  # same key, same queue
        (broker, qid), _ = queues.most_common(1)[0]
        mq = MessageQueue("E2eOrder", broker, qid)
        bodies = [m.body for m in pull_all(c, "E2eOrder") if m.body.startswith(b"o")]
        assert bodies == [b"o%d" % i for i in range(30)]  # in order
        r = producer.send(Message(topic="E2eOrder", body=b"pinned"), queue=mq)
        assert r.queue == mq


def test_consumer_offsets_and_tags(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    with Producer(group="e2e", namesrv=ns) as producer, PullConsumer(group="gt", namesrv=ns) as c:
        r0 = producer.send(Message(topic="E2eTags", body=b"x", tags="A"))
        mq = r0.queue
        for i in range(9):
            producer.send(Message(topic="E2eTags", body=b"y%d" % i, tags="AB"[i % 2]), queue=mq)
        res = c.pull(mq, 0, 100, tags="B")
        assert [m.tags for m in res.messages] == ["B"] * 4
        assert res.next_begin_offset == 10
        assert c.fetch_offset(mq) == -1
        c.commit_offset(mq, 7)
        assert c.fetch_offset(mq) == 7
        assert c.max_offset(mq) == 10 and c.min_offset(mq) == 0
        assert c.search_offset(mq, 0) == 0
        past = c.pull(mq, 10**12, 10)
        assert past.status is PullStatus.OFFSET_ILLEGAL and past.next_begin_offset == 10
        waited = c.pull(mq, 10, 10, wait_ms=200)
        assert waited.status is PullStatus.NO_NEW_MSG


def test_batch_keeps_given_ids_and_properties(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    with Producer(group="e2e", namesrv=ns) as producer, PullConsumer(group="g", namesrv=ns) as c:
        msgs = [
            Message(topic="E2eBatchIds", body=b"plain"),
            Message(topic="E2eBatchIds", body=b"mine", properties={"UNIQ_KEY": "MY-ID-1"}),
            Message(
                topic="E2eBatchIds", body=b"tagged", tags="T", keys=["k"], properties={"p": "1"}
            ),
        ]
        r = producer.send_batch(msgs)
        assert r.msg_ids[1] == "MY-ID-1" and len(set(r.msg_ids)) == 3
        wait_route(producer, "E2eBatchIds", 1)  # the broker registers the new topic
        res = c.pull(r.queue, r.queue_offset, 10)
        assert [m.msg_id for m in res.messages] == list(r.msg_ids)
        assert [m.offset_msg_id for m in res.messages] == list(r.offset_msg_ids)
        assert res.messages[2].tags == "T" and res.messages[2].properties["p"] == "1"


def test_large_batches_of_plain_and_mixed_messages(cluster: LocalCluster) -> None:
    """40 messages: the compiled encoder when they carry only bodies and tags,
    the per-message path as soon as one has keys; the same rules either way."""
    ns = cluster.namesrv_addr
    topic = "E2eBigBatch"
    with Producer(group="e2e", namesrv=ns) as producer, PullConsumer(group="g", namesrv=ns) as c:
        tags = ["T\u00e9", None, "", "B"] * 10
        plain = [Message(topic=topic, body=b"p%d" % i, tags=t) for i, t in enumerate(tags)]
        mixed = [Message(topic=topic, body=b"m%d" % i) for i in range(39)]
        mixed.append(Message(topic=topic, body=b"keyed", keys=["k1"]))
        results = [producer.send_batch(plain), producer.send_batch(mixed)]
        # each batch may have created the topic on another broker: wait until the
        # NameServer routes to every broker that took one (the consumer reads routes)
        wait_route(producer, topic, len({r.queue.broker_name for r in results}))
        for r, sent in zip(results, [plain, mixed], strict=True):
            assert r.status is SendStatus.SEND_OK and len(set(r.msg_ids)) == 40
            got = c.pull(r.queue, r.queue_offset, 40).messages
            assert [m.body for m in got] == [m.body for m in sent]
            assert [m.tags for m in got] == [m.tags or None for m in sent]
            assert [m.msg_id for m in got] == list(r.msg_ids)
            assert [m.offset_msg_id for m in got] == list(r.offset_msg_ids)
        assert got[-1].keys == ["k1"]
        bad = [*plain[:39], Message(topic=topic, body=b"")]
        with pytest.raises(MessageIllegalError, match="non-empty"):
            producer.send_batch(bad)
        big = [*plain[:39], Message(topic=topic, body=b"x" * (producer.max_message_size + 1))]
        with pytest.raises(MessageTooLargeError):
            producer.send_batch(big)
        with pytest.raises(MessageIllegalError, match="separator"):
            producer.send_batch([*plain[:39], Message(topic=topic, body=b"x", tags="a\x01b")])
        with pytest.raises(MessageIllegalError, match="same topic"):
            producer.send_batch([*plain[:39], Message(topic="Other", body=b"x")])


def test_many_threads_oneway_and_callbacks(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    with Producer(group="e2e", namesrv=ns, client_async_semaphore_value=4) as producer:
        producer.send(Message(topic="E2eThreads", body=b"first"))
        results: list[SendResult] = []
        lock = threading.Lock()

        def worker(k: int) -> None:
            for i in range(100):
                r = producer.send(Message(topic="E2eThreads", body=b"t%d-%d" % (k, i)))
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 800
        assert len({(r.queue, r.queue_offset) for r in results}) == 800  # no two share a slot

        seen: list[tuple[SendResult | None, BaseException | None]] = []
        done = threading.Event()

        def callback(result: SendResult | None, exc: BaseException | None) -> None:
            seen.append((result, exc))
            if len(seen) == 20:
                done.set()

        for i in range(20):  # more than the 4 in-flight slots: the caller waits its turn
            producer.send_async(Message(topic="E2eThreads", body=b"cb%d" % i), callback)
        assert done.wait(30)
        assert all(r is not None and e is None for r, e in seen)

        producer.send_oneway(Message(topic="E2eThreads", body=b"fire and forget"))
        wait_route(producer, "E2eThreads", 1)
        with PullConsumer(group="g", namesrv=ns) as c:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                if any(m.body == b"fire and forget" for m in pull_all(c, "E2eThreads")):
                    break
                time.sleep(0.1)
            else:
                raise AssertionError("the oneway message never arrived")


def test_prepared_batch_takes_the_send_path(cluster: LocalCluster) -> None:
    ns = cluster.namesrv_addr
    with Producer(group="e2e", namesrv=ns) as producer, PullConsumer(group="g", namesrv=ns) as c:
        bodies = pa.array([b"p%d" % i for i in range(40)])
        tags = pa.array(["A" if i % 2 else None for i in range(40)])
        ids = producer.new_msg_ids(40)
        r = producer.send_prepared_batch(encode_columns("E2ePrepared", bodies, tags, ids, 1 << 20))
        assert r.status is SendStatus.SEND_OK and r.msg_ids == tuple(ids)
        wait_route(producer, "E2ePrepared", 1)
        res = c.pull(r.queue, r.queue_offset, 100)
        assert [m.body for m in res.messages] == bodies.to_pylist()
        assert [m.msg_id for m in res.messages] == ids
        assert [m.offset_msg_id for m in res.messages] == list(r.offset_msg_ids)
        assert [m.tags for m in res.messages] == tags.to_pylist()
        with pytest.raises(MessageIllegalError):
            producer.send_prepared_batch(PreparedBatch("E2ePrepared", b"x", [], []))


def test_born_timestamp_of_a_batch(cluster: LocalCluster) -> None:
    """A caller's born time reaches every message of the batch (one, many, prepared)."""
    ns, topic, born = cluster.namesrv_addr, "E2eBorn", 1_600_000_000_123
    with Producer(group="e2e", namesrv=ns) as producer, PullConsumer(group="g", namesrv=ns) as c:
        sent = [
            producer.send_batch([Message(topic=topic, body=b"one")], born_timestamp=born),
            producer.send_batch(
                [Message(topic=topic, body=b"m%d" % i) for i in range(40)], born_timestamp=born + 1
            ),
            producer.send_prepared_batch(
                encode_columns(
                    topic, pa.array([b"p0", b"p1"]), None, producer.new_msg_ids(2), 1 << 20
                ),
                born_timestamp=born + 2,
            ),
        ]
        now_ms = int(time.time() * 1000)
        plain = producer.send_batch([Message(topic=topic, body=b"now")])
        wait_route(producer, topic, len({r.queue.broker_name for r in [*sent, plain]}))
        for r, count, want in zip(sent, (1, 40, 2), (born, born + 1, born + 2), strict=True):
            got = c.pull(r.queue, r.queue_offset, count).messages
            assert len(got) == count and {m.born_timestamp for m in got} == {want}
        (last,) = c.pull(plain.queue, plain.queue_offset, 1).messages
        assert abs(last.born_timestamp - now_ms) < 60_000  # without one: the time of sending
        for bad in (-1, 1.5):
            with pytest.raises(MessageIllegalError, match="born_timestamp"):
                producer.send_batch([Message(topic=topic, body=b"x")], born_timestamp=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("codec", ["ZLIB", "ZSTD", "LZ4"])
def test_compress_types_travel_and_inflate(cluster: LocalCluster, codec: str) -> None:
    """RocketMQ 5's compressType: the body goes compressed with the codec's bits in
    SYSFLAG, the broker checks it inflates, every reader gets it back whole."""
    ns, topic = cluster.namesrv_addr, f"E2eCompress{codec}"
    body = b"".join(b"event %d: user clicked the button\n" % i for i in range(400))
    with (
        Producer(group="e2e", namesrv=ns, compress_type=codec, compress_level=3) as producer,
        PullConsumer(group="g", namesrv=ns) as consumer,
    ):
        r = producer.send(Message(topic=topic, body=body))
        wait_route(producer, topic, 1)
        (m,) = consumer.pull(r.queue, r.queue_offset, 1).messages
        assert m.body == body
        assert m.sys_flag & 0x701 == SysFlag.COMPRESSED | CompressionType[codec].flag
        assert m.store_size < len(body) / 3  # stored compressed
        raw = consumer.pull_records(r.queue, r.queue_offset, 1).records
        assert body not in raw
    with pytest.raises(ConfigError, match="compression type"):
        Producer(namesrv=ns, compress_type="snappy")
    with pytest.raises(ConfigError, match="compress_level"):
        Producer(namesrv=ns, compress_type="ZLIB", compress_level=12)


def test_plain_batches_from_many_threads_keep_their_own_bytes(cluster: LocalCluster) -> None:
    """Each thread encodes its batches into a buffer it reuses: batches sent one after
    another, and from several threads at once, must each arrive as they were."""
    ns, topic = cluster.namesrv_addr, "E2eScratch"
    results: dict[bytes, SendResult] = {}
    lock = threading.Lock()
    with Producer(group="e2e", namesrv=ns) as producer:
        producer.send(Message(topic=topic, body=b"first"))
        wait_route(producer, topic, 1)

        def sender(k: int) -> None:
            for round_ in range(6):
                fill = b"%d-%d:" % (k, round_)
                size = 1000 + 3000 * round_  # bigger and smaller than the last one
                msgs = [Message(topic=topic, body=fill * (size // len(fill))) for _ in range(40)]
                r = producer.send_batch(msgs)
                with lock:
                    results[fill] = r

        threads = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        # batches may have created the topic on another broker (through TBW102's route):
        # the consumer finds it once that broker's next registration reached the NameServer
        wait_route(producer, topic, len({r.queue.broker_name for r in results.values()}))
    assert len(results) == 24
    with PullConsumer(group="g", namesrv=ns) as consumer:
        for fill, r in results.items():
            got = consumer.pull(r.queue, r.queue_offset, 40).messages
            assert len(got) == 40
            assert all(m.body.startswith(fill) and m.body == got[0].body for m in got)


def test_a_hook_that_sends_a_batch_does_not_touch_the_batch_in_flight(
    cluster: LocalCluster,
) -> None:
    ns, topic = cluster.namesrv_addr, "E2eScratchHook"
    inner: list[SendResult] = []

    class Tracer:
        """Sends a batch of its own, on the same thread, before the outer one goes."""

        def __init__(self, producer: Producer) -> None:
            self.producer = producer

        def send_message_before(self, ctx: SendContext) -> None:
            if not inner and isinstance(ctx.message, list) and len(ctx.message) == 40:
                trace = [Message(topic=topic, body=b"T" * 5000) for _ in range(35)]
                inner.append(self.producer.send_batch(trace))

        def send_message_after(self, ctx: SendContext) -> None:
            pass

    with Producer(group="e2e", namesrv=ns) as producer:
        producer.send(Message(topic=topic, body=b"first"))
        wait_route(producer, topic, 1)
        producer.register_send_hook(Tracer(producer))
        outer = producer.send_batch([Message(topic=topic, body=b"O" * 3000) for _ in range(40)])
    assert len(inner) == 1
    with PullConsumer(group="g", namesrv=ns) as consumer:
        got = consumer.pull(outer.queue, outer.queue_offset, 40).messages
        assert [m.body for m in got] == [b"O" * 3000] * 40
        got = consumer.pull(inner[0].queue, inner[0].queue_offset, 35).messages
        assert [m.body for m in got] == [b"T" * 5000] * 35
