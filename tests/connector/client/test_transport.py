"""Decoding the servers' JSON answers: json in general, orjson for send results."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.client.transport import decode_json, decode_send_json
from connector.errors import RemotingError
from connector.remoting import HttpResponse

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)
# what a broker's send result holds: strings, 64-bit integers, lists of them
SEND_VALUES = st.recursive(
    st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=10) | st.none(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


@given(JSON_VALUES)
def test_decode_json_reads_what_json_reads(value: object) -> None:
    body = json.dumps(value).encode()
    assert decode_json("h:1", HttpResponse(200, {}, body)) == json.loads(body)


@given(SEND_VALUES)
def test_send_results_read_the_same_with_orjson(value: object) -> None:
    body = json.dumps(value).encode()
    got = decode_send_json("h:1", HttpResponse(200, {}, body))
    assert got == json.loads(body)
    assert repr(got) == repr(json.loads(body))  # the same types too (no int read as float)


def test_send_json_falls_back_to_json_for_what_orjson_refuses() -> None:
    got = decode_send_json("h:1", HttpResponse(200, {}, b'{"x": NaN}'))
    assert got["x"] != got["x"]


@pytest.mark.parametrize("decode", [decode_json, decode_send_json])
@pytest.mark.parametrize("body", [b"", b"<html>", b'{"a": 1', b"\xff\xfe"])
def test_not_json_is_a_remoting_error(
    decode: Callable[[str, HttpResponse], object], body: bytes
) -> None:
    with pytest.raises(RemotingError, match="not JSON"):
        decode("h:1", HttpResponse(502, {}, body))
