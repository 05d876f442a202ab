"""PullConsumer reads from a slave while its master is down, and back from the master.

Real processes on port 0: a NameServer, a master and its slave. The master is
killed -9 while the NameServer still lists it (its expiry is two minutes):
reads move to the slave at once, every message comes back in order and byte
for byte, and the slave's answers say it has lost its master. Once the
NameServer drops the dead master, its queues are still listed (on the slave).
The master restarted (same store, new port) takes the reads back once the
slave says so.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from connector.client.consumer import PullConsumer
from connector.client.producer import Producer
from connector.client.results import PullResult
from connector.local import ServerProcess
from connector.protocol.message import Message, MessageExt, MessageQueue
from connector.protocol.status import PullStatus, SendStatus
from tests.support.waits import wait_until

TOPIC = "PullFailover"
BROKER = "broker-a"
SENT = 400
START_TIMEOUT_S = 60.0
# brokers register every second: a slave learns a restarted master's new HA address soon
BROKER_ENV = {"PYMQ_REGISTER_NAME_SERVER_PERIOD_MS": "1000"}
# the NameServer drops a dead broker after 8 s (not the default 120 s), so the test also
# sees the route without the master; the reads right after the kill are long done by then
NAMESRV_ENV = {
    "PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS": "8000",
    "PYMQ_SCAN_NOT_ACTIVE_BROKER_INTERVAL_MS": "200",
}
HTTP = httpx.Client(timeout=10.0)


def server_env(extra: dict[str, str]) -> dict[str, str]:
    # the caller's PYMQ_* settings must not leak into the servers under test
    return {**{k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}, **extra}


class Processes:
    """Starts servers for one test; ``stop_all`` ends every one, whatever the test did."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[ServerProcess] = []

    def start(self, proc: ServerProcess) -> ServerProcess:
        self.procs.append(proc)
        return proc.start(START_TIMEOUT_S)

    def namesrv(self) -> ServerProcess:
        args = ["--host", "127.0.0.1", "--port", "0", "--data", str(self.root / "namesrv")]
        log = self.root / "logs" / "namesrv.log"
        return self.start(ServerProcess("namesrv", args, log_path=log, env=server_env(NAMESRV_ENV)))

    def broker(self, namesrv: str, label: str, *role: str) -> ServerProcess:
        args = ["--host", "127.0.0.1", "--port", "0", "--store", str(self.root / label)]
        args += ["--name", BROKER, "--namesrv", namesrv, *role]
        log = self.root / "logs" / f"{label}.log"
        env = server_env(BROKER_ENV)
        return self.start(ServerProcess("broker", args, log_path=log, env=env, name=label))

    def restart(self, proc: ServerProcess) -> ServerProcess:
        """The same command again (same store; on port 0, new ports)."""
        new = ServerProcess(proc.role, proc.args, log_path=proc.log_path, env=proc.env)
        return self.start(new)

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            proc.kill()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


def route_addrs(namesrv_http: str) -> dict[str, str]:
    r = HTTP.get(f"http://{namesrv_http}/routes/{TOPIC}")
    if r.status_code != 200:
        return {}
    brokers = [b for b in r.json()["brokers"] if b["broker_name"] == BROKER]
    return dict(brokers[0]["addrs"]) if brokers else {}


def queue_max_offsets(http_addr: str) -> list[int] | None:
    r = HTTP.get(f"http://{http_addr}/topics/{TOPIC}")
    if r.status_code != 200:
        return None
    return [q["max_offset"] for q in sorted(r.json()["queues"], key=lambda q: q["queue_id"])]


def read_queue(consumer: PullConsumer, mq: MessageQueue) -> tuple[list[MessageExt], list[int]]:
    """Every message of ``mq`` from offset 0, and what each answer suggested."""
    messages: list[MessageExt] = []
    suggested: list[int] = []
    offset = 0
    while True:
        res = consumer.pull(mq, offset, 32)
        suggested.append(res.suggest_which_broker_id)
        if res.status is not PullStatus.FOUND:
            assert res.status is PullStatus.NO_NEW_MSG, res
            return messages, suggested
        messages += res.messages
        offset = res.next_begin_offset


def read_records(consumer: PullConsumer, mq: MessageQueue) -> bytes:
    """The stored records of ``mq``, byte for byte."""
    out = bytearray()
    offset = 0
    while True:
        res = consumer.pull_records(mq, offset, 64, read_ahead=False)
        if res.status is not PullStatus.FOUND:
            return bytes(out)
        out += res.records
        offset = res.next_begin_offset


def check_everything(
    consumer: PullConsumer, queues: list[MessageQueue], sent: dict[int, list[bytes]]
) -> list[int]:
    """Every queue read from 0 has exactly what was sent to it, in order; the answers'
    suggestions."""
    suggested: list[int] = []
    for mq in queues:
        messages, said = read_queue(consumer, mq)
        suggested += said
        assert [m.queue_offset for m in messages] == list(range(len(sent[mq.queue_id])))
        assert [m.body for m in messages] == sent[mq.queue_id], f"queue {mq.queue_id}"
    return suggested


def send_messages(namesrv: str, count: int, sent: dict[int, list[bytes]], tag: str) -> None:
    rng = random.Random(count)
    with Producer(group="failover-p", namesrv=namesrv) as producer:
        for i in range(count):
            # text, binary, and a few large enough to be stored compressed
            size = 8192 if i % 50 == 0 else rng.randrange(1, 600)
            body = f"{tag} {i} ".encode() + rng.randbytes(size)
            r = producer.send(Message(topic=TOPIC, body=body, tags=tag, keys=[f"{tag}{i}"]))
            assert r.status is SendStatus.SEND_OK, r
            assert r.queue.broker_name == BROKER
            assert r.queue_offset == len(sent[r.queue.queue_id])
            sent[r.queue.queue_id].append(body)


def start_pair(
    processes: Processes,
) -> tuple[ServerProcess, ServerProcess, ServerProcess, dict[int, list[bytes]]]:
    """A NameServer, a master and its slave; SENT messages sent, and on the slave."""
    ns = processes.namesrv()
    master = processes.broker(ns.addr, "master", "--role", "ASYNC_MASTER")
    slave = processes.broker(ns.addr, "slave", "--role", "SLAVE", "--id", "1")
    r = HTTP.put(
        f"http://{master.http_addr}/topics/{TOPIC}",
        json={"read_queue_nums": 4, "write_queue_nums": 4, "perm": 6},
    )
    assert r.status_code == 200, r.text
    wait_until(
        lambda: route_addrs(ns.http_addr) == {"0": master.addr, "1": slave.addr},
        30,
        what="the route lists the master and the slave",
    )
    sent: dict[int, list[bytes]] = {q: [] for q in range(4)}
    send_messages(ns.addr, SENT, sent, "before")
    counts = [len(sent[q]) for q in range(4)]
    wait_until(
        lambda: queue_max_offsets(slave.http_addr) == counts, 30, what="the slave has every message"
    )
    return ns, master, slave, sent


def long_poll_in_thread(
    consumer: PullConsumer, mq: MessageQueue, offset: int, wait_ms: int
) -> queue.Queue[PullResult | BaseException]:
    out: queue.Queue[PullResult | BaseException] = queue.Queue()

    def run() -> None:
        try:
            out.put(consumer.pull(mq, offset, 32, wait_ms=wait_ms))
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            out.put(exc)

    threading.Thread(target=run, name="long-poll", daemon=True).start()
    return out


def test_reads_move_to_the_slave_when_the_master_dies_and_back_when_it_returns(
    processes: Processes,
) -> None:
    ns, master, slave, sent = start_pair(processes)
    counts = [len(sent[q]) for q in range(4)]
    with PullConsumer(group="failover", namesrv=ns.addr) as consumer:
        queues = consumer.fetch_queues(TOPIC)
        assert [(mq.broker_name, mq.queue_id) for mq in queues] == [(BROKER, q) for q in range(4)]
        # while the master is up, it is read (and says so)
        assert set(check_everything(consumer, queues, sent)) == {0}
        assert all(consumer.read_addr(mq) == master.addr for mq in queues)
        on_master = [read_records(consumer, mq) for mq in queues]
        # a long poll held by the master when it dies is made again on the slave
        mq3 = queues[3]
        polled = long_poll_in_thread(consumer, mq3, counts[3], wait_ms=3000)
        wait_until(
            lambda: any(c._calls for c in consumer.rpc.client.connections()),
            10,
            what="the long poll is in flight",
        )

        # -- the master dies; the NameServer still lists it --------------------------------
        master.kill()
        killed = time.monotonic()
        check_everything(consumer, queues, sent)
        assert [read_records(consumer, mq) for mq in queues] == on_master  # byte for byte
        assert all(consumer.read_addr(mq) == slave.addr for mq in queues)
        assert time.monotonic() - killed < 6, "reads waited for the NameServer"
        assert route_addrs(ns.http_addr) == {"0": master.addr, "1": slave.addr}
        long_polled = polled.get(timeout=30)
        assert isinstance(long_polled, PullResult), long_polled
        assert long_polled.status is PullStatus.NO_NEW_MSG
        assert long_polled.next_begin_offset == counts[3]
        # the slave notices that it lost its master, and keeps the readers
        mq0 = queues[0]
        wait_until(
            lambda: consumer.pull(mq0, 0, 1).suggest_which_broker_id == 1,
            10,
            what="the slave suggests itself",
        )
        assert set(check_everything(consumer, queues, sent)) == {1}
        # every other read goes to the slave too
        assert [consumer.max_offset(mq) for mq in queues] == counts
        assert [consumer.min_offset(mq) for mq in queues] == [0, 0, 0, 0]
        assert consumer.search_offset(mq0, 0) == 0
        consumer.commit_offset(mq0, 7)
        assert consumer.fetch_offset(mq0) == 7
        answers: queue.Queue[tuple[PullResult | None, BaseException | None]] = queue.Queue()
        consumer.pull_async(mq0, 0, lambda res, err: answers.put((res, err)), 10)
        res, err = answers.get(timeout=10)
        assert err is None and res is not None
        assert [m.body for m in res.messages] == sent[0][:10]
        assert res.suggest_which_broker_id == 1

        # -- the NameServer drops the master: its queues are still read, on the slave ------
        wait_until(
            lambda: route_addrs(ns.http_addr) == {"1": slave.addr}, 30, what="the master expired"
        )
        assert consumer.fetch_queues(TOPIC) == queues
        assert set(check_everything(consumer, queues, sent)) == {1}

        # -- the master comes back (same store, new port): reads go back to it -------------
        master = processes.restart(master)
        wait_until(
            lambda: route_addrs(ns.http_addr) == {"0": master.addr, "1": slave.addr},
            30,
            what="the route lists the restarted master",
        )

        def back_on_master() -> bool:
            consumer.pull(mq0, 0, 1)  # the slave's answer says "0" once it has the master
            return consumer.read_addr(mq0) == master.addr

        wait_until(back_on_master, 30, what="reads back on the master")
        send_messages(ns.addr, 40, sent, "after")
        assert set(check_everything(consumer, queues, sent)) == {0}
        assert all(consumer.read_addr(mq) == master.addr for mq in queues)
        assert consumer.fetch_offset(mq0) == 7  # committed on the slave, kept by the master


def test_a_master_that_does_not_answer_is_read_around_after_one_timeout(
    processes: Processes,
) -> None:
    ns, master, slave, sent = start_pair(processes)
    with PullConsumer(group="failover", namesrv=ns.addr, timeout_ms=1000) as consumer:
        queues = consumer.fetch_queues(TOPIC)
        assert consumer.read_addr(queues[0]) == master.addr
        os.kill(master.pid, signal.SIGSTOP)  # up, connected, silent
        try:
            started = time.monotonic()
            check_everything(consumer, queues, sent)
            # one timeout (1 s), then every read on the slave
            assert time.monotonic() - started < 1.0 + 4, "more than one read waited"
            assert all(consumer.read_addr(mq) == slave.addr for mq in queues)
        finally:
            os.kill(master.pid, signal.SIGCONT)
