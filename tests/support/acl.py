"""A NameServer and a broker with ACL on, for the security tests: accounts of every
kind in a ``plain_acl.yml`` the test can rewrite (the servers reload it)."""

from __future__ import annotations

import os
from pathlib import Path

from connector.local import LocalCluster
from tests.support.cluster import create_topic as cluster_create_topic

ADMIN = ("adminKey1", "adminSecret1")
PUB_ONLY = ("pubOnly1", "pubSecret1")
SUB_ONLY = ("subOnly1", "subSecret1")
DENIED = ("denyKey1", "denySecret1")  # PUB|SUB by default, but DENY on topic Secret
BROKER = ("brokerKey1", "brokerSecret1")  # the brokers' own (admin: they register)

RULES = """
accounts:
  - accessKey: adminKey1
    secretKey: adminSecret1
    admin: true
  - accessKey: brokerKey1
    secretKey: brokerSecret1
    admin: true
  - accessKey: pubOnly1
    secretKey: pubSecret1
    defaultTopicPerm: PUB
    defaultGroupPerm: DENY
  - accessKey: subOnly1
    secretKey: subSecret1
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
  - accessKey: denyKey1
    secretKey: denySecret1
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
    topicPerms:
      - Secret=DENY
"""


def acl_env(acl_file: Path, *, broker: tuple[str, str] | None = BROKER) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(
        PYMQ_ACL_ENABLE="true",
        PYMQ_ACL_FILE=str(acl_file),
        PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500",
    )
    if broker is not None:
        env.update(PYMQ_ACCESS_KEY=broker[0], PYMQ_SECRET_KEY=broker[1])
    return env


def start_acl_cluster(base: Path) -> tuple[LocalCluster, Path]:
    acl_file = base / "plain_acl.yml"
    acl_file.write_text(RULES)
    cluster = LocalCluster(base / "cluster", brokers=1, env=acl_env(acl_file)).start()
    return cluster, acl_file


def create_topic(cluster: LocalCluster, topic: str) -> None:
    """``topic`` (2 queues) created by the admin account, once routed."""
    cluster_create_topic(cluster, topic, 2, credentials=ADMIN)
