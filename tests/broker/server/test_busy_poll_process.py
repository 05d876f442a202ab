"""A broker's busy polling ends: after a burst of requests, an idle broker process uses
(next to) no CPU, with the default window and with a long one. The polling itself, and
that it ends when its window does, is tested in-process (tests/connector/connection)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from connector.client.connection import RemotingConnection
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.processes import Servers

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads a process's CPU time from /proc"
)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("window_us", [None, 20_000], ids=["default", "20ms"])
def test_an_idle_broker_stops_polling(servers: Servers, window_us: int | None) -> None:
    env = {} if window_us is None else {"PYMQ_BUSY_POLL_US": str(window_us)}
    broker = servers.broker(env=env)
    conn = RemotingConnection(broker.addr)
    try:
        ask = RemotingCommand(RequestCode.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": "0"})
        for _ in range(200):
            resp = conn.invoke(ask, 10.0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        before = cpu_s(broker.pid)
        threading.Event().wait(1.0)  # the idle second whose CPU is measured
        used = cpu_s(broker.pid) - before
    finally:
        conn.close()
    # polling for good would be ~1 s; the broker's own timers cost a few ms
    assert used < 0.2, f"the idle broker used {used:.2f} s of CPU in 1 s"
