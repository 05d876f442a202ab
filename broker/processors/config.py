"""A broker's settings at run time (RocketMQ's GET_BROKER_CONFIG / UPDATE_BROKER_CONFIG).

``get`` shows every setting, the store's included, as the broker runs with
them (secrets masked). ``update`` changes the settings the broker reads where
it uses them (``RUNTIME_KEYS``); the others are read once at start and are
refused with a one-line reason (change them in the config file and restart).
A change lasts until the broker stops: it is not written back to any file.

The values are checked as a new config would be (``dataclasses.replace`` runs
its validation) and then set on the broker's one config object, which every
processor holds, so each sees the change on its next request.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig
from broker.store.config import StoreConfig
from connector.errors import ConfigError
from connector.server.settings import convert

__all__ = ["RUNTIME_KEYS", "ConfigProcessor"]

log = logging.getLogger(__name__)

# read where they are used, so a change takes effect at once
RUNTIME_KEYS = frozenset(
    {
        "auto_create_topic_enable",
        "broker_permission",  # registered with the NameServers again at once
        "default_topic_queue_nums",
        "long_polling_enable",
        "max_pull_bytes",
        "max_pull_nums",
        "max_pull_wait_ms",
        "max_reconsume_times",
    }
)
_SECRET_WORDS = ("secret", "password")


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    return value


class ConfigProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        store_config: StoreConfig,
        on_change: Callable[[set[str]], None] = lambda _keys: None,
    ) -> None:
        self.config = config
        self.store_config = store_config
        self.on_change = on_change

    def get(self) -> dict[str, Any]:
        """Every setting (broker, then store) as it is now; secrets as ``***``."""
        out: dict[str, Any] = {}
        for obj in (self.config, self.store_config):
            for f in dataclasses.fields(obj):
                if f.name == "extra" or f.name.startswith("_"):
                    continue
                value = getattr(obj, f.name)
                secret = any(w in f.name for w in _SECRET_WORDS) and value
                out.setdefault(f.name, "***" if secret else _plain(value))
        return out

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Apply ``changes`` (key -> value, text or JSON) all or none; the new settings."""
        if not changes:
            raise ConfigError("no setting to change")
        hints = typing.get_type_hints(BrokerConfig)
        values: dict[str, Any] = {}
        for key, raw in changes.items():
            if key not in RUNTIME_KEYS:
                known = key in hints or key in typing.get_type_hints(StoreConfig)
                raise ConfigError(
                    f"{key} is read at start only: set it in the config file and restart"
                    if known
                    else f"unknown setting {key!r}"
                )
            values[key] = convert(key, raw, hints[key])
        dataclasses.replace(self.config, **values)  # validates, or ConfigError
        for key, value in values.items():
            # the one config object every processor holds: each sees the new value
            object.__setattr__(self.config, key, value)
            log.warning("setting %s changed to %r at run time", key, value)
        self.on_change(set(values))
        return self.get()
