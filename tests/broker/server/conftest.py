"""Process-level fixtures: real ``pymq namesrv`` / ``pymq broker`` children on loopback.

Every server listens on port 0 (the ready line carries the real port) and keeps
its data under a pytest tmp dir. ``Servers`` remembers every process it starts
and stops all of them at fixture teardown, whatever the test did. Waits are
bounded polling loops (``wait_until``), never bare sleeps.
"""

from __future__ import annotations

import base64
import itertools
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
import pytest

from connector.local import LocalCluster, ServerProcess
from connector.protocol.batch import encode_batch
from connector.protocol.message import MessageExt
from connector.protocol.properties import encode_properties
from connector.protocol.record import decode_record, record_size
from connector.protocol.wire import (
    BATCH_CONTENT_TYPE,
    H_MAX_OFFSET,
    H_MIN_OFFSET,
    H_NEXT_BEGIN_OFFSET,
    H_STATUS,
    RECORDS_CONTENT_TYPE,
    batch_offsets,
    split_records,
)

T = TypeVar("T")

START_TIMEOUT_S = 60.0
# the caller's PYMQ_* settings must not leak into the servers under test
BASE_ENV: dict[str, str] = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
QUEUE_CONFIG = {"read_queue_nums": 4, "write_queue_nums": 4, "perm": 6}

HTTP = httpx.Client(timeout=30.0)


# -- waiting -------------------------------------------------------------------------------


def wait_until(
    pred: Callable[[], T | None],
    timeout_s: float,
    interval_s: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll ``pred`` until it returns something truthy, and return that.

    AssertionError naming ``what`` if the deadline passes first.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        result = pred()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not met within {timeout_s:.1f} s (last: {result!r})")
        time.sleep(interval_s)


def holds_for(
    pred: Callable[[], object], duration_s: float, interval_s: float = 0.05, what: str = "it"
) -> None:
    """Assert ``pred`` stays truthy for ``duration_s`` (a bounded check of a negative)."""
    deadline = time.monotonic() + duration_s
    while True:
        result = pred()
        assert result, f"{what} stopped holding: {result!r}"
        if time.monotonic() >= deadline:
            return
        time.sleep(interval_s)


def env_with(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**BASE_ENV, **(overrides or {})}


def port_open(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


# -- processes -----------------------------------------------------------------------------


class Servers:
    """Starts server processes for a test (or a module); ``stop_all`` ends every one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.procs: list[ServerProcess] = []
        self.clusters: list[LocalCluster] = []
        self._seq = itertools.count()

    def _log(self, name: str) -> Path:
        return self.root / "logs" / f"{name}-{next(self._seq)}.log"

    def namesrv(
        self, *, env: Mapping[str, str] | None = None, name: str = "namesrv"
    ) -> ServerProcess:
        data = self.root / f"{name}-data-{next(self._seq)}"
        args = ["--host", "127.0.0.1", "--port", "0", "--data", str(data)]
        proc = ServerProcess(
            "namesrv", args, log_path=self._log(name), env=env_with(env), name=name
        )
        return self._start(proc)

    def broker_process(
        self,
        *,
        name: str | None = "broker-a",
        store: Path | None = None,
        namesrv: str | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> ServerProcess:
        """A broker process, not started yet (``start_all`` starts several at once).

        ``name=None`` passes no ``--name`` (the config file or environment decides).
        """
        label = name or "broker"
        store = store if store is not None else self.root / label
        argv = ["--host", "127.0.0.1", "--port", "0", "--store", str(store)]
        if name is not None:
            argv += ["--name", name]
        if namesrv:
            argv += ["--namesrv", namesrv]
        proc = ServerProcess(
            "broker", [*argv, *args], log_path=self._log(label), env=env_with(env), name=label
        )
        self.procs.append(proc)
        return proc

    def broker(
        self,
        *,
        name: str | None = "broker-a",
        store: Path | None = None,
        namesrv: str | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> ServerProcess:
        proc = self.broker_process(name=name, store=store, namesrv=namesrv, env=env, args=args)
        return self._start(proc)

    def start_all(self, procs: Sequence[ServerProcess]) -> None:
        """Start several processes concurrently (each start mostly waits on imports)."""
        with ThreadPoolExecutor(len(procs)) as pool:
            for _ in pool.map(self._start, procs):
                pass

    def _start(self, proc: ServerProcess) -> ServerProcess:
        if proc not in self.procs:
            self.procs.append(proc)
        return proc.start(START_TIMEOUT_S)

    def restart(self, proc: ServerProcess, *, crash: bool = False) -> ServerProcess:
        """Stop ``proc`` (SIGKILL if ``crash``, else SIGTERM) and start the same command again.

        The new process has the same args (so the same store) but, on port 0, a new port.
        """
        if crash:
            proc.kill()
        else:
            code = proc.terminate()
            assert code == 0, f"{proc.name} exited {code} on SIGTERM: {proc.last_log_line()}"
        new = ServerProcess(
            proc.role, proc.args, log_path=proc.log_path, env=proc.env, name=proc.name
        )
        return self._start(new)

    def cluster(
        self,
        *,
        brokers: int,
        namesrvs: int = 1,
        env: Mapping[str, str] | None = None,
        broker_args: list[str] | None = None,
    ) -> LocalCluster:
        data = self.root / f"cluster-{next(self._seq)}"
        cluster = LocalCluster(
            data, brokers=brokers, namesrvs=namesrvs, env=env_with(env), broker_args=broker_args
        )
        self.clusters.append(cluster)
        return cluster.start(START_TIMEOUT_S)

    def stop_all(self) -> None:
        for cluster in reversed(self.clusters):
            cluster.stop()
        for proc in reversed(self.procs):
            if proc.running:
                proc.terminate(timeout_s=15)
            else:
                proc.kill()  # reaps it and closes its log


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.stop_all()


@pytest.fixture(scope="module")
def module_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    s = Servers(tmp_path_factory.mktemp("servers"))
    try:
        yield s
    finally:
        s.stop_all()


# -- HTTP helpers --------------------------------------------------------------------------


def url(addr: str, *parts: str | int) -> str:
    """``http://addr/a/b``; each part is percent-encoded (``%RETRY%g1`` is a legal topic)."""
    return f"http://{addr}/" + "/".join(quote(str(p), safe="") for p in parts)


def create_topic(addr: str, topic: str, config: Mapping[str, int] = QUEUE_CONFIG) -> None:
    r = HTTP.put(url(addr, "topics", topic), json=dict(config))
    assert r.status_code == 200, r.text


def send(addr: str, topic: str, body: str | bytes, **fields: Any) -> dict[str, Any]:
    """A JSON send: text goes as ``body``, bytes as ``body_base64``."""
    payload = (
        {"body_base64": base64.b64encode(body).decode("ascii")}
        if isinstance(body, bytes)
        else {"body": body}
    )
    r = HTTP.post(url(addr, "topics", topic, "messages"), json={**payload, **fields})
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    assert result["status"] == "SEND_OK", result
    return result


def send_batch(
    addr: str,
    topic: str,
    bodies: Sequence[bytes],
    *,
    queue_id: int | None = None,
    properties: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    props = encode_properties(properties or {})
    data = encode_batch([(b, 0, props) for b in bodies])
    params = {} if queue_id is None else {"queue_id": queue_id}
    r = HTTP.post(
        url(addr, "topics", topic, "messages", "batch"),
        content=data,
        params=params,
        headers={"content-type": BATCH_CONTENT_TYPE},
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    assert result["status"] == "SEND_OK", result
    assert result["count"] == len(bodies), result
    # every message's CommitLog offset, derived from the answer's offset runs
    sizes = [record_size(len(b), len(topic.encode()), len(props)) for b in bodies]
    result["commit_log_offsets"] = batch_offsets(result["offset_runs"], sizes)
    return result


def pull(
    addr: str,
    topic: str,
    queue_id: int,
    offset: int = 0,
    *,
    max_nums: int = 32,
    wait_ms: int = 0,
    client: httpx.Client | None = None,
) -> dict[str, Any]:
    r = (client or HTTP).get(
        url(addr, "topics", topic, "queues", queue_id, "messages"),
        params={"offset": offset, "max": max_nums, "wait_ms": wait_ms},
    )
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def pull_all(addr: str, topic: str, queue_id: int) -> list[dict[str, Any]]:
    """Every message of a queue (JSON views), in queue order."""
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        res = pull(addr, topic, queue_id, offset, max_nums=256)
        if res["status"] != "FOUND":
            assert res["status"] == "NO_NEW_MSG", res
            return out
        out += res["messages"]
        offset = res["next_begin_offset"]


def body_of(view: Mapping[str, Any]) -> bytes:
    return base64.b64decode(view["body_base64"])


def pull_records(
    addr: str, topic: str, queue_id: int, offset: int = 0, *, max_nums: int = 256
) -> tuple[dict[str, str | int], list[MessageExt]]:
    """A binary pull: (status and offsets from the headers, the decoded records)."""
    r = HTTP.get(
        url(addr, "topics", topic, "queues", queue_id, "messages"),
        params={"offset": offset, "max": max_nums},
        headers={"accept": RECORDS_CONTENT_TYPE},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith(RECORDS_CONTENT_TYPE)
    meta: dict[str, str | int] = {
        "status": r.headers[H_STATUS],
        "next_begin_offset": int(r.headers[H_NEXT_BEGIN_OFFSET]),
        "min_offset": int(r.headers[H_MIN_OFFSET]),
        "max_offset": int(r.headers[H_MAX_OFFSET]),
    }
    return meta, [decode_record(rec) for rec in split_records(r.content)]


def pull_all_records(addr: str, topic: str, queue_id: int) -> list[MessageExt]:
    """Every message of a queue through the binary pull, in queue order."""
    out: list[MessageExt] = []
    offset = 0
    while True:
        meta, msgs = pull_records(addr, topic, queue_id, offset)
        if meta["status"] != "FOUND":
            assert meta["status"] == "NO_NEW_MSG", meta
            return out
        assert msgs, meta
        out += msgs
        offset = int(meta["next_begin_offset"])


def health(addr: str) -> dict[str, Any]:
    r = HTTP.get(url(addr, "health"))
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


# -- NameServer views ----------------------------------------------------------------------


def clusters(ns: str) -> dict[str, Any]:
    r = HTTP.get(url(ns, "clusters"))
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


def broker_listed(ns: str, name: str, addr: str) -> bool:
    """Is the broker in every part of ``GET /clusters`` (cluster, broker data, live table)?"""
    info = clusters(ns)
    in_cluster = any(name in names for names in info["clusters"].values())
    in_brokers = any(
        b["broker_name"] == name and addr in b["addrs"].values() for b in info["brokers"]
    )
    live = any(b["addr"] == addr for b in info["live"])
    return in_cluster and in_brokers and live


def broker_absent(ns: str, name: str, addr: str) -> bool:
    """Is the broker gone from every part of ``GET /clusters``?"""
    info = clusters(ns)
    in_cluster = any(name in names for names in info["clusters"].values())
    in_brokers = any(b["broker_name"] == name for b in info["brokers"])
    live = any(b["addr"] == addr for b in info["live"])
    return not (in_cluster or in_brokers or live)


def route(ns: str, topic: str) -> httpx.Response:
    return HTTP.get(url(ns, "routes", topic))
