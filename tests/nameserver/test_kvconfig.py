"""KvConfigManager: values, persistence across restarts, the .bak fallback, name rules."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from connector.errors import ClientError, InvalidKeyError, KvConfigNotExistError
from nameserver.kvconfig import MAX_VALUE_BYTES, KvConfigManager


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "namesrv" / "kvConfig.json"


def test_put_get_delete_in_memory() -> None:
    kv = KvConfigManager(None)
    kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    assert kv.get("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"
    assert kv.find("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"
    kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:8")
    assert kv.namespace("ORDER_TOPIC_CONFIG") == {"T": "broker-a:8"}
    assert kv.delete("ORDER_TOPIC_CONFIG", "T")
    assert not kv.delete("ORDER_TOPIC_CONFIG", "T")
    assert kv.find("ORDER_TOPIC_CONFIG", "T") is None
    assert kv.namespace("ORDER_TOPIC_CONFIG") == {}
    with pytest.raises(KvConfigNotExistError) as info:
        kv.get("ORDER_TOPIC_CONFIG", "T")
    assert info.value.http_status == 404


def test_persist_and_reload(path: Path) -> None:
    kv = KvConfigManager(path)
    assert not path.exists()  # nothing is written until something changes
    kv.put("ns", "a", "1")
    kv.put("ns", "b", "2")
    kv.put("other.ns", "k|%-_.", "ü" * 10)
    kv.delete("ns", "a")
    assert json.loads(path.read_text())["config_table"]["ns"] == {"b": "2"}
    again = KvConfigManager(path)
    assert again.namespace("ns") == {"b": "2"}
    assert again.get("other.ns", "k|%-_.") == "ü" * 10
    assert not path.with_name(path.name + ".tmp").exists()


def test_previous_version_kept_as_bak(path: Path) -> None:
    kv = KvConfigManager(path)
    kv.put("ns", "k", "v1")
    kv.put("ns", "k", "v2")
    bak = path.with_name(path.name + ".bak")
    assert json.loads(bak.read_text())["config_table"] == {"ns": {"k": "v1"}}
    assert json.loads(path.read_text())["config_table"] == {"ns": {"k": "v2"}}


@pytest.mark.parametrize(
    "garbage",
    [b"{not json", b"", b"[1, 2]", b'{"config_table": {"ns": {"k": 1}}}', b"\xff\xfe\x00"],
    ids=["truncated", "empty", "wrong-shape", "non-string-value", "binary"],
)
def test_garbage_file_falls_back_to_bak(
    path: Path, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    kv = KvConfigManager(path)
    kv.put("ns", "k", "v1")
    kv.put("ns", "k", "v2")  # .bak now holds v1
    path.write_bytes(garbage)
    with caplog.at_level(logging.WARNING, logger="nameserver.kvconfig"):
        again = KvConfigManager(path)
    assert again.get("ns", "k") == "v1"
    assert "unreadable" in caplog.text
    again.put("ns", "k", "v3")  # and the next write repairs the main file
    assert KvConfigManager(path).get("ns", "k") == "v3"


def test_garbage_without_bak_starts_empty(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path.parent.mkdir(parents=True)
    path.write_bytes(b"garbage")
    with caplog.at_level(logging.WARNING, logger="nameserver.kvconfig"):
        kv = KvConfigManager(path)
    assert kv.namespace("ns") == {}
    assert "starting empty" in caplog.text


def test_missing_main_file_uses_bak(path: Path) -> None:
    # a crash between the two renames leaves only the backup
    kv = KvConfigManager(path)
    kv.put("ns", "k", "v1")
    kv.put("ns", "k", "v2")
    path.unlink()
    assert KvConfigManager(path).get("ns", "k") == "v1"


@pytest.mark.parametrize(
    ("namespace", "key"),
    [("", "k"), ("ns", ""), ("a/b", "k"), ("ns", "../x"), ("ns", "sp ace"), ("n" * 256, "k")],
)
def test_bad_names(namespace: str, key: str) -> None:
    kv = KvConfigManager(None)
    with pytest.raises(InvalidKeyError) as info:
        kv.put(namespace, key, "v")
    assert info.value.code == "KEY_ILLEGAL"
    with pytest.raises(InvalidKeyError):
        kv.get(namespace, key)
    with pytest.raises(InvalidKeyError):
        kv.delete(namespace, key)


def test_value_size_limit() -> None:
    kv = KvConfigManager(None)
    kv.put("ns", "k", "x" * MAX_VALUE_BYTES)
    with pytest.raises(ClientError) as info:
        kv.put("ns", "k", "é" * (MAX_VALUE_BYTES // 2 + 1))  # bytes, not chars, are counted
    assert info.value.http_status == 400


def test_concurrent_puts_all_persisted(path: Path) -> None:
    kv = KvConfigManager(path)

    def writer(i: int) -> None:
        for j in range(10):
            kv.put("ns", f"k{i}-{j}", str(j))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    assert len(KvConfigManager(path).namespace("ns")) == 40
