"""The hot routes' query parser reads what ``urllib.parse.parse_qsl`` reads."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl

from hypothesis import given
from hypothesis import strategies as st

from broker.hotpath import _json_reply, _query, born_host

QUERY_CHARS = st.sampled_from("ab_=&%+0123456789-;x")


@given(st.text(QUERY_CHARS, max_size=40))
def test_query_matches_parse_qsl(text: str) -> None:
    assert _query(text.encode("latin-1")) == dict(parse_qsl(text))


def test_common_queries() -> None:
    assert _query(b"queue_id=3&compressed=true") == {"queue_id": "3", "compressed": "true"}
    assert _query(b"tags=a%7C%7Cb&max=5") == {"tags": "a||b", "max": "5"}
    assert _query(b"") == {}


def test_born_host_is_the_peer_or_localhost() -> None:
    assert born_host(("10.1.2.3", 4567)) == bytes([10, 1, 2, 3]) + (4567).to_bytes(4, "big")
    assert born_host(("10.1.2.3", 4567)) is born_host(["10.1.2.3", 4567])  # cached
    assert born_host(("::1", 80)) == born_host(None) == born_host(("x", "not a port"))


@given(
    st.dictionaries(
        st.text(max_size=8),
        st.one_of(
            # lone surrogates too: orjson refuses them, json writes them
            st.text(st.characters(codec=None, categories=["L", "Cs"]), max_size=20),
            st.integers(min_value=-(2**70), max_value=2**70),  # orjson: 64 bits at most
            st.lists(st.integers(min_value=0, max_value=2**63 - 1), max_size=3),
            st.none(),
            st.booleans(),
        ),
        max_size=5,
    )
)
def test_json_replies_read_as_what_was_answered(result: dict[str, object]) -> None:
    reply = _json_reply(result)
    assert reply.status == 200
    assert json.loads(reply.body) == result


def test_json_reply_falls_back_for_what_orjson_refuses() -> None:
    for result in ({"m": "lone \ud800"}, {"n": 2**64}):
        assert json.loads(_json_reply(result).body) == result
