"""A broker restarted on the same port: the clients' idle connections to the old process
are replaced before a request is written on them, so the first call after the restart
works (it failed with "closed the connection" before)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import connector.client.connection as remoting_client
from connector.client.admin import Admin
from connector.client.consumer import PullConsumer
from connector.client.producer import Producer
from connector.local.process import ServerProcess
from connector.protocol.message import Message
from connector.protocol.status import PullStatus
from tests.support.cluster import wait_route
from tests.support.processes import clean_env, pinned_port

TOPIC = "IdleConnTopic"


def broker(data: Path, namesrv: str, port: int, n: int) -> ServerProcess:
    args = [
        "--name", "broker-a", "--host", "127.0.0.1", "--port", str(port),
        "--namesrv", namesrv, "--store", str(data / "broker-a"),
    ]  # fmt: skip
    return ServerProcess(
        "broker",
        args,
        log_path=data / "logs" / f"broker-a-{n}.log",
        env=clean_env(),
        name="broker-a",
    )


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    ns = ServerProcess(
        "namesrv",
        ["--host", "127.0.0.1", "--port", "0", "--data", str(tmp_path / "namesrv")],
        log_path=tmp_path / "logs" / "namesrv.log",
        env=clean_env(),
    ).start()
    try:
        yield ns
    finally:
        ns.terminate()


def test_calls_after_a_restart_on_the_same_port_go_to_the_new_process(
    tmp_path: Path, namesrv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every connection counts as idle: the test need not wait STALE_CHECK_IDLE_S
    monkeypatch.setattr(remoting_client, "STALE_CHECK_IDLE_S", 0.0)
    # outside the ephemeral range: nothing else takes it while the broker is down
    port = pinned_port()
    first = broker(tmp_path, namesrv.addr, port, 1).start()
    second: ServerProcess | None = None
    try:
        with (
            Admin(namesrv=namesrv.addr) as admin,
            # no retries: the send after the restart must succeed on its first attempt
            Producer(
                group="idle-conn", namesrv=namesrv.addr, retry_times_when_send_failed=0
            ) as producer,
            PullConsumer(group="idle-conn", namesrv=namesrv.addr) as consumer,
        ):
            admin.create_topic(TOPIC, read_queue_nums=1, write_queue_nums=1)
            # the topic's own route, not TBW102's, before the first send
            wait_route(producer, TOPIC, 1)
            sent = producer.send(Message(topic=TOPIC, body=b"before"))
            mq = sent.queue
            assert consumer.pull(mq, 0, 32).status is PullStatus.FOUND

            first.terminate()
            second = broker(tmp_path, namesrv.addr, port, 2).start()
            assert second.addr == first.addr

            # both clients' connections to the old process are closed at the other end:
            # their first requests go out on new ones (no retry in either)
            again = producer.send(Message(topic=TOPIC, body=b"after"))
            assert (again.queue, again.queue_offset) == (mq, 1)
            res = consumer.pull(mq, 0, 32)
            assert res.status is PullStatus.FOUND
            assert [m.body for m in res.messages] == [b"before", b"after"]
            assert consumer.max_offset(mq) == 2
    finally:
        if second is not None:
            second.terminate()
        elif first.running:
            first.terminate()


def test_a_connection_in_use_is_not_checked(tmp_path: Path, namesrv: ServerProcess) -> None:
    """Within STALE_CHECK_IDLE_S of its last request a connection is handed out as it is
    (no syscall on the hot path), and an open idle one passes the check."""
    first = broker(tmp_path, namesrv.addr, 0, 1).start()
    try:
        client = remoting_client.RemotingClient()
        try:
            conn = client.connection(first.addr)
            assert client.connection(first.addr) is conn
            assert conn.dropped_by_server() is False  # open, nothing waiting
            first.terminate()
            # the old process is gone: its FIN is waiting on the idle socket
            assert conn.dropped_by_server() is True
            assert conn.closed
        finally:
            client.close()
    finally:
        if first.running:
            first.terminate()
