"""Message ids: the offset msgId (host + CommitLog offset) and the producer's UNIQ_KEY."""

from __future__ import annotations

import os
import re
import struct
import threading
import time
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.errors import MessageIllegalError
from connector.protocol.msgid import (
    IdBlock,
    UniqKeyGenerator,
    decode_host,
    decode_offset_msg_id,
    encode_host,
    encode_offset_msg_id,
    offset_msg_ids,
)

HEX32 = re.compile(r"[0-9A-F]{32}")


# --------------------------------------------------------------------------- hosts


def test_encode_host_layout() -> None:
    raw = encode_host("10.0.0.1", 10911)
    assert raw == bytes([10, 0, 0, 1]) + struct.pack(">i", 10911)
    assert len(raw) == 8
    assert decode_host(raw) == "10.0.0.1:10911"


@settings(max_examples=100, deadline=None)
@given(ip=st.ip_addresses(v=4).map(str), port=st.integers(0, 0xFFFF))
def test_host_round_trip(ip: str, port: int) -> None:
    assert decode_host(encode_host(ip, port)) == f"{ip}:{port}"


@pytest.mark.parametrize(
    ("ip", "port"),
    [
        ("not-an-ip", 1),
        ("::1", 1),
        ("1.2.3.4.5", 1),
        ("1.2.3.4", -1),
        ("1.2.3.4", 65536),
    ],
)
def test_encode_host_rejects_bad_input(ip: str, port: int) -> None:
    with pytest.raises(MessageIllegalError):
        encode_host(ip, port)


# --------------------------------------------------------------------------- offset msgId


def test_offset_msg_id_known_value() -> None:
    msg_id = encode_offset_msg_id(encode_host("10.0.0.1", 10911), 1234)
    # ip 0A000001 | port 00002A9F | offset 00000000000004D2 (MessageDecoder.createMessageId)
    assert msg_id == "0A00000100002A9F00000000000004D2"
    assert decode_offset_msg_id(msg_id) == ("10.0.0.1:10911", 1234)


@settings(max_examples=200, deadline=None)
@given(
    ip=st.ip_addresses(v=4).map(str),
    port=st.integers(0, 0xFFFF),
    offset=st.integers(0, 2**63 - 1),
)
def test_offset_msg_id_round_trip(ip: str, port: int, offset: int) -> None:
    msg_id = encode_offset_msg_id(encode_host(ip, port), offset)
    assert HEX32.fullmatch(msg_id)
    assert decode_offset_msg_id(msg_id) == (f"{ip}:{port}", offset)
    assert int(msg_id[16:], 16) == offset


@pytest.mark.parametrize(
    "msg_id",
    [
        "",
        "0" * 31,
        "0" * 33,
        "0" * 64,
        "G" * 32,
        "0A00000100002A9F00000000000004DZ",
        "0x00000100002A9F00000000000004D2",
        "  " + "0" * 30,  # bytes.fromhex skips whitespace: only 15 bytes
        "0" * 30 + "\n\n",
        "0A000001 0002A9F00000000000004D2",
        "０" * 32,  # full-width digits
        "0A00000100002A9F80000000000004D2",  # offset with the sign bit set
        "FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF",  # offset -1
    ],
)
def test_decode_offset_msg_id_rejects_malformed(msg_id: str) -> None:
    with pytest.raises(MessageIllegalError):
        decode_offset_msg_id(msg_id)


@pytest.mark.parametrize("msg_id", [None, 123, b"0A00000100002A9F00000000000004D2"])
def test_decode_offset_msg_id_rejects_non_strings(msg_id: Any) -> None:
    with pytest.raises(MessageIllegalError):
        decode_offset_msg_id(msg_id)


def test_negative_offset_encodes_but_does_not_decode() -> None:
    msg_id = encode_offset_msg_id(encode_host("1.2.3.4", 5), -1)
    assert msg_id.endswith("F" * 16)
    with pytest.raises(MessageIllegalError, match="negative"):
        decode_offset_msg_id(msg_id)


# --------------------------------------------------------------------------- UNIQ_KEY


def test_uniq_key_shape() -> None:
    gen = UniqKeyGenerator()
    before_ms = int(time.time() * 1000)
    first = gen.next_id()
    second = gen.next_id()
    after_ms = int(time.time() * 1000)
    for key in (first, second):
        assert HEX32.fullmatch(key)
    # ip(4) + pid(2) + random(4) is a fixed prefix per generator.
    assert first[:20] == second[:20]
    assert first[8:12] == f"{os.getpid() & 0xFFFF:04X}"
    # ms since the start of the (UTC) month.
    now = datetime.fromtimestamp(before_ms / 1000, tz=timezone.utc)
    month_start_ms = int(
        now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp() * 1000
    )
    delta = int(first[20:28], 16)
    assert before_ms - month_start_ms <= delta <= after_ms - month_start_ms
    # a 16-bit counter that moves by one per id
    assert (int(second[28:], 16) - int(first[28:], 16)) % 0x10000 == 1


def test_two_generators_have_different_prefixes() -> None:
    a, b = UniqKeyGenerator().next_id(), UniqKeyGenerator().next_id()
    assert a[:8] == b[:8]  # same host
    assert a[8:12] == b[8:12]  # same pid
    assert a[12:20] != b[12:20]  # random part (collision chance 2**-32)


def test_uniq_keys_unique_sequentially() -> None:
    gen = UniqKeyGenerator()
    keys = [gen.next_id() for _ in range(20_000)]
    assert len(set(keys)) == len(keys)
    assert all(HEX32.fullmatch(k) for k in keys)


def test_uniq_keys_unique_across_threads() -> None:
    gen = UniqKeyGenerator()
    threads_n, per_thread = 8, 5000
    results: list[list[str]] = [[] for _ in range(threads_n)]
    barrier = threading.Barrier(threads_n)

    def work(slot: list[str]) -> None:
        barrier.wait(timeout=10)
        slot.extend(gen.next_id() for _ in range(per_thread))

    threads = [threading.Thread(target=work, args=(results[i],)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
        assert not t.is_alive()
    keys = [k for slot in results for k in slot]
    assert len(keys) == threads_n * per_thread
    assert len(set(keys)) == len(keys)
    assert all(HEX32.fullmatch(k) for k in keys)


def test_offset_msg_ids_vectorised_match_the_scalar_form() -> None:
    host = encode_host("10.1.2.3", 10911)
    offsets = [0, 1, 255, 4096, 2**40 + 7, 2**63 - 1]
    assert offset_msg_ids(host.hex().upper(), offsets) == tuple(
        encode_offset_msg_id(host, o) for o in offsets
    )


def test_many_ids_at_once_match_the_one_by_one_form() -> None:
    gen = UniqKeyGenerator()
    small, big = gen.next_ids(5), gen.next_ids(70_000)  # past 0xFFFF: the counter wraps
    assert all(HEX32.fullmatch(i) for i in small + big)
    assert [int(i[-4:], 16) for i in big[:3]] == [5, 6, 7]
    assert big[0][:28] == small[0][:28] or big[0][:24] == small[0][:24]  # same process prefix
    assert int(big[-1][-4:], 16) == (5 + 70_000 - 1) & 0xFFFF


def test_an_id_block_reads_as_the_ids_it_stands_for() -> None:
    gen = UniqKeyGenerator()
    block = gen.next_block(40)
    ids = block.tolist()
    assert len(block) == 40 and all(HEX32.fullmatch(i) for i in ids)
    assert [int(i[-4:], 16) for i in ids] == list(range(40))
    assert block[0] == ids[0] and block[-1] == ids[-1] and block[3:5] == ids[3:5]
    assert list(block) == ids and block == ids and block == tuple(ids)
    assert block != ids[:-1]
    assert gen.next_ids(2)[0][-4:] == "0028"  # the generator's counter moved past the block
    wrap = IdBlock("F" * 28, 0xFFFE, 4)
    assert [i[-4:] for i in wrap] == ["FFFE", "FFFF", "0000", "0001"]
    big = IdBlock("F" * 28, 0xFFF0, 40).tolist()  # more than 32: built in numpy
    assert [int(i[-4:], 16) for i in big] == [(0xFFF0 + i) & 0xFFFF for i in range(40)]
    with pytest.raises(ValueError):
        IdBlock("short", 0, 1)
    with pytest.raises(ValueError):
        IdBlock("F" * 28, 0x10000, 1)
