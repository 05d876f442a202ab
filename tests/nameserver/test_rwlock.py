"""RWLock: shared readers, exclusive writers, waiting writers go first. Every wait is bounded."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from nameserver.rwlock import RWLock

WAIT_S = 5.0  # generous bound for things that must happen
SHORT_S = 0.05  # bound for things that must NOT happen (a timeout is the expected outcome)


def in_thread(target: Callable[[], None]) -> threading.Thread:
    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t


def test_readers_share() -> None:
    lock = RWLock()
    assert lock.acquire_read(timeout=WAIT_S)
    got = threading.Event()

    def reader() -> None:
        if lock.acquire_read(timeout=WAIT_S):
            got.set()
            lock.release_read()

    in_thread(reader).join(WAIT_S)
    assert got.is_set()
    lock.release_read()


def test_writer_excludes_readers_and_writers() -> None:
    lock = RWLock()
    assert lock.acquire_write(timeout=WAIT_S)
    assert not lock.acquire_read(timeout=SHORT_S)
    assert not lock.acquire_write(timeout=SHORT_S)
    lock.release_write()
    assert lock.acquire_read(timeout=WAIT_S)
    assert not lock.acquire_write(timeout=SHORT_S)
    lock.release_read()
    assert lock.acquire_write(timeout=WAIT_S)
    lock.release_write()


def test_waiting_writer_blocks_new_readers_then_gets_the_lock() -> None:
    lock = RWLock()
    assert lock.acquire_read(timeout=WAIT_S)
    writer_waiting = threading.Event()
    writer_in = threading.Event()
    writer_may_leave = threading.Event()

    def writer() -> None:
        writer_waiting.set()
        assert lock.acquire_write(timeout=WAIT_S)
        writer_in.set()
        writer_may_leave.wait(WAIT_S)
        lock.release_write()

    t = in_thread(writer)
    assert writer_waiting.wait(WAIT_S)
    # the writer is (about to be) queued: poll until a new reader is refused
    refused = False
    for _ in range(200):
        if not lock.acquire_read(timeout=0.01):
            refused = True
            break
        lock.release_read()
    assert refused, "a new reader got in while a writer was waiting"
    assert not writer_in.is_set()
    lock.release_read()  # the last reader leaves: the writer goes
    assert writer_in.wait(WAIT_S)
    assert not lock.acquire_read(timeout=SHORT_S)
    writer_may_leave.set()
    t.join(WAIT_S)
    assert lock.acquire_read(timeout=WAIT_S)
    lock.release_read()


def test_timed_out_writer_lets_readers_in() -> None:
    lock = RWLock()
    assert lock.acquire_read(timeout=WAIT_S)
    assert not lock.acquire_write(timeout=SHORT_S)
    assert lock.acquire_read(timeout=WAIT_S)  # no writer is waiting any more
    lock.release_read()
    lock.release_read()


def test_context_managers_release_on_error() -> None:
    lock = RWLock()
    with pytest.raises(KeyError), lock.write():
        raise KeyError("boom")
    with pytest.raises(KeyError), lock.read():
        raise KeyError("boom")
    assert lock.acquire_write(timeout=WAIT_S)
    lock.release_write()


def test_release_without_hold_is_an_error() -> None:
    lock = RWLock()
    with pytest.raises(RuntimeError):
        lock.release_read()
    with pytest.raises(RuntimeError):
        lock.release_write()


def test_writers_are_exclusive_under_contention() -> None:
    lock = RWLock()
    counter = {"n": 0, "inside": 0, "overlap": 0}
    threads_n, rounds = 8, 300

    def work() -> None:
        for _ in range(rounds):
            with lock.write():
                counter["inside"] += 1
                if counter["inside"] != 1:
                    counter["overlap"] += 1
                counter["n"] += 1
                counter["inside"] -= 1
            with lock.read():
                _ = counter["n"]

    threads = [in_thread(work) for _ in range(threads_n)]
    for t in threads:
        t.join(WAIT_S * 2)
    assert not any(t.is_alive() for t in threads)
    assert counter == {"n": threads_n * rounds, "inside": 0, "overlap": 0}
