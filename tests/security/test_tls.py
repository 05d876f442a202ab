"""TLS on both listeners of both servers, with a CA and certificates made here: pymq's
clients with ``tls=True`` and the CA send, pull and administer; REST answers over
HTTPS; a client trusting another CA, or speaking plaintext, fails with one clear line."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from connector import Admin, Message, Producer, PullConsumer, SendStatus
from connector.errors import ConfigError, PyMQError
from connector.local import LocalCluster, ServerProcess
from nameserver.config import NamesrvConfig
from tests.support.tls import TlsFiles, make_tls_files, tls_env
from tests.support.waits import wait_until


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, TlsFiles]]:
    base = tmp_path_factory.mktemp("tls")
    files = make_tls_files(base / "pki")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(tls_env(files), PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500")
    with LocalCluster(base / "cluster", brokers=1, env=env) as cluster:
        yield cluster, files


def test_clients_send_pull_and_administer_over_tls(tls: tuple[LocalCluster, TlsFiles]) -> None:
    cluster, files = tls
    ns, ca = cluster.namesrv_addr, str(files.ca)
    assert "http https://" in cluster.brokers[0].ready_line
    with Admin(namesrv=ns, tls=True, tls_ca_file=ca) as admin:  # remoting and HTTPS
        admin.create_topic("Tls", read_queue_nums=2, write_queue_nums=2)
        wait_until(lambda: admin.topic_route("Tls").queues, 15, what="Tls routed")
        assert all(u.startswith("https://") for u in admin.masters().values())
    with Producer(namesrv=ns, tls=True, tls_ca_file=ca) as producer:
        sent = [producer.send(Message(topic="Tls", body=b"secret-%d" % i)) for i in range(20)]
        assert {r.status for r in sent} == {SendStatus.SEND_OK}
        batch = producer.send_batch([Message(topic="Tls", body=b"b%d" % i) for i in range(100)])
        assert batch.status is SendStatus.SEND_OK
    with PullConsumer(group="tls-reader", namesrv=ns, tls=True, tls_ca_file=ca) as consumer:
        got = [m for q in consumer.fetch_queues("Tls") for m in consumer.pull(q, 0, 200).messages]
        assert len(got) == 120
    url = f"https://{cluster.brokers[0].http_addr}/health"
    trust = ssl.create_default_context(cafile=ca)
    assert httpx.get(url, verify=trust, timeout=10).json()["status"] == "ok"
    with pytest.raises(httpx.HTTPError):
        httpx.get(url.replace("https://", "http://"), timeout=10).raise_for_status()


def test_a_wrong_ca_or_plaintext_fails_with_one_clear_line(
    tls: tuple[LocalCluster, TlsFiles],
) -> None:
    cluster, files = tls
    with (
        pytest.raises(PyMQError, match="certificate is not trusted") as err,
        Producer(namesrv=cluster.namesrv_addr, tls=True, tls_ca_file=str(files.other_ca)) as p,
    ):
        p.send(Message(topic="Tls", body=b"x"))
    assert "\n" not in err.value.message
    with pytest.raises(PyMQError, match="closed the connection"), Producer(
        namesrv=cluster.namesrv_addr, send_msg_timeout_ms=2000
    ) as p:  # fmt: skip
        p.send(Message(topic="Tls", body=b"x"))
    with pytest.raises(PyMQError, match=r"TLS to \S+ failed \(wrong version number\)"):
        # TLS to a plaintext port: the handshake fails
        PullConsumer(group="g", namesrv=_plain_port(), tls=True,
                     tls_ca_file=str(files.ca)).fetch_queues("Tls")  # fmt: skip


def _plain_port() -> str:
    """A listening socket that speaks no TLS: an HTTP server's port would do; here a
    bare listener that never answers the handshake (closed at once)."""
    import socket
    import threading

    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = srv.accept()
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        conn.close()
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"127.0.0.1:{srv.getsockname()[1]}"


def test_settings_need_both_files_and_a_readable_ca(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="go together"):
        NamesrvConfig(tls_cert_file=tmp_path / "c.pem")
    with pytest.raises(ConfigError, match=r"CA file \S+ does not exist"):
        Producer(namesrv="127.0.0.1:1", tls=True, tls_ca_file=str(tmp_path / "none.pem"))
    with pytest.raises(ConfigError, match="set tls=True"):
        Producer(namesrv="127.0.0.1:1", tls_ca_file=str(tmp_path / "ca.pem"))


def test_pymq_admin_over_tls(tls: tuple[LocalCluster, TlsFiles]) -> None:
    cluster, files = tls
    run = [sys.executable, "-m", "connector.cli", "admin", "--namesrv", cluster.namesrv_addr]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    ok = subprocess.run([*run, "cluster", "list", "--tls-ca-file", str(files.ca)], check=False,
                        capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert ok.returncode == 0 and "broker-a" in ok.stdout, ok.stderr
    bad = subprocess.run([*run, "cluster", "list"], check=False, capture_output=True,
                         text=True, timeout=60, env=env)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1, bad.stderr
    assert bad.stderr.startswith("pymq admin: ")


def test_a_slave_replicates_over_tls(tmp_path: Path) -> None:
    """The HA port serves TLS too: a slave with the CA gets in sync and reads what the
    master stored."""
    files = make_tls_files(tmp_path / "pki")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(tls_env(files), PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500")
    with LocalCluster(tmp_path / "c", brokers=1, slaves=1, env=env) as cluster:
        master, slave = cluster.brokers
        trust = ssl.create_default_context(cafile=str(files.ca))

        def ha(proc: ServerProcess) -> dict:  # type: ignore[type-arg]
            url = f"https://{proc.http_addr}/health"
            return dict(httpx.get(url, verify=trust, timeout=10).json()["ha"])

        wait_until(lambda: any(s["in_sync"] for s in ha(master)["slaves"]), 30,
                   what="the slave in sync over TLS")  # fmt: skip
        with Admin(namesrv=cluster.namesrv_addr, tls=True, tls_ca_file=str(files.ca)) as admin:
            admin.create_topic("HaTls", read_queue_nums=1, write_queue_nums=1)
            wait_until(lambda: admin.topic_route("HaTls").queues, 15, what="routed")
        with Producer(namesrv=cluster.namesrv_addr, tls=True, tls_ca_file=str(files.ca)) as p:
            assert p.send(Message(topic="HaTls", body=b"replicated")).status is SendStatus.SEND_OK
        wait_until(lambda: ha(slave)["max_offset"] == ha(master)["max_offset"], 30,
                   what="the slave has the master's log")  # fmt: skip
