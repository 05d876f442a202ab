"""Where a batch landed, as the send answer's ``offsetRuns`` says it: a run starts at
the first record and wherever the records jump to a new CommitLog segment."""

from __future__ import annotations

import numpy as np

from broker.remoting.send import _offset_runs

SEGMENT = 1000


def runs(*offsets: int) -> str:
    return _offset_runs(np.array(offsets, dtype=np.int64), SEGMENT)


def test_a_batch_inside_one_segment_is_one_run() -> None:
    assert runs(100, 200, 300) == "0:100"
    assert runs(0) == "0:0"
    assert runs(1000, 1999) == "0:1000"


def test_a_batch_across_segments_starts_a_run_in_each() -> None:
    assert runs(900, 950, 1000, 1100) == "0:900;2:1000"
    assert runs(999, 1000, 2000, 2500) == "0:999;1:1000;2:2000"
