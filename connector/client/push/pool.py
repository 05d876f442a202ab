"""The consume threads of a push consumer: a deque of tasks and up to
``consume_thread_max`` threads taking them, started as tasks come (as
Python's ``ThreadPoolExecutor``).

Why not ``ThreadPoolExecutor``: it makes a ``Future`` (a lock and a
condition) and takes its queue's locks for every task; on a backlog with a
no-op listener, when a pull answer was cut into a task per batch, ``submit``
was ~30 % of the consumer's time (py-spy, ``benchmarks/push_bench.py``).
Here adding tasks is a ``deque.extend`` and a thread is woken only when one
is idle; a busy thread takes the next task with a ``popleft``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable

__all__ = ["ConsumePool", "Task"]

log = logging.getLogger(__name__)
Task = Callable[[], object]


class ConsumePool:
    def __init__(self, max_threads: int, name: str = "pymq-consume") -> None:
        self.max_threads = max_threads
        self.name = name
        self._tasks: deque[Task] = deque()
        self._cond = threading.Condition()
        self._idle = 0  # threads waiting for a task
        self._threads: list[threading.Thread] = []
        self._stopped = False

    def submit_all(self, tasks: Iterable[Task]) -> bool:
        """Run ``tasks`` on the pool's threads; RuntimeError once shut down. Whether a
        thread was woken (or started) for them: none was if every thread is busy."""
        if self._stopped:
            raise RuntimeError("the consume pool is shut down")
        before = len(self._tasks)
        self._tasks.extend(tasks)
        added = len(self._tasks) - before
        woke = False
        # a thread checks the deque again after saying it is idle (under the lock), so
        # reading _idle here without it can miss no task
        if self._idle:
            with self._cond:
                self._cond.notify(added)
                woke = True
        if len(self._threads) < self.max_threads and added > self._idle:
            with self._cond:
                while len(self._threads) < self.max_threads and len(self._tasks) > self._idle:
                    t = threading.Thread(
                        target=self._work, name=f"{self.name}-{len(self._threads)}", daemon=True
                    )
                    self._threads.append(t)
                    t.start()
                    woke = True
        return woke

    def submit(self, fn: Callable[..., object], *args: object) -> bool:
        return self.submit_all([lambda: fn(*args)])

    def idle(self) -> int:
        """Threads waiting for work now (a hint: how many tasks would run at once)."""
        return self._idle + self.max_threads - len(self._threads)

    def _work(self) -> None:
        tasks, cond = self._tasks, self._cond
        while True:
            try:
                task = tasks.popleft()
            except IndexError:
                with cond:
                    self._idle += 1
                    while not tasks and not self._stopped:
                        cond.wait()
                    self._idle -= 1
                    if self._stopped:
                        return
                continue
            try:
                task()
            except Exception:  # a defect of a task: logged, the thread goes on
                log.exception("a consume task failed")

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Tasks not started are dropped; the running ones finish (bounded wait)."""
        with self._cond:
            self._stopped = True
            self._tasks.clear()
            self._cond.notify_all()
        me = threading.current_thread()
        for t in list(self._threads):
            if t is not me:
                t.join(timeout_s)
