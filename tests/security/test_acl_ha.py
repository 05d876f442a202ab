"""ACL on the HA port: a slave's HELLO is signed by an admin account (the brokers' own
keys); a slave without keys, or with an account that is not an admin, is refused and
the refusal logged."""

from __future__ import annotations

from pathlib import Path

import httpx

from connector.local import LocalCluster, ServerProcess
from tests.support.acl import RULES, SUB_ONLY, acl_env, create_topic
from tests.support.waits import wait_until


def ha_of(proc: ServerProcess) -> dict:  # type: ignore[type-arg]
    return dict(httpx.get(f"http://{proc.http_addr}/health", timeout=10).json()["ha"])


def test_only_a_signed_admin_slave_replicates(tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(RULES)
    with LocalCluster(tmp_path / "c", brokers=1, slaves=1, env=acl_env(acl_file)) as c:
        master = c.brokers[0]
        create_topic(c, "HaAcl")
        wait_until(lambda: any(s["in_sync"] for s in ha_of(master)["slaves"]), 30,
                   what="the signed slave in sync")  # fmt: skip
        ha_addr = ha_of(master)["ha_addr"]
        for name, keys in (("nokeys", None), ("subonly", SUB_ONLY)):
            log = tmp_path / f"{name}.log"
            env = acl_env(acl_file, broker=keys)
            env["PYMQ_HA_MASTER_ADDRESS"] = ha_addr
            rogue = ServerProcess(
                "broker",
                ["--name", "broker-a", "--id", "7", "--role", "SLAVE", "--port", "0",
                 "--namesrv", c.namesrv_addr, "--store", str(tmp_path / name)],
                log_path=log, env=env, name=name,
            )  # fmt: skip
            refused_before = ha_of(master)["handshakes_refused"]
            rogue.start(60)
            try:
                wait_until(lambda n=refused_before: ha_of(master)["handshakes_refused"] > n, 30,
                           what=f"{name}'s handshake refused")  # fmt: skip
                assert {s["broker_id"] for s in ha_of(master)["slaves"]} == {1}
            finally:
                rogue.terminate()
        master_log = Path(master.log_path).read_text()
        assert "refused the handshake" in master_log
        assert "is not signed" in master_log or "carries no signature" in master_log
        assert "subOnly1 is not an admin account" in master_log
