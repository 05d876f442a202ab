"""ACL over REST, with real servers: pymq's signed headers (timestamp window, single-use
nonce, HMAC-SHA256), 401 and 403 as ``{"code", "message"}``, open health and metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from connector.client.rest import SignedRequests
from connector.local import LocalCluster
from connector.protocol.acl import (
    REST_NONCE,
    REST_SIGNATURE,
    REST_TIMESTAMP,
    Credentials,
    rest_headers,
    rest_signature,
    rest_string_to_sign,
)
from tests.support.acl import ADMIN, PUB_ONLY, SUB_ONLY, create_topic, start_acl_cluster


@pytest.fixture(scope="module")
def acl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster, _ = start_acl_cluster(tmp_path_factory.mktemp("acl-rest"))
    try:
        create_topic(cluster, "R")
        yield cluster
    finally:
        cluster.stop()


def client(keys: tuple[str, str] | None = None) -> httpx.Client:
    auth = SignedRequests(Credentials(*keys)) if keys else None
    return httpx.Client(timeout=10, auth=auth, trust_env=False)


def broker_url(cluster: LocalCluster) -> str:
    return f"http://{cluster.brokers[0].http_addr}"


def namesrv_url(cluster: LocalCluster) -> str:
    return f"http://{cluster.namesrvs[0].http_addr}"


def refused(resp: httpx.Response, status: int, code: str) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert body["code"] == code
    return str(body["message"])


def test_health_metrics_and_docs_need_no_signature(acl: LocalCluster) -> None:
    with client() as http:
        for url in (broker_url(acl), namesrv_url(acl)):
            assert http.get(f"{url}/health").status_code == 200
            doc = http.get(f"{url}/openapi.json").json()
            assert "X-Pymq-Signature" in doc["info"]["description"]
        assert http.get(f"{broker_url(acl)}/metrics").status_code == 200


def test_unsigned_unknown_and_bad_signatures_are_401(acl: LocalCluster) -> None:
    with client() as http:
        for url in (f"{broker_url(acl)}/topics", f"{namesrv_url(acl)}/routes/R"):
            assert "not signed" in refused(http.get(url), 401, "AUTHENTICATION_FAILED")
    with client(("nobody123", "whatever1")) as http:
        assert "not known" in refused(
            http.get(f"{broker_url(acl)}/topics"), 401, "AUTHENTICATION_FAILED"
        )
    with client((SUB_ONLY[0], "wrongSecret")) as http:
        assert "does not match" in refused(
            http.get(f"{broker_url(acl)}/topics"), 401, "AUTHENTICATION_FAILED"
        )
    with client(ADMIN) as http:
        assert http.get(f"{broker_url(acl)}/topics").status_code == 200
        assert http.get(f"{namesrv_url(acl)}/routes/R").status_code == 200


def test_a_body_changed_after_signing_is_refused(acl: LocalCluster) -> None:
    target = "/topics/R/messages"
    headers = rest_headers(Credentials(*PUB_ONLY), "POST", target, b'{"body": "a"}')
    with client() as http:
        resp = http.post(
            broker_url(acl) + target,
            content=b'{"body": "b"}',
            headers={**headers, "content-type": "application/json"},
        )
    assert "does not match" in refused(resp, 401, "AUTHENTICATION_FAILED")


def test_replayed_and_expired_requests_are_401(acl: LocalCluster) -> None:
    creds = Credentials(*SUB_ONLY)
    headers = rest_headers(creds, "GET", "/topics")
    with client() as http:
        assert http.get(f"{broker_url(acl)}/topics", headers=headers).status_code == 200
        again = http.get(f"{broker_url(acl)}/topics", headers=headers)
        assert "replay" in refused(again, 401, "AUTHENTICATION_FAILED")
        # signed with a time ten minutes ago
        old = rest_headers(creds, "GET", "/topics")
        stale = str(int(old[REST_TIMESTAMP]) - 600_000)
        old[REST_TIMESTAMP] = stale
        old[REST_SIGNATURE] = rest_signature(
            creds.secret_key, rest_string_to_sign("GET", "/topics", stale, old[REST_NONCE], b"")
        )
        expired = http.get(f"{broker_url(acl)}/topics", headers=old)
        assert "away from this server's clock" in refused(expired, 401, "AUTHENTICATION_FAILED")


def test_permissions_are_403(acl: LocalCluster) -> None:
    msg = {"body": "hello"}
    with client(SUB_ONLY) as http:
        resp = http.post(f"{broker_url(acl)}/topics/R/messages", json=msg)
        assert "may not PUB topic R" in refused(resp, 403, "NO_PERMISSION")
        pulled = http.get(f"{broker_url(acl)}/topics/R/queues/0/messages", params={"offset": 0})
        assert pulled.status_code == 200
        assert "not an admin" in refused(
            http.delete(f"{broker_url(acl)}/topics/R"), 403, "NO_PERMISSION"
        )
        assert "not an admin" in refused(
            http.get(f"{broker_url(acl)}/config"), 403, "NO_PERMISSION"
        )
        assert "not an admin" in refused(
            http.put(f"{namesrv_url(acl)}/kv/ns/k", json={"value": "v"}), 403, "NO_PERMISSION"
        )
    with client(PUB_ONLY) as http:
        sent = http.post(f"{broker_url(acl)}/topics/R/messages", json=msg)
        assert sent.status_code == 200, sent.text
        resp = http.get(f"{broker_url(acl)}/topics/R/queues/0/messages", params={"offset": 0})
        assert "may not SUB topic R" in refused(resp, 403, "NO_PERMISSION")
    with client(ADMIN) as http:
        config = http.get(f"{broker_url(acl)}/config").json()
        assert config["secret_key"] == "***"  # the broker's own secret, masked
        assert "brokerSecret1" not in json.dumps(config)
