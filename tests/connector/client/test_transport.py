"""Decoding the servers' JSON answers (orjson first, json for what orjson refuses)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connector.client.transport import decode_json
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


@given(JSON_VALUES)
def test_decodes_what_json_decodes(value: object) -> None:
    body = json.dumps(value).encode()
    assert decode_json("h:1", HttpResponse(200, {}, body)) == json.loads(body)


def test_json_only_literals_still_decode() -> None:
    body = b'{"x": NaN, "big": 123456789012345678901234567890}'
    got = decode_json("h:1", HttpResponse(200, {}, body))
    assert got["big"] == 123456789012345678901234567890 and got["x"] != got["x"]


@pytest.mark.parametrize("body", [b"", b"<html>", b'{"a": 1', b"\xff\xfe"])
def test_not_json_is_a_remoting_error(body: bytes) -> None:
    with pytest.raises(RemotingError, match="not JSON"):
        decode_json("h:1", HttpResponse(502, {}, body))
