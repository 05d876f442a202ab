"""Topic config and consumer offset tables: atomic persistence, validation, reload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.store.offsets import ConsumerOffsetTable
from broker.store.topics import PERM_READ, TopicConfig, TopicConfigTable
from connector.errors import ConfigError, InvalidGroupError, InvalidOffsetError, InvalidTopicError


def test_topic_table_round_trip_and_version(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    table = TopicConfigTable(path)
    v0 = table.data_version
    table.put(TopicConfig("Orders", read_queue_nums=4, write_queue_nums=4))
    v1 = table.data_version
    assert v1[1] == v0[1] + 1
    table.put(TopicConfig("Orders", read_queue_nums=4, write_queue_nums=4))  # no change
    assert table.data_version == v1
    table.put(TopicConfig("Audit", perm=PERM_READ))
    assert not path.with_name("topics.json.tmp").exists()
    again = TopicConfigTable(path)
    again.load()
    assert [c.topic for c in again.all()] == ["Audit", "Orders"]
    assert again.get("Orders") == TopicConfig("Orders", read_queue_nums=4, write_queue_nums=4)
    assert again.get("Audit") is not None and not again.get("Audit").writable  # type: ignore[union-attr]
    assert again.data_version == table.data_version
    assert again.delete("Audit") and not again.delete("Audit")


def test_topic_table_falls_back_to_backup(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    table = TopicConfigTable(path)
    table.put(TopicConfig("A"))
    table.put(TopicConfig("B"))  # the first version is now topics.json.bak
    path.write_bytes(b"{not json")
    again = TopicConfigTable(path)
    again.load()
    assert [c.topic for c in again.all()] == ["A"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"topic": "../x"}, InvalidTopicError),
        ({"topic": "a/b"}, InvalidTopicError),
        ({"topic": "T", "read_queue_nums": 0}, ConfigError),
        ({"topic": "T", "write_queue_nums": 5000}, ConfigError),
        ({"topic": "T", "perm": 7}, ConfigError),
    ],
)
def test_topic_config_validation(kwargs: dict[str, object], error: type[Exception]) -> None:
    with pytest.raises(error):
        TopicConfig(**kwargs)  # type: ignore[arg-type]


def test_consumer_offsets_persist_atomically(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOffset.json"
    table = ConsumerOffsetTable(path)
    assert table.query("T", "g1", 0) == -1
    table.commit("T", "g1", 0, 42)
    table.commit("T", "g1", 3, 7, flush=True)
    raw = json.loads(path.read_text())
    assert raw["offset_table"] == {"T@g1": {"0": 42, "3": 7}}
    table.commit("T", "g1", 0, 43)
    table.persist()
    assert path.with_name("consumerOffset.json.bak").exists()
    again = ConsumerOffsetTable(path)
    again.load()
    assert again.query("T", "g1", 0) == 43
    assert again.table("T", "g1") == {0: 43, 3: 7}
    assert again.groups() == [("T", "g1")]
    again.delete_topic("T")
    assert again.query("T", "g1", 0) == -1


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("../t", "g", 0, 1), InvalidTopicError),
        (("T", "g/../../x", 0, 1), InvalidGroupError),
        (("T", "g", 0, -1), InvalidOffsetError),
        (("T", "g", -1, 1), InvalidOffsetError),
    ],
)
def test_consumer_offset_validation(tmp_path: Path, args: tuple[str, str, int, int],
                                    error: type[Exception]) -> None:  # fmt: skip
    table = ConsumerOffsetTable(tmp_path / "o.json")
    with pytest.raises(error):
        table.commit(*args)
    assert not (tmp_path / "o.json").exists()
