"""NamesrvConfig: defaults, validation, the shipped conf/namesrv.toml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from connector.errors import ConfigError
from connector.server.settings import load_settings, read_toml, settings_keys
from nameserver.config import NamesrvConfig

SHIPPED = Path(__file__).resolve().parents[2] / "conf" / "namesrv.toml"


def test_defaults() -> None:
    config = NamesrvConfig()
    assert (config.host, config.port, config.data_dir) == ("127.0.0.1", 9876, None)
    assert config.scan_not_active_broker_interval_ms == 10_000
    assert config.broker_channel_expired_time_ms == 120_000
    assert config.kv_config_path == Path.home() / ".pymq" / "namesrv" / "kvConfig.json"


def test_shipped_file_holds_every_key_with_its_default() -> None:
    assert load_settings(NamesrvConfig, config_file=SHIPPED) == NamesrvConfig()
    commented = {"data_dir", "http_port", "acl_file", "tls_cert_file", "tls_key_file"}
    documented = set(read_toml(SHIPPED)) | commented
    assert documented == set(settings_keys(NamesrvConfig)) - {"extra"}
    assert "# data_dir = " in SHIPPED.read_text()


def test_env_and_flags_layers(tmp_path: Path) -> None:
    config = load_settings(
        NamesrvConfig,
        config_file=SHIPPED,
        environ={"PYMQ_BROKER_CHANNEL_EXPIRED_TIME_MS": "1000", "PYMQ_PORT": "1"},
        flags={"port": "0", "data_dir": str(tmp_path), "host": None},
    )
    assert (config.broker_channel_expired_time_ms, config.port) == (1000, 0)
    assert config.kv_config_path == tmp_path / "kvConfig.json"
    assert config.host == "127.0.0.1"


def test_data_dir_expands_user() -> None:
    assert NamesrvConfig(data_dir=Path("~/x")).data_dir == Path.home() / "x"


def test_log_level_is_normalized() -> None:
    assert NamesrvConfig(log_level="INFO").log_level == "info"


@pytest.mark.parametrize(
    "overrides",
    [
        {"scan_not_active_broker_interval_ms": 0},
        {"broker_channel_expired_time_ms": -1},
        {"port": 65536},
        {"host": ""},
        {"log_level": "loud"},
    ],
)
def test_invalid(overrides: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        NamesrvConfig(**overrides)
