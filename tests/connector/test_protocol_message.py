"""Message: what it accepts, and keys made only when read or set."""

from __future__ import annotations

import gc

import pytest

from connector.protocol.message import Message


def test_keys_are_a_real_list_once_read() -> None:
    m = Message(topic="T", body=b"x")
    assert m.keys == []
    m.keys.append("k1")  # the list read is the message's own
    assert m.keys == ["k1"] and m.all_properties() == {"KEYS": "k1"}


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, []), ([], []), (["a", "b"], ["a", "b"]), ("a b", ["a", "b"]), (("a",), ["a"])],
)
def test_keys_given_or_set_the_usual_ways(given: object, expected: list[str]) -> None:
    assert Message(topic="T", body=b"x", keys=given).keys == expected  # type: ignore[arg-type]
    m = Message(topic="T", body=b"x")
    m.keys = given  # type: ignore[assignment]
    assert m.keys == expected


def test_equality_and_repr_see_no_keys_and_empty_keys_alike() -> None:
    a = Message(topic="T", body=b"x")
    b = Message(topic="T", body=b"x", keys=[])
    assert a == b
    assert a != Message(topic="T", body=b"x", keys=["k"])
    assert a != Message(topic="T", body=b"y")
    expected = "Message(topic='T', body=b'x', tags=None, keys=[], properties={}, flag=0, "
    assert repr(a) == repr(b) == expected + "delay_level=0)"
    with pytest.raises(TypeError):
        hash(a)  # mutable


def test_a_message_without_keys_is_one_object_for_the_collector() -> None:
    m = Message(topic="T", body=b"x")
    tracked = [r for r in gc.get_referents(m) if gc.is_tracked(r) and r is not Message]
    assert tracked == []  # no list of keys, and an empty dict is not tracked
    assert len([r for r in gc.get_referents(Message(topic="T", body=b"x", keys=["k"]))
                if isinstance(r, list)]) == 1  # fmt: skip
