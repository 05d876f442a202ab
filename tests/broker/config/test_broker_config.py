"""Broker settings: the shipped conf files, layering, validation."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig, parse_delay_levels
from broker.store.config import FlushDiskType, StoreConfig
from connector.errors import ConfigError
from connector.server.settings import load_settings, read_toml, settings_keys
from nameserver.config import NamesrvConfig

CONF = Path(__file__).resolve().parents[3] / "conf"


def load(**kw: object) -> BrokerConfig:
    return load_settings(BrokerConfig, extra_classes=(StoreConfig,), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["broker-a", "broker-b"])
def test_shipped_broker_files_load_and_document_every_key(name: str) -> None:
    path = CONF / f"{name}.toml"
    config = load(config_file=path)
    assert config.broker_name == name
    assert config.namesrv_addrs == ["127.0.0.1:9876"]
    store = config.store_config()
    assert store.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert store.mapped_file_size_commit_log == 1 << 30
    documented = set(read_toml(path))
    # shown commented out: no fixed default
    commented = {"store_dir", "advertised_addr", "http_port", "acl_file"}
    commented |= {"tls_cert_file", "tls_key_file", "tls_ca_file"}
    every = set(settings_keys(BrokerConfig, StoreConfig)) - {"store_host", "store_port"}
    every -= commented
    assert every - documented == set(), "keys missing from the shipped file"
    assert commented <= set(settings_keys(BrokerConfig))


def test_shipped_namesrv_file_documents_every_key() -> None:
    path = CONF / "namesrv.toml"
    load_settings(NamesrvConfig, config_file=path)
    commented = {"data_dir", "http_port", "acl_file", "tls_cert_file", "tls_key_file"}
    assert set(settings_keys(NamesrvConfig)) - set(read_toml(path)) == commented


def test_flags_beat_environment_beat_file(tmp_path: Path) -> None:
    f = tmp_path / "b.toml"
    f.write_text(
        'broker_name = "from-file"\nport = 1111\n[store]\nflush_disk_type = "SYNC_FLUSH"\n'
    )
    env = {"PYMQ_PORT": "2222", "PYMQ_BROKER_NAME": "from-env", "OTHER": "x"}
    config = load(config_file=f, environ=env, flags={"broker_name": "from-flag", "port": None})
    assert config.broker_name == "from-flag"
    assert config.port == 2222
    assert config.store_config().flush_disk_type is FlushDiskType.SYNC_FLUSH


@pytest.mark.parametrize(
    ("env", "fragment"),
    [
        ({"PYMQ_PORT": "abc"}, "PYMQ_PORT"),
        ({"PYMQ_AUTO_CREATE_TOPIC_ENABLE": "perhaps"}, "AUTO_CREATE_TOPIC_ENABLE"),
        ({"PYMQ_FLUSH_DISK_TYPE": "sometimes"}, "FLUSH_DISK_TYPE"),
        ({"PYMQ_MAPPED_FILE_SIZE_COMMIT_LOG": "12"}, "mapped_file_size_commit_log"),
        ({"PYMQ_BROKER_NAME": "a/b"}, "broker_name"),
        ({"PYMQ_BROKER_PERMISSION": "5"}, "broker_permission"),
        ({"PYMQ_MESSAGE_DELAY_LEVEL": "1s 5x"}, "message_delay_level"),
        ({"PYMQ_BUSY_POLL_US": "-1"}, "busy_poll_us"),
        ({"PYMQ_BUSY_POLL_US": "100001"}, "busy_poll_us"),
    ],
)
def test_bad_values_are_config_errors_naming_the_key(env: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(environ=env)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_key_in_file_is_rejected(tmp_path: Path) -> None:
    f = tmp_path / "b.toml"
    f.write_text("brokr_name = 'typo'\n")
    with pytest.raises(ConfigError, match="unknown setting 'brokr_name'"):
        load(config_file=f)


def test_broken_toml_is_a_config_error(tmp_path: Path) -> None:
    f = tmp_path / "b.toml"
    f.write_text("broker_name = \n")
    with pytest.raises(ConfigError, match=r"b\.toml"):
        load(config_file=f)
    with pytest.raises(ConfigError, match="does not exist"):
        load(config_file=tmp_path / "missing.toml")


def test_short_flush_names_and_bools() -> None:
    config = load(environ={"PYMQ_FLUSH_DISK_TYPE": "sync", "PYMQ_AUTO_CREATE_TOPIC_ENABLE": "off"})
    assert config.store_config().flush_disk_type is FlushDiskType.SYNC_FLUSH
    assert config.auto_create_topic_enable is False


def test_delay_levels() -> None:
    assert parse_delay_levels("100ms 1s 2m 1h 1d") == (100, 1000, 120_000, 3_600_000, 86_400_000)
    assert len(BrokerConfig().delay_levels_ms) == 18
    with pytest.raises(ConfigError):
        parse_delay_levels("")


def test_store_config_takes_the_broker_address() -> None:
    config = load(flags={"host": "0.0.0.0", "port": "0", "store_dir": "/tmp/x"})
    store = config.with_ports(12345, 12349).store_config()
    assert (store.store_host, store.store_port) == ("127.0.0.1", 12345)
    assert store.store_dir == Path("/tmp/x")


def test_advertised_addr_is_what_clients_see() -> None:
    config = load(environ={"PYMQ_ADVERTISED_ADDR": "10.1.2.3:19999", "PYMQ_PORT": "10911"})
    assert config.addr == "10.1.2.3:19999"
    store = config.store_config()
    assert (store.store_host, store.store_port) == ("10.1.2.3", 19999)
    for bad in ("somehost:1", "10.1.2.3", "10.1.2.3:0", "1.2.3:5"):
        with pytest.raises(ConfigError, match="advertised_addr"):
            load(environ={"PYMQ_ADVERTISED_ADDR": bad})
