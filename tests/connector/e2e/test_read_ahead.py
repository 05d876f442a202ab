"""PullConsumer read-ahead against a real broker: the next page is asked for while the
caller works, taken when the caller asks for exactly it, and never changes an answer."""

from __future__ import annotations

import re

import httpx
import pytest

from connector.client import consumer as consumer_module
from connector.client.consumer import PullConsumer
from connector.local import LocalCluster
from connector.protocol.message import MessageQueue
from connector.protocol.status import PullStatus
from tests.support.cluster import fill

_PULLS = re.compile(r'^pymq_pull_requests_total\{status="(\w+)"\} (\S+)$', re.M)


def pull_requests(cluster: LocalCluster) -> int:
    total = 0
    for b in cluster.brokers:
        text = httpx.get(f"http://{b.http_addr}/metrics", timeout=10).text
        total += sum(int(float(v)) for _, v in _PULLS.findall(text))
    return total


def read(consumer: PullConsumer, mq: MessageQueue, page: int, **kw: object) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    while True:
        res = consumer.pull(mq, offset, page, **kw)  # type: ignore[arg-type]
        if res.status is PullStatus.NO_NEW_MSG:
            return bodies
        assert res.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG)
        bodies += [m.body for m in res.messages]
        offset = res.next_begin_offset


def test_pages_read_ahead_are_taken_and_equal_what_a_plain_pull_reads(
    cluster: LocalCluster,
) -> None:
    topic = "E2eReadAhead"
    mq = fill(cluster, topic, 1000)
    ns = cluster.namesrv_addr
    with (
        PullConsumer(group="g", namesrv=ns, read_ahead=False) as plain,
        PullConsumer(group="g", namesrv=ns) as ahead,
    ):
        want = [b"m%d" % i for i in range(1000)]
        before = pull_requests(cluster)
        assert read(plain, mq, 100) == want
        plain_pulls = pull_requests(cluster) - before
        assert plain_pulls == 11  # ten pages and the one that finds nothing new
        before = pull_requests(cluster)
        assert read(ahead, mq, 100) == want
        # every page after the first was read ahead and taken: no request twice, and
        # none past the last page (the answer said there was no more)
        assert pull_requests(cluster) - before == plain_pulls
        # with tags: the same messages either way
        tagged = [b for i, b in enumerate(want) if i == 0 or i % 3]  # m0 is tagged A
        assert read(ahead, mq, 64, tags="A") == read(plain, mq, 64, tags="A") == tagged


def test_an_offset_other_than_the_page_read_ahead_gets_its_own_answer(
    cluster: LocalCluster,
) -> None:
    topic = "E2eReadAheadJump"
    mq = fill(cluster, topic, 500)
    with PullConsumer(group="g", namesrv=cluster.namesrv_addr) as consumer:
        first = consumer.pull(mq, 0, 50)  # reads 50..99 ahead
        assert [m.queue_offset for m in first.messages] == list(range(50))
        jump = consumer.pull(mq, 300, 50)  # not that page: asked for on its own
        assert [m.queue_offset for m in jump.messages] == list(range(300, 350))
        again = consumer.pull(mq, 300, 20)  # same offset, another size: its own too
        assert [m.queue_offset for m in again.messages] == list(range(300, 320))
        back = consumer.pull(mq, 320, 20)
        assert [m.queue_offset for m in back.messages] == list(range(320, 340))
        last = consumer.pull(mq, 480, 50, read_ahead=False)
        assert [m.queue_offset for m in last.messages] == list(range(480, 500))
        assert last.next_begin_offset == 500
        assert consumer.pull(mq, 500, 50).status is PullStatus.NO_NEW_MSG
        assert not consumer._ahead  # nothing left waiting


def test_a_page_read_ahead_long_ago_is_not_taken(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = "E2eReadAheadStale"
    mq = fill(cluster, topic, 300)
    with PullConsumer(group="g", namesrv=cluster.namesrv_addr) as consumer:
        before = pull_requests(cluster)
        consumer.pull(mq, 0, 100)  # and 100..199 read ahead
        monkeypatch.setattr(consumer_module, "READ_AHEAD_TTL_S", 0.0)
        res = consumer.pull(mq, 100, 100, read_ahead=False)
        assert [m.queue_offset for m in res.messages] == list(range(100, 200))
        # the page read ahead was not taken: asked for again (requests on one connection
        # are answered in order, so the one read ahead is counted by now)
        assert pull_requests(cluster) - before == 3
