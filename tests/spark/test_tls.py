"""Both formats against servers that serve TLS: options tls / tlsCaFile on the sink and
both sources (format("pymq-jvm") in Java: a PEM CA file, the address checked against the
certificate); a CA that did not sign the servers' certificates fails in one line."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from connector import Admin
from connector.local import LocalCluster
from tests.support.tls import TlsFiles, make_tls_files, tls_env
from tests.support.waits import wait_until


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, TlsFiles]]:
    base = tmp_path_factory.mktemp("spark-tls")
    files = make_tls_files(base / "pki")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYMQ_")}
    env.update(tls_env(files), PYMQ_REGISTER_NAME_SERVER_PERIOD_MS="500")
    with LocalCluster(base / "cluster", brokers=1, env=env) as cluster:
        with Admin(namesrv=cluster.namesrv_addr, tls=True, tls_ca_file=str(files.ca)) as admin:
            admin.create_topic("SparkTls", read_queue_nums=2, write_queue_nums=2)
            wait_until(lambda: admin.topic_route("SparkTls").queues, 15, what="routed")
        yield cluster, files


def test_both_formats_write_and_read_over_tls(
    spark: Any, tls: tuple[LocalCluster, TlsFiles]
) -> None:
    cluster, files = tls
    opts = {"namesrv": cluster.namesrv_addr, "topic": "SparkTls", "tls": "true",
            "tlsCaFile": str(files.ca)}  # fmt: skip
    rows = [(b"tls-%d" % i,) for i in range(300)]
    spark.createDataFrame(rows, "body binary").write.format("pymq").options(**opts).mode(
        "append"
    ).save()
    for fmt in ("pymq", "pymq-jvm"):
        got = spark.read.format(fmt).options(**opts).load().select("body").collect()
        assert sorted(bytes(r.body) for r in got) == sorted(r[0] for r in rows), fmt
        with pytest.raises(Exception, match="tlsCaFile is set but tls is not"):
            spark.read.format(fmt).options(**{**opts, "tls": "false"}).load().collect()
    with pytest.raises(Exception, match="certificate is not trusted"):
        wrong = {**opts, "tlsCaFile": str(files.other_ca)}
        spark.read.format("pymq-jvm").options(**wrong).load().collect()
