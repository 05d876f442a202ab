"""Secrets never reach a log, an error message or a ``repr``: a run of both servers at
the debug level, with good and bad requests on every edge, then every log of it read."""

from __future__ import annotations

from pathlib import Path

import httpx

from connector import Admin, Message, Producer, PullConsumer
from connector.errors import PyMQError
from connector.local import LocalCluster
from connector.protocol.acl import Credentials
from tests.support.acl import ADMIN, BROKER, DENIED, PUB_ONLY, RULES, acl_env

SECRETS = [ADMIN[1], BROKER[1], DENIED[1], PUB_ONLY[1], "adminSecret1", "brokerSecret1"]


def test_no_secret_in_any_log_error_or_repr(tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(RULES)
    env = acl_env(acl_file)
    env["PYMQ_LOG_LEVEL"] = "debug"
    errors: list[str] = []
    with LocalCluster(tmp_path / "c", brokers=1, slaves=1, env=env) as cluster:
        ns = cluster.namesrv_addr
        with Admin(namesrv=ns, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
            admin.create_topic("Quiet", read_queue_nums=1, write_queue_nums=1)
            errors.append(repr(admin.credentials))
            errors.append(repr(admin.broker_config(cluster.brokers[0].addr)))
        for keys in (PUB_ONLY, DENIED, (PUB_ONLY[0], "wrongSecret"), None):
            try:
                with Producer(namesrv=ns, access_key=keys[0] if keys else None,
                              secret_key=keys[1] if keys else None,
                              retry_times_when_send_failed=0) as p:  # fmt: skip
                    p.send(Message(topic="Quiet", body=b"x"))
                with PullConsumer(group="g", namesrv=ns, access_key=keys[0] if keys else None,
                                  secret_key=keys[1] if keys else None) as c:  # fmt: skip
                    c.fetch_queues("Quiet")
            except PyMQError as exc:
                errors.append(str(exc))
                errors.append(repr(exc.to_dict()))
        resp = httpx.get(f"http://{cluster.brokers[0].http_addr}/config", timeout=10)
        errors.append(resp.text)
        errors.append(repr(Credentials(*PUB_ONLY)))
    logs = [p.read_text(errors="replace") for p in (tmp_path / "c" / "logs").glob("*.log")]
    assert len(logs) == 3  # the NameServer, the master, its slave
    assert any("refused" in text for text in logs)  # the bad requests were logged
    for secret in SECRETS:
        for text in [*logs, *errors]:
            assert secret not in text, f"{secret} leaked: ...{text[text.find(secret) - 80 :][:160]}"
