"""The compiled remoting signature (``connector.protocol._sign``) and its plain-Python twin
give RocketMQ's signature on the same inputs, and refuse the same bad ones."""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import hmac
import itertools
import os
import time
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.protocol import _sign_py
from connector.protocol.acl import (
    Credentials,
    RemotingSigner,
    remoting_signer,
    sign_remoting,
    signed_content,
)

try:
    from connector.protocol import _sign as _sign_c
except ImportError:  # pragma: no cover - built by `pip install -e .` here
    _sign_c = None

TWINS = [_sign_py, _sign_c]
SECRETS = ["SK123456", "ü-secret", "k" * 64, "x" * 65]  # a key longer than a block is hashed


def test_the_signature_is_compiled() -> None:
    assert _sign_c is not None  # `pip install -e .` built connector/protocol/_sign.c here
    assert RemotingSigner("s").verify.func is _sign_c.verify  # type: ignore[attr-defined]
    assert remoting_signer(Credentials("AK", "s")).func is _sign_c.sign  # type: ignore[attr-defined]
    assert _sign_c.SHANI in (0, 1)


def _rocketmq(secret: str, ext: dict[str, str], body: bytes) -> str:
    """RocketMQ's AclUtils, by hand: values by sorted key, Signature and
    _UNIQUE_KEY_QUERY left out, then the body."""
    content = "".join(ext[k] for k in sorted(ext) if k not in ("Signature", "_UNIQUE_KEY_QUERY"))
    digest = hmac.new(secret.encode(), content.encode() + body, hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def _sign(twin: ModuleType, secret: str, ext: Any, body: Any) -> str:
    signer = RemotingSigner(secret)
    return twin.remoting_signature(  # type: ignore[no-any-return]
        ext, body, signer._inner, signer._outer, signer._states
    )


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    ext=st.dictionaries(texts, texts, max_size=20),
    body=st.binary(max_size=3000),
    secret=st.sampled_from(SECRETS),
)
def test_twins_sign_as_rocketmq_does(ext: dict[str, str], body: bytes, secret: str) -> None:
    expected = _rocketmq(secret, ext, body)
    for twin in TWINS:
        assert _sign(twin, secret, ext, body) == expected
        assert _sign(twin, secret, ext, memoryview(body)) == expected


def test_twins_on_the_unsigned_keys_large_values_and_bodies() -> None:
    big = {f"k{i:03d}": "v" * 300 for i in range(40)}  # past the C stack buffer
    cases: list[tuple[dict[str, str], bytes]] = [
        ({}, b""),
        ({"Signature": "s", "_UNIQUE_KEY_QUERY": "true"}, b""),
        ({"Signature": "s", "x": "1"}, b"body"),
        ({"AccessKey": "AK", "b": "T", "a": "PG", "ü": "é€"}, b"\0" * 200_000),
        ({"a": "b"}, b"y" * 16383),  # the last body hashed in C (SMALL_BODY), then hashlib
        ({"a": "b"}, b"y" * 16384),
        ({"a": "b"}, b"y" * 1023),  # the same without SHA-NI (SMALL_BODY_PORTABLE)
        ({"a": "b"}, b"y" * 1024),
        ({"a": "x" * 55}, b""),  # the padding's edges: 55, 56 and 64 bytes of content
        ({"a": "x" * 56}, b""),
        ({"a": "x" * 63}, b"z"),
        (big, b"z"),
    ]
    for ext, body in cases:
        for twin in TWINS:
            assert _sign(twin, "SK123456", ext, body) == _rocketmq("SK123456", ext, body)
    ext = {"topic": "T", "queueId": "3"}
    sign_remoting(ext, b"hello", Credentials("AK123456", "SK123456"))
    assert signed_content(ext, b"hello") == b"AK1234563Thello"


@settings(max_examples=100, deadline=None)
@given(state=st.binary(min_size=20, max_size=20), blocks=st.integers(0, 4), seed=st.binary())
def test_sha1_compression_with_and_without_the_sha_instructions(
    state: bytes, blocks: int, seed: bytes
) -> None:
    data = hashlib.sha512(seed).digest() * blocks  # 64 bytes a block
    expected = _sign_py.compress(state, data, False)
    assert _sign_c is not None
    assert _sign_c.compress(state, data, False) == expected
    if _sign_c.SHANI:
        assert _sign_c.compress(state, data, True) == expected


def test_keyed_states_are_the_hmac_key_blocks_hashed() -> None:
    iv = bytes.fromhex("67452301EFCDAB8998BADCFE10325476C3D2E1F0")
    # SHA-1 of one block by hand: the compression, then the padding block
    pad = b"\x80" + b"\0" * 55 + (512).to_bytes(8, "big")
    key = b"SK123456".ljust(64, b"\0")
    for twin in TWINS:
        states = twin.keyed_states(key)
        inner = _sign_py.compress(states[:20], pad, False)
        assert inner == hashlib.sha1(bytes(b ^ 0x36 for b in key)).digest()
        assert _sign_py.compress(iv, bytes(b ^ 0x5C for b in key), False) == states[20:]
        with pytest.raises(TypeError):
            twin.keyed_states(b"short")


@pytest.mark.parametrize("twin", TWINS, ids=["python", "c"])
def test_twins_refuse_what_is_not_a_header(twin: ModuleType) -> None:
    signer = RemotingSigner("SK123456")
    keyed = (signer._inner, signer._outer, signer._states)
    for bad_ext in ({"a": 1}, {"a": None}, {1: "x", "a": "y"}, [("a", "b")]):
        with pytest.raises(TypeError):
            twin.remoting_signature(bad_ext, b"", *keyed)
    with pytest.raises(TypeError):
        twin.remoting_signature({"a": "b"}, 5, *keyed)  # a body without a length
    with pytest.raises(TypeError):
        twin.remoting_signature({"a": "b"}, b"", signer._inner, signer._outer, b"short")
    with pytest.raises(TypeError):  # not SHA-1: the digest has the wrong size
        twin.remoting_signature({"a": "b"}, b"x" * 20_000, hashlib.sha256(), hashlib.sha256(),
                                signer._states)  # fmt: skip
    with pytest.raises(UnicodeEncodeError):
        twin.remoting_signature({"a": "\ud800"}, b"", *keyed)


@pytest.mark.parametrize("twin", TWINS, ids=["python", "c"])
def test_a_signature_begun_is_the_signature(twin: ModuleType) -> None:
    """``begin_signature`` (the C module: the body hashed on its worker thread) gives
    ``remoting_signature``'s text for every split of content and body into blocks."""
    signer = RemotingSigner("SK123456")
    keyed = (signer._inner, signer._outer, signer._states)
    for size in (0, 1, 40, 63, 64, 65, 200, 16384, 100_003):
        body = hashlib.sha512(str(size).encode()).digest() * (size // 64 + 1)
        body = body[:size]
        for n in range(0, 140, 3):
            ext = {"AccessKey": "AK", "a": "x" * n, "Signature": "old"}
            expected = _rocketmq("SK123456", ext, body)
            pending = twin.begin_signature(ext, memoryview(body), *keyed)
            assert pending.result() == expected
            assert pending.result() == expected  # again: the same text
    with pytest.raises(TypeError):
        twin.begin_signature({"a": 1}, b"", *keyed)


def test_signatures_begun_at_once_and_dropped_unread() -> None:
    """Many threads beginning at once (the one worker busy: the caller hashes), and a
    pending signature dropped before its result (the body is held until hashed)."""
    assert _sign_c is not None
    signer = RemotingSigner("SK123456")
    keyed = (signer._inner, signer._outer, signer._states)
    bodies = [bytes([i]) * (50_000 + i) for i in range(8)]
    expected = [_rocketmq("SK123456", {"i": str(i)}, b) for i, b in enumerate(bodies)]

    def sign_all(_: int) -> list[str]:
        out = []
        for i, body in enumerate(bodies):
            _sign_c.begin_signature({"i": "x"}, bytearray(body), *keyed)  # dropped at once
            out.append(_sign_c.begin_signature({"i": str(i)}, body, *keyed).result())
        return out

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for got in pool.map(sign_all, range(8)):
            assert got == expected


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_signs_on_its_own_worker() -> None:
    assert _sign_c is not None
    signer = RemotingSigner("SK123456")
    keyed = (signer._inner, signer._outer, signer._states)
    body = b"b" * 70_000
    expected = _rocketmq("SK123456", {}, body)
    assert _sign_c.begin_signature({}, body, *keyed).result() == expected  # the worker runs
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = all(_sign_c.begin_signature({}, body, *keyed).result() == expected for _ in range(3))
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
    finally:
        os.close(read)
        os.waitpid(pid, 0)


WINDOW = 300_000
NOW = 1_800_000_000_000


def _numbered(secret: str, seq: str, sent_ms: str, **more: str) -> dict[str, str]:
    ext = {"AccessKey": "AK", "topic": "T", "pymqSignSeq": seq, "pymqSignTime": sent_ms, **more}
    ext["Signature"] = _rocketmq(secret, ext, b"body")
    return ext


@pytest.mark.parametrize("twin", TWINS, ids=["python", "c"])
def test_twins_settle_a_check_the_same_way(twin: ModuleType) -> None:
    """``settle`` / ``verify``: the signature compared, then pymq's numbering (the time
    window, the number rising per client instance), the answers by name."""
    signer = RemotingSigner("SK123456")
    keyed = (signer._inner, signer._outer, signer._states)
    seqs: dict[str, tuple[int, int]] = {}

    def verify(ext: dict[str, str], now: int = NOW) -> int:
        return twin.verify(*keyed, ext, b"body", seqs, now, WINDOW)  # type: ignore[no-any-return]

    # RocketMQ's clients do not number their requests: the signature alone
    plain = {"AccessKey": "AK", "topic": "T"}
    plain["Signature"] = _rocketmq("SK123456", plain, b"body")
    assert verify(plain) == _sign_py.OK and seqs == {}
    assert verify({**plain, "Signature": plain["Signature"][:-2] + "A="}) == _sign_py.MISMATCH
    assert verify({"AccessKey": "AK", "topic": "T"}) == _sign_py.MISMATCH  # unsigned
    assert verify({**plain, "Signature": "x"}) == _sign_py.MISMATCH
    assert verify(_numbered("other", "i-1", str(NOW))) == _sign_py.MISMATCH

    assert verify(_numbered("SK123456", "inst-a-5", str(NOW - WINDOW))) == _sign_py.OK
    assert seqs == {"inst-a": (5, NOW)}  # the instance is what comes before the last dash
    assert verify(_numbered("SK123456", "inst-a-5", str(NOW))) == _sign_py.REPLAYED
    assert verify(_numbered("SK123456", "inst-a-4", str(NOW))) == _sign_py.REPLAYED
    assert verify(_numbered("SK123456", "inst-a-6", str(NOW + 1)), NOW + 2) == _sign_py.OK
    assert seqs["inst-a"] == (6, NOW + 2)
    assert verify(_numbered("SK123456", "inst-b-1", str(NOW + WINDOW + 1))) == _sign_py.EXPIRED
    assert verify(_numbered("SK123456", "inst-b-1", str(NOW - WINDOW - 1))) == _sign_py.EXPIRED
    for seq, sent in (("7", str(NOW)), ("i-", str(NOW)), ("i-+7", str(NOW)), ("i-1e3", str(NOW)),
                      ("i-" + "9" * 19, str(NOW)), ("i-٣", str(NOW)), ("i-7", " 1"),
                      ("i-7", ""), ("i-7", "-5")):  # fmt: skip
        assert verify(_numbered("SK123456", seq, sent)) == _sign_py.MALFORMED, (seq, sent)
    assert "inst-b" not in seqs  # refused requests are not recorded
    numbered_without_time = {"AccessKey": "AK", "pymqSignSeq": "i-9"}
    numbered_without_time["Signature"] = _rocketmq("SK123456", numbered_without_time, b"body")
    assert verify(numbered_without_time) == _sign_py.MALFORMED

    # settle: the same once the signature is known; the clock read when now_ms is -1
    ext = _numbered("SK123456", "c-1", str(int(time.time() * 1000)))
    assert twin.settle(ext, ext["Signature"], seqs, -1, WINDOW) == _sign_py.OK
    assert seqs["c"][0] == 1 and abs(seqs["c"][1] - time.time() * 1000) < 60_000
    assert twin.settle(ext, "y" * 28, seqs, -1, WINDOW) == _sign_py.MISMATCH
    assert twin.settle(ext, "short", seqs, -1, WINDOW) == _sign_py.MISMATCH
    for bad in ((["a"], "x", seqs, 0, WINDOW), (ext, 5, seqs, 0, WINDOW),
                (ext, "x" * 28, [], 0, WINDOW)):  # fmt: skip
        with pytest.raises(TypeError):
            twin.settle(*bad)


@pytest.mark.parametrize("twin", TWINS, ids=["python", "c"])
def test_twins_sign_a_request_whole(twin: ModuleType) -> None:
    """``sign``: AccessKey, the time and the next number, then the signature over them."""
    signer = RemotingSigner("SK123456")
    keyed = (signer._inner, signer._outer, signer._states)
    counter = itertools.count(41)
    seqs: dict[str, tuple[int, int]] = {}
    for n in (41, 42):
        ext = {"topic": "T", "queueId": "3", "Signature": "stale"}
        before = int(time.time() * 1000)
        twin.sign(*keyed, "AK", "inst-1", counter, ext, b"body")
        assert ext["AccessKey"] == "AK" and ext["pymqSignSeq"] == f"inst-1-{n}"
        assert before <= int(ext["pymqSignTime"]) <= time.time() * 1000
        assert ext["Signature"] == _rocketmq("SK123456", ext, b"body")
        assert twin.verify(*keyed, ext, b"body", seqs, -1, WINDOW) == _sign_py.OK
    plain = {"topic": "T"}
    twin.sign(*keyed, "AK", None, None, plain, memoryview(b"x" * 5000))  # RocketMQ's form
    assert set(plain) == {"topic", "AccessKey", "Signature"}
    assert plain["Signature"] == _rocketmq("SK123456", plain, b"x" * 5000)
    with pytest.raises(ValueError):
        twin.sign(*keyed, "AK", "i", iter(()), {}, b"")  # the numbers ran out
    for bad in (
        (5, None, None, {}, b""),
        ("AK", 5, counter, {}, b""),
        ("AK", None, None, [], b""),
        ("AK", "i", None, {}, b""),  # numbered without a counter
        ("AK", "i", [1, 2], {}, b""),  # an iterable is not an iterator
    ):
        with pytest.raises(TypeError):
            twin.sign(*keyed, *bad)
