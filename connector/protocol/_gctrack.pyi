# connector/protocol/_gctrack.c: see connector.protocol.untracked

from typing import Any, TypeVar

_T = TypeVar("_T")

def untrack(obj: object, /) -> None: ...
def track(obj: object, /) -> None: ...
def pulled_messages(
    cls: type[_T],
    answer: Any,
    data: bytes,
    starts: list[int],
    ends: list[int],
    inflated: dict[int, bytes],
    /,
) -> list[_T]: ...
