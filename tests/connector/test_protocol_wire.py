"""Helpers of the binary wire paths."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.protocol.wire import batch_offsets, split_records


def test_batch_offsets_one_run() -> None:
    assert batch_offsets([[0, 1000]], [10, 20, 30]) == [1000, 1010, 1030]


def test_batch_offsets_across_a_segment() -> None:
    # message 2 went to the next segment, after a BLANK
    assert batch_offsets([[0, 900], [2, 2048]], [40, 50, 60, 70]) == [900, 940, 2048, 2108]


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 5000), min_size=1, max_size=80),
    data=st.data(),
)
def test_batch_offsets_few_and_many_agree_with_a_plain_sum(
    sizes: list[int], data: st.DataObject
) -> None:
    """Up to 32 messages are worked out in a loop, more in numpy: same answers."""
    cuts = data.draw(st.sets(st.integers(1, len(sizes) - 1)) if len(sizes) > 1 else st.just(set()))
    runs = [[0, data.draw(st.integers(0, 1 << 40))]]
    runs += [[i, data.draw(st.integers(0, 1 << 40))] for i in sorted(cuts)]
    expected, at, starts = [], 0, dict(runs)
    for i, size in enumerate(sizes):
        at = starts.get(i, at)
        expected.append(at)
        at += size
    assert batch_offsets(list(reversed(runs)), sizes) == expected


def test_batch_offsets_needs_message_zero() -> None:
    with pytest.raises(ValueError):
        batch_offsets([[1, 5]], [1, 2])


def test_split_records_rejects_damage() -> None:
    rec = (12).to_bytes(4, "big") + b"x" * 8
    assert split_records(rec + rec) == [rec, rec]
    with pytest.raises(ValueError):
        split_records(rec + rec[:5])
