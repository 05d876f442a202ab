"""SendResult: read-only, a single one holds two ids, a batch's ids made when read."""

from __future__ import annotations

import pytest

from connector.client.results import SendResult
from connector.protocol.message import MessageQueue
from connector.protocol.msgid import IdBlock
from connector.protocol.status import SendStatus

MQ = MessageQueue("T", "broker-a", 3)


def test_a_single_result_holds_what_it_was_given() -> None:
    r = SendResult(SendStatus.SEND_OK, "U1", "O1", MQ, 7, ("U1",), ("O1",))
    assert (r.status, r.msg_id, r.offset_msg_id, r.queue, r.queue_offset) == (
        SendStatus.SEND_OK, "U1", "O1", MQ, 7,
    )  # fmt: skip
    assert r.msg_ids == ("U1",) and r.offset_msg_ids == ("O1",)
    assert "msg_id='U1'" in repr(r)
    with pytest.raises(AttributeError, match="no setter"):
        r.queue_offset = 8  # type: ignore[misc]
    with pytest.raises(AttributeError):
        r.extra = 1  # type: ignore[attr-defined]


def test_a_batch_makes_its_offset_ids_once_and_only_when_read() -> None:
    calls = []

    def offsets() -> tuple[str, ...]:
        calls.append(1)
        return ("O1", "O2", "O3")

    ids = ["U1", "U2", "U3"]
    r = SendResult.of_batch(SendStatus.SEND_OK, MQ, 10, ids, offsets)
    ids.append("U4")  # the caller's list is not the result's
    assert r.msg_ids == ("U1", "U2", "U3") and r.msg_id == "U1,U2,U3"
    assert calls == []  # nobody asked for the offset ids yet
    assert r.offset_msg_id == "O1,O2,O3"
    assert r.offset_msg_ids == ("O1", "O2", "O3")
    assert calls == [1]
    eager = SendResult(
        SendStatus.SEND_OK, "U1,U2,U3", "O1,O2,O3", MQ, 10, ("U1", "U2", "U3"), ("O1", "O2", "O3")
    )
    assert r == eager and hash(r) == hash(eager)
    assert r != SendResult(SendStatus.SEND_OK, "U1", "O1", MQ, 10, ("U1",), ("O1",))


def test_a_batch_keeps_an_id_block_until_its_ids_are_read() -> None:
    block = IdBlock("A" * 28, 0xFFFF, 3)
    r = SendResult.of_batch(SendStatus.SEND_OK, MQ, 10, block, lambda: ("O1", "O2", "O3"))
    assert block._strs is None  # no str made for a result nobody reads
    assert r.msg_ids == ("A" * 28 + "FFFF", "A" * 28 + "0000", "A" * 28 + "0001")
    assert r.msg_id == ",".join(r.msg_ids)


def test_a_single_result_makes_its_id_tuples_only_when_read() -> None:
    r = SendResult.of_one(SendStatus.SEND_OK, MQ, 4, "U9", "O9")
    assert r._batch is None  # no tuple of ids held
    assert (r.msg_ids, r.offset_msg_ids, r.msg_id, r.queue_offset) == (("U9",), ("O9",), "U9", 4)
    assert r == SendResult(SendStatus.SEND_OK, "U9", "O9", MQ, 4, ("U9",), ("O9",))


def test_one_message_of_a_batch_result() -> None:
    r = SendResult.of_batch(
        SendStatus.SEND_OK, MQ, 10, ["U1", "U2", "U3"], lambda: ("O1", "O2", "O3")
    )
    second = r.one(1)
    assert second == SendResult(SendStatus.SEND_OK, "U2", "O2", MQ, 11, ("U2",), ("O2",))
    assert second._batch is None  # a single message's result
    assert r.one(2).queue_offset == 12
    with pytest.raises(IndexError):
        r.one(3)
    single = SendResult.of_one(SendStatus.SEND_OK, MQ, 4, "U9", "O9")
    assert single.one(0) is single
    with pytest.raises(IndexError):
        single.one(1)
