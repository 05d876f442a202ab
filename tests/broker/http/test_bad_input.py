"""The bad-input matrix: every malformed request gets a 4xx with ``{"code", "message"}``.

For each case: the status is the expected 4xx (never a 5xx), the body has exactly
the error shape with the expected code, the broker still answers /health, and
nothing was stored (CommitLog max offset, the target topic's queue offsets and
the topic list are all unchanged).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from connector.protocol.names import validate_topic
from tests.support.rest_app import (
    MAX_MESSAGE_SIZE,
    ClientFactory,
    MiB,
    assert_error,
    b64,
    batch_bytes,
    body_of,
    commit_log_max,
    crc,
    health,
    offset_msg_id,
    patch,
    post_batch,
    pull,
    pull_ok,
    put_topic,
    queue_max_offsets,
    send,
    send_batch,
    start_client,
    topic_names,
)

TOPIC = "BadInput"  # 8 queues; queue 0 holds one message
OCTET = {"content-type": "application/octet-stream"}
JSON_CT = {"content-type": "application/json"}


Code = str | tuple[str, ...]
# A lone UTF-16 surrogate ("\\ud800") is a legal JSON escape but not encodable text:
# pydantic's JSON parser (hot path) refuses the document, the stdlib's (FastAPI
# routes) accepts it and the broker refuses the text. Either way a 400.
SURROGATE = ("BAD_REQUEST", "MESSAGE_ILLEGAL", "KEY_ILLEGAL")


@dataclass(frozen=True)
class Case:
    method: str
    url: str
    status: int
    code: str | tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    fields: tuple[str, ...] = ()  # extra fields the error body must carry


def send_json(obj: Any, status: int, code: Code, topic: str = TOPIC) -> Case:
    return Case("POST", f"/topics/{topic}/messages", status, code, {"json": obj})


def send_raw(
    content: bytes, status: int, code: Code, headers: dict[str, str] | None = None
) -> Case:
    return Case(
        "POST",
        f"/topics/{TOPIC}/messages",
        status,
        code,
        {"content": content, "headers": JSON_CT if headers is None else headers},
    )


def batch(data: bytes, status: int, code: Code, topic: str = TOPIC, **params: Any) -> Case:
    params.setdefault("queue_id", 2)
    return Case(
        "POST",
        f"/topics/{topic}/messages/batch",
        status,
        code,
        {"content": data, "headers": OCTET, "params": params},
    )


def pull_case(
    status: int,
    code: Code,
    queue: object = 0,
    topic: str = TOPIC,
    fields: tuple[str, ...] = (),
    **params: Any,
) -> Case:
    url = f"/topics/{topic}/queues/{queue}/messages"
    return Case("GET", url, status, code, {"params": params}, fields)


# -- batches whose FIRST record is valid and whose second is damaged -------------------

FIRST = batch_bytes([(b"first record is fine", {"KEYS": "first"})])
BODY2 = b"second body"
SECOND = batch_bytes([(BODY2, {"TAGS": "x"})])
N2 = len(SECOND)


def damaged(offset: int, fmt: str, value: int) -> bytes:
    return FIRST + patch(SECOND, offset, fmt, value)


BATCH_CASES = {
    "batch_truncated_mid_record": FIRST + SECOND[: N2 // 2 + 3],
    "batch_truncated_in_header": FIRST + SECOND[:10],
    "batch_truncated_last_byte": FIRST + SECOND[:-1],
    "batch_bad_magic_2nd": damaged(4, ">I", 0xDEADBEEF),
    "batch_blank_magic_2nd": damaged(4, ">I", 0xCBD43194),
    "batch_totalsize_bigger": damaged(0, ">i", N2 + 1),
    "batch_totalsize_bigger_padded": damaged(0, ">i", N2 + 8) + b"\0" * 8,
    "batch_totalsize_smaller": damaged(0, ">i", N2 - 1),
    "batch_totalsize_zero": damaged(0, ">i", 0),
    "batch_totalsize_negative": damaged(0, ">i", -N2),
    "batch_bodylen_bigger": damaged(16, ">i", len(BODY2) + 1),
    "batch_bodylen_smaller": damaged(16, ">i", len(BODY2) - 1),
    "batch_bodylen_zero": damaged(16, ">i", 0),
    "batch_bodylen_negative": damaged(16, ">i", -1),
    "batch_bodylen_huge": damaged(16, ">i", 2**31 - 1),
    "batch_bad_crc_2nd": damaged(8, ">i", crc(BODY2) ^ 1),
    "batch_proplen_negative": damaged(20 + len(BODY2), ">h", -1),
    "batch_proplen_bigger": damaged(20 + len(BODY2), ">h", 200),
    "batch_trailing_garbage": FIRST + SECOND + b"\x00\x00\x00",
    "batch_first_totalsize_claims_all": patch(FIRST, 0, ">i", len(FIRST) + N2) + SECOND,
    "batch_single_bad_crc": patch(FIRST, 8, ">i", 12345),
    "batch_single_empty_body": batch_bytes([(b"", {})]),
    "batch_empty": b"",
    "batch_three_bytes": b"\x00\x00\x00",
    "batch_single_delay_not_a_number": batch_bytes([(b"x", {"DELAY": "soon"})]),
    "batch_single_delay_negative": batch_bytes([(b"x", {"DELAY": "-1"})]),
    # properties must be name\x01value\x02 pairs (recovery tells a torn record by them)
    "batch_props_zero_tail_2nd": FIRST + patch(SECOND, N2 - 1, ">B", 0),
    "batch_props_no_name_2nd": FIRST + patch(SECOND, 22 + len(BODY2), ">B", 1),
    "batch_single_props_zero_tail": patch(FIRST, len(FIRST) - 1, ">B", 0),
}

TOO_BIG = b"a" * (MAX_MESSAGE_SIZE + 1)
BIG_ID = offset_msg_id(1 << 40)

CASES: dict[str, Case] = {
    # topic names: only legal names reach the store, and never as a path
    "topic_traversal_encoded": send_json({"body": "x"}, 404, "NOT_FOUND", topic="%2E%2E%2Fx"),
    "topic_traversal_deep": send_json({"body": "x"}, 404, "NOT_FOUND", topic="..%2F..%2Fetc"),
    "topic_dotdot": send_json({"body": "x"}, 400, "TOPIC_ILLEGAL", topic="%2E%2E"),
    "topic_dotdot_batch": batch(FIRST, 400, "TOPIC_ILLEGAL", topic="%2E%2E"),
    "topic_dotdot_pull": pull_case(400, "TOPIC_ILLEGAL", topic="%2E%2E"),
    "topic_dotdot_put": Case("PUT", "/topics/%2E%2E", 400, "TOPIC_ILLEGAL", {"json": {}}),
    "topic_dotdot_delete": Case("DELETE", "/topics/%2E%2E", 400, "TOPIC_ILLEGAL"),
    "topic_slash": send_json({"body": "x"}, 404, "NOT_FOUND", topic="a%2Fb"),
    "topic_dot": send_json({"body": "x"}, 400, "TOPIC_ILLEGAL", topic="a.b"),
    "topic_nul": send_json({"body": "x"}, 400, "TOPIC_ILLEGAL", topic="a%00b"),
    "topic_backslash": send_json({"body": "x"}, 400, "TOPIC_ILLEGAL", topic="a%5Cb"),
    "topic_reserved_TBW102": send_json({"body": "x"}, 400, "TOPIC_ILLEGAL", topic="TBW102"),
    "topic_reserved_schedule": send_json(
        {"body": "x"}, 400, "TOPIC_ILLEGAL", topic="SCHEDULE_TOPIC_XXXX"
    ),
    "topic_reserved_schedule_batch": batch(
        FIRST + SECOND, 400, "TOPIC_ILLEGAL", topic="SCHEDULE_TOPIC_XXXX", queue_id=0
    ),
    "topic_reserved_rmq_sys": send_json(
        {"body": "x"}, 400, "TOPIC_ILLEGAL", topic="RMQ_SYS_TRACE_TOPIC"
    ),
    "topic_128_chars": send_json({"body": "x"}, 400, "TOPIC_ILLEGAL", topic="t" * 128),
    "topic_128_chars_batch": batch(FIRST, 400, "TOPIC_ILLEGAL", topic="t" * 128),
    "topic_128_chars_put": Case("PUT", "/topics/" + "t" * 128, 400, "TOPIC_ILLEGAL", {"json": {}}),
    "topic_empty": send_json({"body": "x"}, 404, "NOT_FOUND", topic=""),
    "topic_empty_pull": pull_case(404, "NOT_FOUND", topic=""),
    "topic_unicode": send_json({"body": "x"}, 400, "TOPIC_ILLEGAL", topic="t%C3%B3pico"),
    "topic_bad_utf8": send_json({"body": "x"}, 400, "TOPIC_ILLEGAL", topic="%FF%FE"),
    "topic_put_reserved": Case("PUT", "/topics/TBW102", 400, "TOPIC_ILLEGAL", {"json": {}}),
    "topic_delete_reserved": Case("DELETE", "/topics/SCHEDULE_TOPIC_XXXX", 400, "TOPIC_ILLEGAL"),
    "topic_get_unknown": Case("GET", "/topics/NoSuchTopic", 404, "TOPIC_NOT_EXIST"),
    "topic_delete_unknown": Case("DELETE", "/topics/NoSuchTopic", 404, "TOPIC_NOT_EXIST"),
    "topic_pull_unknown": pull_case(404, "TOPIC_NOT_EXIST", topic="NoSuchTopic"),
    # bodies
    "json_empty_object": send_json({}, 400, "BAD_REQUEST"),
    "json_empty_body_text": send_json({"body": ""}, 400, "MESSAGE_ILLEGAL"),
    "json_empty_body_base64": send_json({"body_base64": ""}, 400, "MESSAGE_ILLEGAL"),
    "json_body_null": send_json({"body": None}, 400, "BAD_REQUEST"),
    "json_no_body_at_all": send_raw(b"", 400, "BAD_REQUEST"),
    "json_no_body_no_content_type": send_raw(b"", 415, "UNSUPPORTED_MEDIA_TYPE", headers={}),
    "json_null_document": send_raw(b"null", 400, "BAD_REQUEST"),
    "json_array_document": send_json([{"body": "x"}], 400, "BAD_REQUEST"),
    "json_string_document": send_json("x", 400, "BAD_REQUEST"),
    "json_body_not_a_string": send_json({"body": 5}, 400, "BAD_REQUEST"),
    "json_4MiB_plus_1_base64": send_json(
        {"body_base64": b64(TOO_BIG)}, 413, "MESSAGE_SIZE_EXCEEDED"
    ),
    "json_4MiB_plus_1_text": send_json({"body": TOO_BIG.decode()}, 413, "MESSAGE_SIZE_EXCEEDED"),
    "binary_4MiB_plus_1": batch(batch_bytes([(TOO_BIG, {})]), 413, "MESSAGE_SIZE_EXCEEDED"),
    "binary_6MiB": batch(batch_bytes([(b"b" * (6 * MiB), {})]), 413, "MESSAGE_SIZE_EXCEEDED"),
    # in a batch of several, an oversized entry is a damaged batch (the store's verdict)
    "binary_4MiB_plus_1_in_batch": batch(
        FIRST + batch_bytes([(TOO_BIG, {})]), 400, "MESSAGE_ILLEGAL"
    ),
    "binary_compressed_batch_of_two": batch(
        FIRST + SECOND, 400, "MESSAGE_ILLEGAL", compressed="true"
    ),
    "binary_compressed_not_zlib": batch(FIRST, 400, "MESSAGE_ILLEGAL", compressed="true"),
    "binary_compressed_not_bool": batch(FIRST, 400, "BAD_REQUEST", compressed="maybe"),
    "binary_compressed_not_zstd": batch(FIRST, 400, "MESSAGE_ILLEGAL", compressed="zstd"),
    "binary_compressed_not_lz4": batch(FIRST, 400, "MESSAGE_ILLEGAL", compressed="LZ4"),
    "binary_compressed_unknown_codec": batch(FIRST, 400, "BAD_REQUEST", compressed="snappy"),
    **{name: batch(data, 400, "MESSAGE_ILLEGAL") for name, data in BATCH_CASES.items()},
    # offsets
    "pull_offset_negative": pull_case(
        400, "OFFSET_ILLEGAL", offset=-1, fields=("min_offset", "max_offset", "next_begin_offset")
    ),
    "pull_offset_huge": pull_case(
        400,
        "OFFSET_ILLEGAL",
        offset=10**15,
        fields=("min_offset", "max_offset", "next_begin_offset"),
    ),
    "pull_offset_2_pow_70": pull_case(400, "BAD_REQUEST", offset=2**70),
    "pull_offset_not_int": pull_case(400, "BAD_REQUEST", offset="ten"),
    "pull_binary_offset_huge": Case(
        "GET",
        f"/topics/{TOPIC}/queues/0/messages",
        400,
        "OFFSET_ILLEGAL",
        {"params": {"offset": 10**15}, "headers": {"accept": "application/x-pymq-records"}},
        ("min_offset", "max_offset", "next_begin_offset"),
    ),
    "pull_max_zero": pull_case(400, "BAD_REQUEST", max=0),
    "pull_max_too_big": pull_case(400, "BAD_REQUEST", max=65_537),
    "pull_wait_negative": pull_case(400, "BAD_REQUEST", wait_ms=-1),
    "pull_tags_too_long": pull_case(400, "BAD_REQUEST", tags="t" * 5000),
    # queue ids
    "send_queue_9": send_json({"body": "x", "queue_id": 9}, 400, "QUEUE_ID_ILLEGAL"),
    "send_queue_99999": send_json({"body": "x", "queue_id": 99999}, 400, "QUEUE_ID_ILLEGAL"),
    "send_queue_negative": send_json({"body": "x", "queue_id": -1}, 400, "BAD_REQUEST"),
    "batch_queue_9": batch(FIRST + SECOND, 400, "QUEUE_ID_ILLEGAL", queue_id=9),
    "batch_single_queue_9": batch(FIRST, 400, "QUEUE_ID_ILLEGAL", queue_id=9),
    "batch_queue_99999": batch(FIRST + SECOND, 400, "QUEUE_ID_ILLEGAL", queue_id=99999),
    "batch_queue_negative": batch(FIRST, 400, "BAD_REQUEST", queue_id=-1),
    "pull_queue_9": pull_case(400, "QUEUE_ID_ILLEGAL", queue=9),
    "pull_queue_99999": pull_case(400, "QUEUE_ID_ILLEGAL", queue=99999),
    "pull_queue_negative": pull_case(400, "QUEUE_ID_ILLEGAL", queue=-1),
    "pull_queue_2_pow_70": pull_case(400, "QUEUE_ID_ILLEGAL", queue=2**70),
    "pull_queue_not_int": pull_case(400, "BAD_REQUEST", queue="zero"),
    "pull_queue_double_minus": pull_case(400, "BAD_REQUEST", queue="--1"),
    "pull_queue_superscript_two": pull_case(400, "BAD_REQUEST", queue="%C2%B2"),
    "pull_queue_empty": pull_case(404, "NOT_FOUND", queue=""),
    "offsets_queue_9": Case("GET", f"/topics/{TOPIC}/queues/9/offsets", 400, "QUEUE_ID_ILLEGAL"),
    "offset_by_time_queue_9": Case(
        "GET",
        f"/topics/{TOPIC}/queues/9/offset-by-time",
        400,
        "QUEUE_ID_ILLEGAL",
        {"params": {"timestamp": 0}},
    ),
    "offset_by_time_no_timestamp": Case(
        "GET", f"/topics/{TOPIC}/queues/0/offset-by-time", 400, "BAD_REQUEST"
    ),
    "offset_by_time_negative": Case(
        "GET",
        f"/topics/{TOPIC}/queues/0/offset-by-time",
        400,
        "BAD_REQUEST",
        {"params": {"timestamp": -1}},
    ),
    # content types
    "json_endpoint_text_plain": send_raw(
        b'{"body": "x"}', 415, "UNSUPPORTED_MEDIA_TYPE", headers={"content-type": "text/plain"}
    ),
    "json_endpoint_octet_stream": send_raw(FIRST, 415, "UNSUPPORTED_MEDIA_TYPE", headers=OCTET),
    "batch_endpoint_json": Case(
        "POST",
        f"/topics/{TOPIC}/messages/batch",
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        {"json": {"body": "x"}},
    ),
    "batch_endpoint_no_content_type": Case(
        "POST", f"/topics/{TOPIC}/messages/batch", 415, "UNSUPPORTED_MEDIA_TYPE", {"content": FIRST}
    ),
    "put_topic_text_plain": Case(
        "PUT",
        "/topics/Whatever",
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        {"content": b"{}", "headers": {"content-type": "text/plain"}},
    ),
    # JSON documents
    "json_malformed": send_raw(b'{"body": "x"', 400, "BAD_REQUEST"),
    "json_not_utf8": send_raw(b'{"body": "\xff\xfe"}', 400, "BAD_REQUEST"),
    "json_trailing_garbage": send_raw(b'{"body": "x"} xx', 400, "BAD_REQUEST"),
    "json_deeply_nested": send_raw(b"[" * 100_000 + b"]" * 100_000, 400, "BAD_REQUEST"),
    "json_huge_integer": send_raw(
        b'{"body": "x", "queue_id": ' + b"9" * 5000 + b"}", 400, "BAD_REQUEST"
    ),
    "json_nan_queue_id": send_raw(b'{"body": "x", "queue_id": NaN}', 400, "BAD_REQUEST"),
    "json_fractional_queue_id": send_json({"body": "x", "queue_id": 1.5}, 400, "BAD_REQUEST"),
    "json_unknown_field": send_json({"body": "x", "colour": "red"}, 400, "BAD_REQUEST"),
    "json_body_and_base64": send_json({"body": "x", "body_base64": "eA=="}, 400, "BAD_REQUEST"),
    "json_invalid_base64": send_json({"body_base64": "!!not base64!!"}, 400, "MESSAGE_ILLEGAL"),
    "json_base64_bad_padding": send_json({"body_base64": "eA="}, 400, "MESSAGE_ILLEGAL"),
    "json_delay_level_negative": send_json({"body": "x", "delay_level": -1}, 400, "BAD_REQUEST"),
    "json_delay_property_not_int": send_json(
        {"body": "x", "properties": {"DELAY": "soon"}}, 400, "MESSAGE_ILLEGAL"
    ),
    "json_flag_out_of_i32": send_json({"body": "x", "flag": 2**40}, 400, "BAD_REQUEST"),
    "json_key_with_space": send_json({"body": "x", "keys": ["a b"]}, 400, "KEY_ILLEGAL"),
    "json_key_empty": send_json({"body": "x", "keys": [""]}, 400, "KEY_ILLEGAL"),
    "json_key_with_separator": send_json({"body": "x", "keys": ["a\x02b"]}, 400, "KEY_ILLEGAL"),
    "json_key_too_long": send_json({"body": "x", "keys": ["k" * 256]}, 400, "KEY_ILLEGAL"),
    "json_too_many_keys": send_json({"body": "x", "keys": ["k"] * 65}, 400, "BAD_REQUEST"),
    "json_property_value_x01": send_json(
        {"body": "x", "properties": {"p": "a\x01b"}}, 400, "KEY_ILLEGAL"
    ),
    "json_property_name_x02": send_json(
        {"body": "x", "properties": {"p\x02": "v"}}, 400, "KEY_ILLEGAL"
    ),
    "json_property_name_empty": send_json(
        {"body": "x", "properties": {"": "v"}}, 400, "KEY_ILLEGAL"
    ),
    "json_property_not_a_string": send_json(
        {"body": "x", "properties": {"p": 1}}, 400, "BAD_REQUEST"
    ),
    "json_properties_too_large": send_json(
        {"body": "x", "properties": {"p": "v" * 40_000}}, 400, "MESSAGE_ILLEGAL"
    ),
    "json_tags_with_x01": send_json({"body": "x", "tags": "a\x01b"}, 400, "KEY_ILLEGAL"),
    "json_tags_too_long": send_json({"body": "x", "tags": "t" * 1025}, 400, "BAD_REQUEST"),
    # lone UTF-16 surrogates are legal JSON escapes but not encodable text
    "json_surrogate_body": send_raw(b'{"body": "\\ud800"}', 400, SURROGATE),
    "json_surrogate_tags": send_raw(b'{"body": "x", "tags": "\\udfff"}', 400, SURROGATE),
    "json_surrogate_key": send_raw(b'{"body": "x", "keys": ["\\ud800"]}', 400, SURROGATE),
    "json_surrogate_property": send_raw(
        b'{"body": "x", "properties": {"p": "\\ud800"}}', 400, SURROGATE
    ),
    "json_surrogate_property_name": send_raw(
        b'{"body": "x", "properties": {"\\ud800": "v"}}', 400, SURROGATE
    ),
    "json_surrogate_base64": send_raw(b'{"body_base64": "\\ud800"}', 400, SURROGATE),
    # routing
    "unknown_route": Case("GET", "/no/such/route", 404, "NOT_FOUND"),
    "unknown_route_post": Case("POST", "/topics/x/y/z", 404, "NOT_FOUND", {"json": {}}),
    "wrong_method_health": Case("DELETE", "/health", 405, "METHOD_NOT_ALLOWED"),
    "wrong_method_topics": Case("POST", "/topics", 405, "METHOD_NOT_ALLOWED", {"json": {}}),
    "wrong_method_messages": Case(
        "PATCH", f"/topics/{TOPIC}/messages", 405, "METHOD_NOT_ALLOWED", {"json": {}}
    ),
    # lookups and send-back
    "message_by_id_missing": Case("GET", f"/messages/{BIG_ID}", 404, "MESSAGE_NOT_EXIST"),
    "message_by_id_zzz": Case("GET", "/messages/zzz", 400, "MESSAGE_ILLEGAL"),
    "message_by_id_32_non_hex": Case("GET", "/messages/" + "z" * 32, 400, "MESSAGE_ILLEGAL"),
    # 32 hex characters that are no offset msgId may be a UNIQ_KEY: looked up, not found
    "message_by_id_negative_offset": Case("GET", "/messages/" + "F" * 32, 404, "MESSAGE_NOT_EXIST"),
    "message_by_id_mid_record": Case(
        "GET", f"/messages/{offset_msg_id(1)}", 404, "MESSAGE_NOT_EXIST"
    ),
    "send_back_malformed_id": Case(
        "POST",
        "/consumers/cg/send-back",
        400,
        "MESSAGE_ILLEGAL",
        {"json": {"offset_msg_id": "x" * 32}},
    ),
    "send_back_short_id": Case(
        "POST", "/consumers/cg/send-back", 400, "BAD_REQUEST", {"json": {"offset_msg_id": "ABC"}}
    ),
    "send_back_missing_message": Case(
        "POST",
        "/consumers/cg/send-back",
        404,
        "MESSAGE_NOT_EXIST",
        {"json": {"offset_msg_id": BIG_ID}},
    ),
    "send_back_bad_group": Case(
        "POST",
        "/consumers/a.b/send-back",
        400,
        "GROUP_ILLEGAL",
        {"json": {"offset_msg_id": offset_msg_id(0)}},
    ),
    "send_back_unknown_field": Case(
        "POST",
        "/consumers/cg/send-back",
        400,
        "BAD_REQUEST",
        {"json": {"offset_msg_id": offset_msg_id(0), "x": 1}},
    ),
    "query_key_missing": Case("GET", f"/topics/{TOPIC}/messages", 400, "BAD_REQUEST"),
    "query_key_empty": Case(
        "GET", f"/topics/{TOPIC}/messages", 400, "BAD_REQUEST", {"params": {"key": ""}}
    ),
    "query_key_bad_topic": Case(
        "GET", "/topics/a.b/messages", 400, "TOPIC_ILLEGAL", {"params": {"key": "k"}}
    ),
    # consumer offsets
    "offset_commit_negative": Case(
        "PUT", f"/consumers/cg/offsets/{TOPIC}/0", 400, "BAD_REQUEST", {"json": {"offset": -1}}
    ),
    "offset_commit_2_pow_70": Case(
        "PUT", f"/consumers/cg/offsets/{TOPIC}/0", 400, "BAD_REQUEST", {"json": {"offset": 2**70}}
    ),
    "offset_commit_missing": Case(
        "PUT", f"/consumers/cg/offsets/{TOPIC}/0", 400, "BAD_REQUEST", {"json": {}}
    ),
    "offset_commit_queue_9": Case(
        "PUT", f"/consumers/cg/offsets/{TOPIC}/9", 400, "QUEUE_ID_ILLEGAL", {"json": {"offset": 1}}
    ),
    "offset_commit_bad_group": Case(
        "PUT", f"/consumers/a.b/offsets/{TOPIC}/0", 400, "GROUP_ILLEGAL", {"json": {"offset": 1}}
    ),
    "offset_commit_group_dotdot": Case(
        "PUT", f"/consumers/%2E%2E/offsets/{TOPIC}/0", 400, "GROUP_ILLEGAL", {"json": {"offset": 1}}
    ),
    "offset_commit_unknown_topic": Case(
        "PUT",
        "/consumers/cg/offsets/NoSuchTopic/0",
        404,
        "TOPIC_NOT_EXIST",
        {"json": {"offset": 1}},
    ),
    "offset_get_never_committed": Case(
        "GET", f"/consumers/cg/offsets/{TOPIC}/0", 404, "OFFSET_NOT_EXIST"
    ),
    "progress_bad_group": Case("GET", "/consumers/a%2Eb/progress", 400, "GROUP_ILLEGAL"),
    # topic configs
    "put_topic_bad_perm": Case(
        "PUT", "/topics/Whatever", 400, "CONFIG_ILLEGAL", {"json": {"perm": 5}}
    ),
    "put_topic_zero_queues": Case(
        "PUT", "/topics/Whatever", 400, "BAD_REQUEST", {"json": {"read_queue_nums": 0}}
    ),
    "put_topic_unknown_field": Case(
        "PUT", "/topics/Whatever", 400, "BAD_REQUEST", {"json": {"queues": 4}}
    ),
}


@dataclass
class Snapshot:
    commit_log_max: int
    topics: set[str]
    queues: list[int]


def snapshot(client: TestClient) -> Snapshot:
    return Snapshot(commit_log_max(client), topic_names(client), queue_max_offsets(client, TOPIC))


@pytest.fixture(scope="module")
def bad_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One broker; 5xx answers come back as responses, not exceptions."""
    base = tmp_path_factory.mktemp("bad")
    with ExitStack() as stack:
        client = start_client(
            stack,
            base / "store",
            raise_server_exceptions=False,
        )
        put_topic(client, TOPIC, read_queue_nums=8, write_queue_nums=8)
        send(client, TOPIC, body="seed", queue_id=0)
        yield client


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in CASES.items()])
def test_bad_input(bad_client: TestClient, case: Case) -> None:
    before = snapshot(bad_client)
    resp = bad_client.request(case.method, case.url, **case.kwargs)
    assert resp.status_code < 500, f"server error: {resp.status_code} {resp.text}"
    body = assert_error(resp, case.status, case.code)
    for name in case.fields:
        assert isinstance(body.get(name), int), body
    if case.fields:
        assert set(body) == {"code", "message", *case.fields}
    else:
        assert set(body) == {"code", "message"}, body
    assert health(bad_client)["status"] == "ok"
    assert snapshot(bad_client) == before


def test_offset_illegal_carries_the_queue_bounds(bad_client: TestClient) -> None:
    body = assert_error(pull(bad_client, TOPIC, 0, 10**15), 400, "OFFSET_ILLEGAL")
    assert (body["min_offset"], body["max_offset"], body["next_begin_offset"]) == (0, 1, 1)
    # the broker tells the consumer where to go on from, and that works
    assert pull_ok(bad_client, TOPIC, 0, body["next_begin_offset"])["status"] == "NO_NEW_MSG"
    body = assert_error(pull(bad_client, TOPIC, 3, 7), 400, "OFFSET_ILLEGAL")
    assert (body["min_offset"], body["max_offset"], body["next_begin_offset"]) == (0, 0, 0)


def test_the_undamaged_batches_are_accepted(bad_client: TestClient) -> None:
    """Control: FIRST, SECOND and FIRST + SECOND are stored; only the damage is refused."""
    put_topic(bad_client, "Control", read_queue_nums=1, write_queue_nums=1)
    for data, count in ((FIRST, 1), (SECOND, 1), (FIRST + SECOND, 2)):
        assert send_batch(bad_client, "Control", data, queue_id=0)["count"] == count
    assert queue_max_offsets(bad_client, "Control") == [4]
    for name, data in BATCH_CASES.items():
        if len(data) > len(FIRST) and name != "batch_first_totalsize_claims_all":
            assert data.startswith(FIRST), name


def test_exactly_4_MiB_is_accepted(client: TestClient) -> None:
    body = bytes(range(256)) * (MAX_MESSAGE_SIZE // 256)
    assert len(body) == MAX_MESSAGE_SIZE
    json_sent = send(client, "Big", body=None, body_base64=b64(body), queue_id=0)
    assert json_sent["queue_offset"] == 0
    bin_sent = send_batch(client, "Big", batch_bytes([(body, {"TAGS": "big"})]), queue_id=0)
    assert bin_sent["queue_offset"] == 1
    res = pull_ok(client, "Big", 0, 0)
    assert [body_of(m) == body for m in res["messages"]] == [True, True]
    assert res["messages"][1]["tags"] == "big"


def test_unknown_topic_with_auto_create_off(make_client: ClientFactory) -> None:
    client = make_client(auto_create_topic_enable=False, raise_server_exceptions=False)
    names = topic_names(client)
    assert "TBW102" not in names  # not offered to producers either
    log_before = commit_log_max(client)
    cases = [
        client.post("/topics/Unknown/messages", json={"body": "x"}),
        post_batch(client, "Unknown", FIRST),
        post_batch(client, "Unknown", FIRST + SECOND, queue_id=0),
        pull(client, "Unknown", 0, 0),
    ]
    for resp in cases:
        assert_error(resp, 404, "TOPIC_NOT_EXIST")
    assert topic_names(client) == names
    assert commit_log_max(client) == log_before
    # created explicitly, it works
    put_topic(client, "Unknown", read_queue_nums=2, write_queue_nums=2)
    assert send(client, "Unknown", body="x", queue_id=1)["queue_offset"] == 0
    # retry and DLQ topics are still created on demand
    assert send(client, "%RETRY%grp", body="r")["topic"] == "%RETRY%grp"


def test_path_traversal_never_leaves_the_store(make_client: ClientFactory, tmp_path: Path) -> None:
    client = make_client(raise_server_exceptions=False)
    send(client, "Legit", body="x", queue_id=0)
    before = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_dir()}
    evil = [
        "%2E%2E",
        "%2E%2E%2Fx",
        "..%2F..%2Fx",
        "%2E",
        "x%2F..%2F..%2Fy",
        "%2Fetc",
        "%5C..%5Cx",
        "%25RETRY%25..",
        "%25DLQ%25%2E%2E",
    ]
    for name in evil:
        responses = [
            client.post(f"/topics/{name}/messages", json={"body": "x"}),
            client.post(f"/topics/{name}/messages/batch", content=FIRST, headers=OCTET),
            client.put(f"/topics/{name}", json={}),
            client.delete(f"/topics/{name}"),
            client.get(f"/topics/{name}/queues/0/messages"),
            client.get(f"/topics/{name}/messages", params={"key": "k"}),
            client.put(f"/consumers/{name}/offsets/Legit/0", json={"offset": 1}),
            client.put(f"/consumers/g/offsets/{name}/0", json={"offset": 1}),
            client.post(f"/consumers/{name}/send-back", json={"offset_msg_id": offset_msg_id(0)}),
        ]
        for resp in responses:
            assert resp.status_code in (400, 404, 405), (name, resp.status_code, resp.text)
            assert set(resp.json()) == {"code", "message"}, resp.text
    after = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_dir()}
    assert after == before
    assert {p.name for p in tmp_path.iterdir()} == {"store"}
    assert not (tmp_path.parent / "x").exists()
    for queue_dir in (tmp_path / "store" / "consumequeue").iterdir():
        assert validate_topic(queue_dir.name) == queue_dir.name
    assert topic_names(client) == {"Legit", "TBW102", "SCHEDULE_TOPIC_XXXX"}


def test_body_base64_round_trips_padding_variants(client: TestClient) -> None:
    for raw in (b"a", b"ab", b"abc", b"\x00", b"\xff" * 7):
        sent = send(client, "Padding", body=None, body_base64=base64.b64encode(raw).decode())
        [msg] = pull_ok(client, "Padding", sent["queue_id"], sent["queue_offset"], max=1)[
            "messages"
        ]
        assert body_of(msg) == raw


def test_offset_msg_id_at_every_byte(make_client: ClientFactory) -> None:
    """Lookups and send-backs by an offset msgId that points anywhere: a message only at
    a record's first byte, MESSAGE_NOT_EXIST everywhere else, never a 5xx."""
    client = make_client(raise_server_exceptions=False)
    starts = [send(client, "E", body="x" * n, queue_id=0)["offset_msg_id"] for n in (1, 2, 3)]
    end = commit_log_max(client)
    found = []
    for offset in range(end + 8):
        msg_id = offset_msg_id(offset)
        resp = client.get(f"/messages/{msg_id}")
        if resp.status_code == 200:
            found.append(msg_id)
            continue
        assert_error(resp, 404, "MESSAGE_NOT_EXIST")
        if offset % 5 == 1:  # send-back reads the same way; a sample keeps this quick
            back = client.post("/consumers/cg/send-back", json={"offset_msg_id": msg_id})
            assert_error(back, 404, "MESSAGE_NOT_EXIST")
    assert found == starts
    assert commit_log_max(client) == end


def test_a_full_disk_refuses_writes_with_503(make_client: ClientFactory) -> None:
    # ratios of 0 %: any disk in use counts as past disk_space_warning_level_ratio
    client = make_client(
        raise_server_exceptions=False,
        extra={"disk_space_warning_level_ratio": 0, "disk_space_clean_forcibly_ratio": 0},
    )
    log_before = commit_log_max(client)
    for resp in (
        client.post("/topics/Full/messages", json={"body": "x"}),
        post_batch(client, "Full", FIRST),
        post_batch(client, "Full", FIRST + SECOND, queue_id=0),
    ):
        assert_error(resp, 503, "SERVICE_NOT_AVAILABLE")
        assert "disk full" in resp.json()["message"]
    assert commit_log_max(client) == log_before
    state = health(client)  # reads and the rest go on
    assert state["disk_full"] is True
    assert state["disk_used_percent"] > 0
