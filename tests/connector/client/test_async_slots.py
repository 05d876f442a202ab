"""client_async_semaphore_value's counter: taken without a lock, waited for when all are out."""

from __future__ import annotations

import threading
import time

from connector.client.send_async import Slots as _Slots


def test_slots_run_out_time_out_and_come_back_to_a_waiter() -> None:
    slots = _Slots(2)
    assert slots.acquire(0) and slots.acquire(0)
    t0 = time.monotonic()
    assert not slots.acquire(0.05)  # all taken: waits its timeout, then gives up
    assert time.monotonic() - t0 >= 0.04
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire(10)))
    waiter.start()
    deadline = time.monotonic() + 10
    while not slots._waiting and time.monotonic() < deadline:  # bounded: the waiter is in
        time.sleep(0.001)
    slots.release(1)
    waiter.join(10)
    assert got == [True]
    slots.release(2)
    assert slots.acquire(0) and slots.acquire(0) and not slots.acquire(0)


def test_many_threads_never_hold_more_than_the_limit() -> None:
    slots, held, peak, lock = _Slots(3), [0], [0], threading.Lock()

    def work() -> None:
        for _ in range(300):
            assert slots.acquire(10)
            with lock:
                held[0] += 1
                peak[0] = max(peak[0], held[0])
            with lock:
                held[0] -= 1
            slots.release(1)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert peak[0] <= 3 and held[0] == 0
    assert all(slots.acquire(0) for _ in range(3)) and not slots.acquire(0)
