"""The epoch file and the consistent point two replicas agree on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.store.epochs import EpochEntry, EpochFile, consistent_point, parse_entries
from connector.errors import StoreError


def E(*pairs: tuple[int, int]) -> list[EpochEntry]:
    return [EpochEntry(e, s) for e, s in pairs]


@pytest.mark.parametrize(
    ("mine", "my_max", "theirs", "their_max", "expected", "case"),
    [
        (E((1, 0)), 500, E((1, 0)), 800, 500, "same epoch, slave behind: its end"),
        (E((1, 0)), 900, E((1, 0)), 800, 800, "same epoch, slave longer: the master's end"),
        (E(), 0, E((1, 0)), 800, None, "a new slave shares nothing"),
        (E((1, 0), (2, 300)), 700, E((1, 0), (2, 300), (3, 600)), 900, 600,
         "the master began epoch 3 at 600: the slave's epoch-2 tail past it may differ"),
        (E((1, 0), (2, 300), (3, 500)), 800, E((1, 0), (2, 300), (4, 400)), 900, 400,
         "diverged: the slave's epoch 3 is unknown to the master, epoch 2 ends at 400 there"),
        (E((1, 0), (2, 300), (3, 5000)), 3000, E((1, 0), (2, 300), (3, 5000)), 9000, 3000,
         "an epoch past the slave's end is an empty range"),
        (E((1, 0), (2, 100)), 400, E((1, 0), (2, 200)), 400, 100,
         "same epoch number from another history: the last agreeing one decides"),
        (E((7, 0)), 400, E((1, 0)), 400, None, "no epoch in common"),
    ],
)  # fmt: skip
def test_consistent_point(
    mine: list[EpochEntry],
    my_max: int,
    theirs: list[EpochEntry],
    their_max: int,
    expected: int | None,
    case: str,
) -> None:
    assert consistent_point(mine, my_max, theirs, their_max) == expected, case


def test_a_master_begins_an_epoch_each_start_and_it_survives(tmp_path: Path) -> None:
    path = tmp_path / "epochs.json"
    f = EpochFile(path)
    assert f.load() == [] and f.current == 0
    assert f.begin(0) == EpochEntry(1, 0)
    assert f.begin(1000) == EpochEntry(2, 1000)
    again = EpochFile(path)
    assert again.load() == E((1, 0), (2, 1000))
    # a broker whose log ends before an epoch it recorded (a slave promoted with a shorter
    # log than its old master's) forgets that epoch before it begins the next
    again.entries = E((1, 0), (2, 1000), (3, 5000))
    assert again.begin(3000) == EpochEntry(4, 3000)
    assert EpochFile(path).load() == E((1, 0), (2, 1000), (4, 3000))


@pytest.mark.parametrize(
    "content",
    [
        "[1, 2]",
        '{"epochs": [[2, 0], [1, 10]]}',
        '{"epochs": [[1, 10], [2, 5]]}',
        '{"epochs": [[1, -1]]}',
        '{"epochs": [["1", 0]]}',
        '{"epochs": [[1, 0, 3]]}',
    ],
)
def test_a_damaged_epoch_file_is_an_error_not_a_guess(tmp_path: Path, content: str) -> None:
    path = tmp_path / "epochs.json"
    path.write_text(content)
    with pytest.raises(StoreError, match="epoch"):
        EpochFile(path).load()


def test_a_torn_epoch_file_falls_back_to_its_backup(tmp_path: Path) -> None:
    path = tmp_path / "epochs.json"
    f = EpochFile(path)
    f.begin(0)
    f.begin(10)  # the first version is now the .bak
    path.write_text('{"epochs": [[1, 0], [2')  # torn
    assert EpochFile(path).load() == E((1, 0))


def test_parse_entries_round_trip() -> None:
    entries = E((1, 0), (3, 77))
    raw = json.loads(json.dumps([e.as_list() for e in entries]))
    assert parse_entries(raw) == entries
