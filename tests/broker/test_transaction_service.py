"""The transaction service on a real store: a batch commit cut by a crash at any point
is finished on the next start, exactly once."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from broker import transaction
from broker.config import BrokerConfig
from broker.store.config import StoreConfig
from broker.store.inner import MessageInner
from broker.store.store import MessageStore
from broker.transaction import COMMIT, ROLLBACK, TransactionService
from connector.errors import StoreError, TransactionDecidedError
from connector.protocol.batch import encode_batch
from connector.protocol.names import TRANS_HALF_TOPIC, TRANS_OP_TOPIC
from connector.protocol.properties import PropertyKeys as P
from connector.protocol.properties import encode_properties
from tests.support.store import SMALL

TOPIC = "TxReal"
PER_HALF = 30


class Crash(Exception):
    """Stands for kill -9 at that point: nothing after it runs."""


def open_store(path: Path) -> MessageStore:
    store = MessageStore(StoreConfig(store_dir=path, **SMALL))
    store.start()
    return store


@pytest.fixture
def store_dir(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "store"


def batch_half(store: MessageStore, n: int, writer: str = "w", batch: int = 5) -> tuple[int, int]:
    """A batch half of ``PER_HALF`` messages for queue ``n % 2`` of TOPIC, as the broker
    stores one: (half queue offset, CommitLog offset)."""
    entries = [
        (b"h%d-m%d" % (n, i), 0, encode_properties({P.UNIQ_KEY: f"U{n:04d}{i:04d}"}))
        for i in range(PER_HALF)
    ]
    props = {
        P.REAL_TOPIC: TOPIC, P.REAL_QUEUE_ID: str(n % 2), P.TRANSACTION_PREPARED: "true",
        P.PRODUCER_GROUP: "g", P.TX_WRITER: writer, P.TX_BATCH: str(batch),
        P.TX_MESSAGES: str(PER_HALF),
    }  # fmt: skip
    put = store.put_message(
        MessageInner(
            TRANS_HALF_TOPIC, 0, encode_batch(entries), encode_properties(props), born_timestamp=1
        )
    )
    assert put.ok and put.append is not None
    return put.append.queue_offset, put.append.wrote_offset


def real_bodies(store: MessageStore) -> list[bytes]:
    out: list[bytes] = []
    for qid in (0, 1):
        got = store.get_message(TOPIC, qid, 0, 10_000)
        out += [m.body for m in _decode(got)]
    return sorted(out)


def _decode(got: Any) -> list[Any]:
    from connector.protocol.record import decode_record

    msgs = []
    for run in got.runs:
        pos = 0
        while pos < len(run.data):
            m = decode_record(run.data, pos)
            msgs.append(m)
            pos += m.store_size
    return msgs


def crash_on(calls: int, real: Callable[..., Any]) -> Callable[..., Any]:
    """``real``, that raises Crash on its ``calls``-th call instead."""
    count = 0

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        if count == calls:
            raise Crash
        return real(*args, **kwargs)

    return wrapped


@pytest.mark.parametrize(
    ("where", "calls"),
    [("_apply", 2), ("_apply", 3), ("_write_ops", 1), ("_write_ops", 2)],
    ids=[
        "before-2nd-append", "before-3rd-append", "after-2nd-append", "after-3rd-append"
    ],
)  # fmt: skip
def test_a_batch_commit_cut_short_is_finished_on_start_exactly_once(
    store_dir: Path, where: str, calls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Op records of 2 halves each: 3 halves are appended, then their ops as [0, 1], [2];
    the crash comes between two appends, or after appends whose op is not written."""
    monkeypatch.setattr(transaction, "_OP_GROUP", 2)
    store = open_store(store_dir)
    halves = [batch_half(store, n) for n in range(3)]
    svc = TransactionService(store, BrokerConfig())
    svc.load()
    setattr(svc, where, crash_on(calls, getattr(svc, where)))
    with pytest.raises(Crash):
        svc.commit_batch("g", "w", 5, halves, manifest={"all": 3})
    store.close()  # killed: no clean shutdown

    again = open_store(store_dir)
    try:
        after = TransactionService(again, BrokerConfig())
        after.load()  # reads the commit record, finishes what it names
        want = sorted(b"h%d-m%d" % (n, i) for n in range(3) for i in range(PER_HALF))
        assert real_bodies(again) == want  # every message once, none twice
        assert {after.state(q) for q, _ in halves} == {"committed"}
        repeat = after.commit_batch("g", "w", 5, halves[:1])
        assert repeat.already and repeat.halves == [q for q, _ in halves]
        assert repeat.manifest == {"all": 3}
        assert real_bodies(again) == want
    finally:
        again.shutdown()


def test_a_commit_with_a_rolled_back_half_changes_nothing(store_dir: Path) -> None:
    store = open_store(store_dir)
    try:
        halves = [batch_half(store, n) for n in range(2)]
        svc = TransactionService(store, BrokerConfig())
        svc.load()
        q, phys = halves[1]
        svc.end("g", q, phys, "ROLLBACK")
        with pytest.raises(Exception, match="rolled back already"):
            svc.commit_batch("g", "w", 5, halves)
        assert real_bodies(store) == []
        assert svc.state(halves[0][0]) == "open"
        assert svc.end("g", *halves[0], COMMIT).decision == COMMIT  # a batch half alone
        assert len(real_bodies(store)) == PER_HALF
    finally:
        store.shutdown()


def test_a_deferred_commit_decides_now_and_appends_on_the_next_call_or_start(
    store_dir: Path,
) -> None:
    """What the exactly-once sink's coordinator does: the decision first, the appends
    with the other brokers'; a broker killed in between appends them on start."""
    store = open_store(store_dir)
    halves = [batch_half(store, n) for n in range(2)]
    svc = TransactionService(store, BrokerConfig())
    svc.load()
    first = svc.commit_batch("g", "w", 5, halves, manifest={"m": 1}, defer=True)
    assert not first.already and first.messages == 2 * PER_HALF
    assert real_bodies(store) == []  # decided, not appended yet
    again = svc.commit_batch("g", "w", 5, [])
    assert again.already and again.manifest == {"m": 1}
    assert len(real_bodies(store)) == 2 * PER_HALF  # appended by the second call
    more = [batch_half(store, n, batch=6) for n in range(2, 4)]
    svc.commit_batch("g", "w", 6, more, defer=True)
    store.close()  # killed before the second call
    restarted = open_store(store_dir)
    try:
        TransactionService(restarted, BrokerConfig()).load()
        assert len(real_bodies(restarted)) == 4 * PER_HALF  # each once
    finally:
        restarted.shutdown()


def test_a_commit_decided_here_and_failed_midway_appends_each_half_once_when_retried(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator's halves were read when it decided: its appends do not look in
    the log for earlier ones (no crash since, so every append was made here). An append
    that fails between two halves (before their op record) is not made twice when the
    commit is called again."""
    monkeypatch.setattr(transaction, "_OP_GROUP", 4)
    store = open_store(store_dir)
    try:
        halves = [batch_half(store, n) for n in range(3)]
        svc = TransactionService(store, BrokerConfig())
        svc.load()
        looked: list[int] = []
        real_look = svc._committed_before

        def look(half: Any, *args: Any) -> bool:
            looked.append(half.queue_offset)
            return real_look(half, *args)

        monkeypatch.setattr(svc, "_committed_before", look)
        svc.commit_batch("g", "w", 5, halves, defer=True)
        put = store.put_messages
        calls = 0

        def failing_third(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            if calls == 3:
                raise StoreError("disk full")
            return put(*args, **kwargs)

        monkeypatch.setattr(store, "put_messages", failing_third)
        with pytest.raises(StoreError):
            svc.commit_batch("g", "w", 5, [])  # two halves appended, no op record yet
        assert len(real_bodies(store)) == 2 * PER_HALF
        assert svc.commit_batch("g", "w", 5, []).already
        want = sorted(b"h%d-m%d" % (n, i) for n in range(3) for i in range(PER_HALF))
        assert real_bodies(store) == want  # the first two not again
        assert {svc.state(q) for q, _ in halves} == {"committed"}
        assert looked == []
    finally:
        store.shutdown()


def test_halves_recorded_together_are_found_by_key_once_the_check_pass_moved_on(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch commit records its halves in op records of ``_OP_GROUP`` halves
    (comma-separated, RocketMQ 5's op bodies); once the check pass moved past them and
    the broker restarted, each half's decision is found by its key in those records."""
    monkeypatch.setattr(transaction, "_OP_GROUP", 2)
    store = open_store(store_dir)
    halves = [batch_half(store, n) for n in range(3)]
    svc = TransactionService(store, BrokerConfig())
    svc.load()
    svc.commit_batch("g", "w", 5, halves)
    ops = _decode(store.get_message(TRANS_OP_TOPIC, 0, 0, 10))
    assert [m.body for m in ops if m.properties.get("TRAN_DECISION") == COMMIT] == [b"0,1", b"2"]
    svc.check_pass()
    assert svc.half_progress == 3  # every half decided: forgotten, found by key from now on
    store.shutdown()

    again = open_store(store_dir)
    try:
        after = TransactionService(again, BrokerConfig())
        after.load()
        assert after.half_progress == 3
        assert [after.state(q) for q, _ in halves] == ["committed"] * 3
        q, phys = halves[2]
        assert after.end("g", q, phys, COMMIT).already
        with pytest.raises(TransactionDecidedError):
            after.end("g", q, phys, ROLLBACK)
        assert len(real_bodies(again)) == 3 * PER_HALF
    finally:
        again.shutdown()
