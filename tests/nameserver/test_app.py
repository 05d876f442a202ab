"""The NameServer's HTTP edge, in-process: every endpoint, every error body."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nameserver.app import create_app
from nameserver.config import NamesrvConfig
from nameserver.kvconfig import KvConfigManager
from nameserver.routeinfo import ORDER_TOPIC_CONFIG, RouteInfoManager
from tests.support.clocks import FakeMsClock
from tests.support.namesrv import CLUSTER, register_json

ADDR = "127.0.0.1:10911"
UNREGISTER = {"cluster": CLUSTER, "broker_name": "broker-a", "broker_id": 0, "broker_addr": ADDR}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(NamesrvConfig(data_dir=tmp_path))
    with TestClient(app) as c:
        yield c


def assert_error(resp: Any, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"code", "message"}
    assert body["code"] == code
    assert body["message"]


def test_health(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok", "role": "namesrv", "brokers": 0}
    client.post("/brokers/register", json=register_json())
    assert client.get("/health").json()["brokers"] == 1


def test_register_then_route(client: TestClient) -> None:
    resp = client.post("/brokers/register", json=register_json())
    assert resp.status_code == 200
    assert resp.json() == {"ok": True, "master_addr": ADDR}
    route = client.get("/routes/T").json()
    assert route == {
        "topic": "T",
        "queues": [
            {
                "broker_name": "broker-a",
                "read_queue_nums": 4,
                "write_queue_nums": 4,
                "perm": 6,
                "topic_sys_flag": 0,
            }
        ],
        "brokers": [
            {"cluster": CLUSTER, "broker_name": "broker-a", "addrs": {"0": ADDR}, "http_addrs": {}}
        ],
        "order_topic_conf": None,
    }


def test_clusters_and_topics(client: TestClient) -> None:
    client.post("/brokers/register", json=register_json(topics={}))
    client.post(
        "/brokers/register",
        json=register_json(name="broker-b", addr="127.0.0.1:20911"),
    )
    info = client.get("/clusters").json()
    assert info["clusters"] == {CLUSTER: ["broker-a", "broker-b"]}
    assert [b["broker_name"] for b in info["brokers"]] == ["broker-a", "broker-b"]
    live = {lb["addr"]: lb for lb in info["live"]}
    assert set(live) == {ADDR, "127.0.0.1:20911"}
    assert live[ADDR]["data_version"] == {"timestamp": 1_700_000_000_001, "counter": 1}
    assert abs(live[ADDR]["last_update_timestamp"] - time.time() * 1000) < 60_000
    assert client.get("/topics").json() == {"topics": ["T"]}


def test_unregister(client: TestClient) -> None:
    client.post("/brokers/register", json=register_json())
    resp = client.post("/brokers/unregister", json=UNREGISTER)
    assert resp.json() == {"ok": True}
    assert_error(client.get("/routes/T"), 404, "TOPIC_NOT_EXIST")
    assert client.get("/clusters").json() == {"clusters": {}, "brokers": [], "live": []}
    # unregistering again is harmless
    assert client.post("/brokers/unregister", json=UNREGISTER).json() == {"ok": True}


def test_route_errors(client: TestClient) -> None:
    assert_error(client.get("/routes/NOPE"), 404, "TOPIC_NOT_EXIST")
    assert_error(client.get("/routes/bad.topic"), 400, "TOPIC_ILLEGAL")
    assert_error(client.get("/routes/" + "x" * 128), 400, "TOPIC_ILLEGAL")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"cluster": CLUSTER},
        register_json() | {"broker_id": "zero"},
        register_json() | {"broker_addr": "nope"},
        register_json() | {"topics": {"a b": {"read_queue_nums": 1, "write_queue_nums": 1}}},
        register_json() | {"data_version": None},
    ],
)
def test_malformed_register_body(client: TestClient, body: dict[str, Any]) -> None:
    assert_error(client.post("/brokers/register", json=body), 400, "BAD_REQUEST")
    assert client.get("/clusters").json()["live"] == []


def test_not_json_body(client: TestClient) -> None:
    resp = client.post(
        "/brokers/register", content=b"{oops", headers={"content-type": "application/json"}
    )
    assert_error(resp, 400, "BAD_REQUEST")


def test_unknown_route_and_wrong_method(client: TestClient) -> None:
    assert_error(client.get("/nope"), 404, "NOT_FOUND")
    assert_error(client.post("/health"), 405, "METHOD_NOT_ALLOWED")
    assert_error(client.get("/brokers/register"), 405, "METHOD_NOT_ALLOWED")


def test_kv_endpoints(client: TestClient, tmp_path: Path) -> None:
    url = "/kv/ns/k1"
    assert_error(client.get(url), 404, "KV_NOT_EXIST")
    resp = client.put(url, json={"value": "v1"})
    assert resp.json() == {"namespace": "ns", "key": "k1", "value": "v1"}
    assert client.get(url).json() == {"namespace": "ns", "key": "k1", "value": "v1"}
    assert client.get("/kv/ns").json() == {"namespace": "ns", "entries": {"k1": "v1"}}
    assert (tmp_path / "kvConfig.json").exists()
    assert client.delete(url).json() == {"ok": True, "deleted": True}
    assert client.delete(url).json() == {"ok": True, "deleted": False}
    assert_error(client.get(url), 404, "KV_NOT_EXIST")


def test_kv_errors(client: TestClient) -> None:
    assert_error(client.put("/kv/ns/bad key", json={"value": "v"}), 400, "KEY_ILLEGAL")
    assert_error(client.get("/kv/ns/bad key"), 400, "KEY_ILLEGAL")
    assert_error(client.put("/kv/ns/k", json={"nope": 1}), 400, "BAD_REQUEST")
    assert_error(client.put("/kv/ns/k", json={"value": "x" * (64 * 1024 + 1)}), 400, "BAD_REQUEST")


def test_order_topic_conf_comes_from_kv(client: TestClient) -> None:
    client.post("/brokers/register", json=register_json())
    client.put(f"/kv/{ORDER_TOPIC_CONFIG}/T", json={"value": "broker-a:4"})
    assert client.get("/routes/T").json()["order_topic_conf"] == "broker-a:4"


def test_openapi_is_served(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/routes/{topic}", "/brokers/register", "/kv/{namespace}/{key}"} <= set(paths)


def test_state_and_injected_managers(tmp_path: Path) -> None:
    routes = RouteInfoManager()
    kv = KvConfigManager(None)
    app = create_app(NamesrvConfig(data_dir=tmp_path), routes=routes, kv=kv)
    assert app.state.routes is routes
    assert app.state.kv is kv


def test_expiry_task_runs_in_the_lifespan(tmp_path: Path) -> None:
    clock = FakeMsClock()
    routes = RouteInfoManager(broker_channel_expired_time_ms=1000, clock=clock)
    config = NamesrvConfig(data_dir=tmp_path, scan_not_active_broker_interval_ms=10)
    with TestClient(create_app(config, routes=routes)) as client:
        client.post("/brokers/register", json=register_json())
        assert client.get("/health").json()["brokers"] == 1
        clock.advance(1001)
        deadline = time.monotonic() + 5
        while routes.live_count() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert client.get("/health").json()["brokers"] == 0
        assert_error(client.get("/routes/T"), 404, "TOPIC_NOT_EXIST")
