"""Helpers of the binary wire paths."""

from __future__ import annotations

import pytest

from connector.protocol.wire import batch_offsets, split_records


def test_batch_offsets_one_run() -> None:
    assert batch_offsets([[0, 1000]], [10, 20, 30]) == [1000, 1010, 1030]


def test_batch_offsets_across_a_segment() -> None:
    # message 2 went to the next segment, after a BLANK
    assert batch_offsets([[0, 900], [2, 2048]], [40, 50, 60, 70]) == [900, 940, 2048, 2108]


def test_batch_offsets_needs_message_zero() -> None:
    with pytest.raises(ValueError):
        batch_offsets([[1, 5]], [1, 2])


def test_split_records_rejects_damage() -> None:
    rec = (12).to_bytes(4, "big") + b"x" * 8
    assert split_records(rec + rec) == [rec, rec]
    with pytest.raises(ValueError):
        split_records(rec + rec[:5])
