"""Per-message objects the cyclic garbage collector need not traverse.

``send_async`` hands back a ``SendFuture`` a message, and reading it makes a
``SendResult``: an application that keeps a few hundred thousand of them
alive (a list of futures, then of results) has the collector traverse each
one in every full pass. On the per-message ``send_async`` benchmark those
passes took ~40 % of the run (the same run with ``gc.disable()``: 170-190k
msgs/s instead of 100-110k). CPython leaves tuples and dicts of plain values
out of its lists the same way; ``untrack`` does it for an object of ours
that cannot be part of a reference cycle, and ``track`` puts it back the
moment it could be:

* a ``SendResult`` of one message holds strings, numbers, its status and
  its ``MessageQueue``, none of which can refer back to it, and its slots
  are read-only: untracked when made;
* a ``SendFuture`` is untracked while it holds plain values and results;
  callbacks, waiters, a condition or an exception (whose traceback holds
  frames) make it tracked again before they are stored.

An untracked object is still reference counted and freed the usual way. The
functions come from a small C module (``_gctrack.c``), built when pymq is
installed. Without a C compiler pymq installs without it and they do
nothing: everything stays tracked, as for any Python object, and
``send_async`` is slower (``COMPILED`` says which).
"""

from __future__ import annotations

__all__ = ["COMPILED", "track", "untrack"]

try:
    from connector.client._gctrack import track, untrack
except ImportError:  # installed without a C compiler
    COMPILED = False

    def _keep(obj: object, /) -> None:
        """Every object stays as the interpreter made it: tracked."""

    track = untrack = _keep
else:
    COMPILED = True
