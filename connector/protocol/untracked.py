"""Objects made by the hundred thousand that the cyclic garbage collector need not traverse.

CPython's collector traverses every tracked object in each of its passes,
and an instance of a Python class is always tracked. Three workloads made
it pay for that at scale:

* ``send_async`` hands back a ``SendFuture`` a message, and reading it makes
  a ``SendResult``; an application that keeps a few hundred thousand alive
  (a list of futures, then of results) has each traversed in every full
  pass: ~40 % of the per-message ``send_async`` benchmark (the same run with
  ``gc.disable()``: 170-190k msgs/s instead of 100-110k);
* a pull of 10,000 messages makes 10,000 ``PulledMessage`` objects, which
  the next young collection traversed and moved on to older generations:
  10-30 % of a pull of message objects (timed with ``gc.callbacks``);
* building the 1,000 ``Message`` objects of a ``send_batch`` spent a third of its
  time in the collector (timeit: 540 us, 356 with it off).

CPython leaves tuples and dicts of plain values out of its lists the same
way. ``untrack`` does it for an object of ours that cannot be part of a
reference cycle, and ``track`` puts it back the moment it could be:

* a ``Message`` holds strings, bytes, numbers, a list and a dict of strings:
  untracked when made, unless it is of a subclass, whose instances may hold
  anything;
* a ``SendResult`` of one message holds strings, numbers, its status and
  its ``MessageQueue``, none of which can refer back to it, and its slots
  are read-only: untracked when made;
* a ``SendFuture`` is untracked while it holds plain values and results;
  callbacks, waiters, a condition, an exception (whose traceback holds
  frames) or any other value make it tracked again before they are stored;
* a ``PulledMessage`` holds its answer (bytes and arrays), its index and its
  body, and the fields it decodes on first read (strings, numbers, a dict of
  strings): made untracked by ``pulled_messages``; an attribute its reader
  sets on it makes it tracked again.

What is not watched: an attribute set by an application on a ``SendFuture``
(its own writes are on the hot path), or a message's properties dict or
keys list made to hold something other than strings (the message itself).
A reference cycle through one of those is never collected.

An untracked object is still reference counted and freed the usual way. The
functions come from a small C module (``_gctrack.c``), built when pymq is
installed. Without a C compiler pymq installs without it: ``track`` and
``untrack`` do nothing, ``pulled_messages`` calls the class, everything
stays tracked as for any Python object, and the workloads above are slower
(``COMPILED`` says which).
"""

from __future__ import annotations

from typing import Any, TypeVar

__all__ = ["COMPILED", "pulled_messages", "track", "untrack"]

_T = TypeVar("_T")

try:
    from connector.protocol._gctrack import pulled_messages, track, untrack
except ImportError:  # installed without a C compiler
    COMPILED = False

    def _keep(obj: object, /) -> None:
        """Every object stays as the interpreter made it: tracked."""

    def _made(
        cls: type[_T],
        answer: Any,
        data: bytes,
        starts: list[int],
        ends: list[int],
        inflated: dict[int, bytes],
        /,
    ) -> list[_T]:
        bodies = [data[start:end] for start, end in zip(starts, ends, strict=True)]
        for i, body in inflated.items():
            bodies[i] = body
        return [cls(answer, i, body) for i, body in enumerate(bodies)]  # type: ignore[call-arg]

    track = untrack = _keep
    pulled_messages = _made
else:
    COMPILED = True
