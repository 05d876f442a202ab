"""The remoting frame codec: JSON and binary headers in, JSON out, and a stream decoder
that turns anything that is not a frame into ``FrameError`` (and nothing else)."""

from __future__ import annotations

import itertools
import struct

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.protocol.remoting import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    MAX_FRAME_BYTES,
    FrameDecoder,
    FrameError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_frame,
    encode_frame,
)

# RocketMQ's LanguageCode, by the ordinal the binary header carries
LANGUAGES = ["JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO"]


def raw_frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame around a header given as bytes (whatever they hold)."""
    return (
        struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header))
        + header
        + body
    )


def json_frame(header: object, body: bytes = b"") -> bytes:
    return raw_frame(orjson.dumps(header), body)


def binary_header(
    code: int,
    *,
    language: int = 0,
    version: int = 0,
    opaque: int = 0,
    flag: int = 0,
    remark: str | None = None,
    ext: dict[str, str] | None = None,
) -> bytes:
    """RocketMQ's binary header (RocketMQSerializable), built field by field."""
    remark_bytes = b"" if remark is None else remark.encode()
    fields = b"".join(
        struct.pack(">h", len(k.encode()))
        + k.encode()
        + struct.pack(">i", len(v.encode()))
        + v.encode()
        for k, v in (ext or {}).items()
    )
    return (
        struct.pack(">hbhii", code, language, version, opaque, flag)
        + struct.pack(">i", len(remark_bytes))
        + remark_bytes
        + struct.pack(">i", len(fields))
        + fields
    )


def decode_one(frame: bytes) -> RemotingCommand:
    """Through the stream decoder, and through decode_frame: both must agree."""
    decoder = FrameDecoder()
    (cmd,) = decoder.feed(frame)
    assert decoder.buffered == 0
    assert decode_frame(frame[4:]) == cmd
    return cmd


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given points (taken modulo its length)."""
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


# -- JSON headers ----------------------------------------------------------------------------


def test_json_round_trip() -> None:
    cmd = RemotingCommand(
        RequestCode.SEND_MESSAGE_V2,
        {"a": "group", "b": "TopicA", "e": "3", "i": "TAGS\x01x\x02"},
        b"\x00\x01body\xff",
        opaque=42,
        flag=FLAG_ONEWAY,
        remark="héllo",
        language="JAVA",
        version=399,
    )
    frame = encode_frame(cmd)
    (length, mark) = struct.unpack_from(">ii", frame)
    assert length == len(frame) - 4
    assert mark >> 24 == 0  # JSON, what every client reads
    header = orjson.loads(frame[8 : 8 + mark])
    assert header["code"] == 310 and header["opaque"] == 42 and header["remark"] == "héllo"
    assert all(isinstance(v, str) for v in header["extFields"].values())
    assert frame.endswith(b"\x00\x01body\xff")
    assert decode_one(frame) == cmd


def test_response_echoes_the_opaque_and_sets_the_response_bit() -> None:
    req = RemotingCommand(RequestCode.GET_MAX_OFFSET, {"topic": "T"}, opaque=77)
    resp = req.response(ResponseCode.QUERY_NOT_FOUND, {"offset": "5"}, b"x", remark="no")
    assert resp.is_response and not req.is_response
    back = decode_one(encode_frame(resp))
    assert (back.code, back.opaque, back.flag) == (22, 77, FLAG_RESPONSE)
    assert (back.ext, back.body, back.remark) == ({"offset": "5"}, b"x", "no")


def test_a_header_without_optional_fields() -> None:
    cmd = decode_one(json_frame({"code": 34}))
    assert (cmd.code, cmd.opaque, cmd.flag, cmd.version) == (34, 0, 0, 0)
    assert cmd.ext == {} and cmd.remark is None and cmd.body == b""


def test_cpp_client_header_with_a_newline_and_numbers_in_ext() -> None:
    # as captured from PyPI rocketmq 0.4.4: JSON numbers and booleans in extFields, and
    # a trailing newline counted in the header length
    header = (
        b'{"code":10,"extFields":{"AccessKey":"","OnsChannel":"ALIYUN","Signature":"",'
        b'"batch":false,"bornTimestamp":1700000000000,"defaultTopic":"TBW102",'
        b'"defaultTopicQueueNums":4,"flag":0,"producerGroup":"pg","queueId":5,'
        b'"reconsumeTimes":0,"sysFlag":0,"topic":"T","unitMode":true,"ratio":0.5,'
        b'"nothing":null},"flag":0,"language":"CPP","opaque":7,"remark":"","version":0}\n'
    )
    cmd = decode_one(raw_frame(header, b"payload"))
    assert cmd.code == RequestCode.SEND_MESSAGE and cmd.opaque == 7
    assert cmd.language == "CPP" and cmd.remark == ""
    assert cmd.ext["queueId"] == "5"
    assert cmd.ext["bornTimestamp"] == "1700000000000"
    assert cmd.ext["batch"] == "false" and cmd.ext["unitMode"] == "true"
    assert cmd.ext["ratio"] == "0.5" and cmd.ext["nothing"] == ""
    assert cmd.ext["AccessKey"] == "" and cmd.ext["topic"] == "T"
    assert all(isinstance(v, str) for v in cmd.ext.values())
    assert cmd.body == b"payload"
    # and what goes back out is strings only
    out = orjson.loads(encode_frame(cmd.response(ext=cmd.ext))[8:])
    assert all(isinstance(v, str) for v in out["extFields"].values())


# -- binary headers --------------------------------------------------------------------------


def test_binary_header() -> None:
    header = binary_header(
        RequestCode.PULL_MESSAGE,
        language=0,
        version=453,
        opaque=0x01020304,
        flag=FLAG_ONEWAY,
        remark="rémark",
        ext={"topic": "TopicA", "queueId": "3", "empty": "", "ключ": "значение"},
    )
    cmd = decode_one(raw_frame(header, b"\x00body", serialize_type=1))
    assert cmd.code == 11 and cmd.language == "JAVA" and cmd.version == 453
    assert cmd.opaque == 0x01020304 and cmd.flag == FLAG_ONEWAY and cmd.is_oneway
    assert cmd.remark == "rémark"
    assert cmd.ext == {"topic": "TopicA", "queueId": "3", "empty": "", "ключ": "значение"}
    assert cmd.body == b"\x00body"


@pytest.mark.parametrize(("ordinal", "name"), [(0, "JAVA"), (1, "CPP"), (9, "GO"), (99, "OTHER")])
def test_binary_header_language(ordinal: int, name: str) -> None:
    cmd = decode_one(raw_frame(binary_header(34, language=ordinal), serialize_type=1))
    assert cmd.language == name and cmd.remark is None and cmd.ext == {}


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(binary_header(10)[:9], id="cut-inside-fixed-fields"),
        pytest.param(binary_header(10, remark="abc")[:-6], id="cut-inside-remark"),
        pytest.param(binary_header(10)[:-4] + struct.pack(">i", 5), id="ext-length-beyond-header"),
        pytest.param(binary_header(10) + b"\x00", id="trailing-byte"),
        pytest.param(
            struct.pack(">hbhii", 10, 0, 0, 0, 0) + struct.pack(">i", -1) + struct.pack(">i", 0),
            id="negative-remark-length",
        ),
        pytest.param(binary_header(10, ext={"k": "v"})[:-1], id="cut-inside-ext"),
        pytest.param(
            struct.pack(">hbhii", 10, 0, 0, 0, 0)
            + struct.pack(">i", 0)
            + struct.pack(">i", 7)
            + struct.pack(">h", 1)
            + b"k"
            + struct.pack(">i", 100),
            id="value-length-beyond-header",
        ),
        pytest.param(binary_header(10, remark="x").replace(b"x", b"\xff"), id="remark-not-utf8"),
    ],
)
def test_bad_binary_header(header: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(raw_frame(header, serialize_type=1))


# -- the stream decoder ----------------------------------------------------------------------


def some_frames() -> tuple[list[RemotingCommand], bytes]:
    cmds = [
        RemotingCommand(105, {"topic": "T"}, opaque=1),
        RemotingCommand(310, {"b": "T", "e": "0"}, b"x" * 1000, opaque=2, remark="r"),
        RemotingCommand(11, {}, b"", opaque=3, flag=FLAG_RESPONSE),
    ]
    data = b"".join(encode_frame(c) for c in cmds)
    binary = raw_frame(binary_header(30, opaque=4, ext={"topic": "T"}), b"bb", serialize_type=1)
    cmds.append(RemotingCommand(30, {"topic": "T"}, b"bb", opaque=4, language="JAVA"))
    return cmds, data + binary


def test_decoder_fed_byte_by_byte() -> None:
    cmds, data = some_frames()
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for i in range(len(data)):
        got = decoder.feed(data[i : i + 1])
        if i < len(data) - 1:
            assert decoder.buffered or got  # nothing lost on the way
        out += got
    assert out == cmds
    assert decoder.buffered == 0


@settings(deadline=None)
@given(st.lists(st.integers(0, 2000), max_size=12))
def test_decoder_fed_in_arbitrary_chunks(cuts: list[int]) -> None:
    cmds, data = some_frames()
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for chunk in chunked(data, cuts):
        out += decoder.feed(chunk)
    assert out == cmds and decoder.buffered == 0


def test_decoder_keeps_a_partial_frame_until_it_is_complete() -> None:
    frame = encode_frame(RemotingCommand(34, body=b"abc"))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:3]) == []  # not even the length yet
    assert decoder.feed(frame[3:-1]) == []
    assert decoder.buffered == len(frame) - 1
    (cmd,) = decoder.feed(frame[-1:])
    assert cmd.body == b"abc" and decoder.buffered == 0


@pytest.mark.parametrize("length", [-1, 0, 3, MAX_FRAME_BYTES + 1, 0x7FFFFFFF])
def test_lying_length(length: int) -> None:
    # refused on the length alone: nothing waits for 2 GiB that will never come
    with pytest.raises(FrameError, match="frame length"):
        FrameDecoder().feed(struct.pack(">i", length))


def test_length_at_the_cap_is_waited_for() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(struct.pack(">ii", MAX_FRAME_BYTES, 2) + b"{}") == []
    assert decoder.buffered == 10


def test_a_smaller_cap() -> None:
    decoder = FrameDecoder(max_frame_bytes=100)
    with pytest.raises(FrameError):
        decoder.feed(encode_frame(RemotingCommand(10, body=b"x" * 200)))


def test_header_length_beyond_the_frame() -> None:
    with pytest.raises(FrameError, match="header length"):
        FrameDecoder().feed(struct.pack(">ii", 4 + 2, 10) + b"{}")


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(b"not json", id="not-json"),
        pytest.param(b'{"code": 10', id="cut-json"),
        pytest.param(b"\xff\xfe", id="not-utf8"),
        pytest.param(b"", id="empty"),
        pytest.param(b"[10, 1]", id="array"),
        pytest.param(b'"code"', id="string"),
        pytest.param(b"10", id="number"),
        pytest.param(b"null", id="null"),
        pytest.param(b'{"opaque": 1}', id="no-code"),
        pytest.param(b'{"code": "10"}', id="code-string"),
        pytest.param(b'{"code": 10.0}', id="code-float"),
        pytest.param(b'{"code": true}', id="code-bool"),
        pytest.param(b'{"code": null}', id="code-null"),
        pytest.param(b'{"code": 10, "opaque": "1"}', id="opaque-string"),
        pytest.param(b'{"code": 10, "opaque": 1.5}', id="opaque-float"),
        pytest.param(b'{"code": 10, "opaque": 4294967296}', id="opaque-out-of-range"),
        pytest.param(b'{"code": 10, "flag": "1"}', id="flag-string"),
        pytest.param(b'{"code": 10, "version": []}', id="version-list"),
        pytest.param(b'{"code": 10, "extFields": [1]}', id="ext-list"),
        pytest.param(b'{"code": 10, "extFields": {"a": {"b": 1}}}', id="ext-nested"),
        pytest.param(b'{"code": 10, "extFields": {"a": [1]}}', id="ext-list-value"),
        pytest.param(b'{"code": 10, "remark": {"a": 1}}', id="remark-object"),
    ],
)
def test_bad_json_header(header: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(raw_frame(header))
    with pytest.raises(FrameError):
        decode_frame(raw_frame(header)[4:])


def test_unknown_serialize_type() -> None:
    with pytest.raises(FrameError, match="serialization"):
        FrameDecoder().feed(raw_frame(b'{"code": 10}', serialize_type=2))


def test_decode_frame_shorter_than_its_header_length_field() -> None:
    with pytest.raises(FrameError):
        decode_frame(b"\x00\x00")


def test_a_bad_frame_after_a_good_one_in_the_same_read() -> None:
    # one recv can hold a request and the garbage after it: FrameError, not BufferError
    good = encode_frame(RemotingCommand(34, {"a": "b"}, b"body"))
    for bad in (raw_frame(b"xyz"), raw_frame(b"\x00", serialize_type=1)):
        decoder = FrameDecoder()
        with pytest.raises(FrameError):
            decoder.feed(good + bad)


# -- fuzz ------------------------------------------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=40)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)

commands = st.builds(
    RemotingCommand,
    code=st.integers(-(1 << 15), (1 << 15) - 1),
    ext=st.dictionaries(texts, texts, max_size=6),
    body=st.binary(max_size=300),
    opaque=int32,
    flag=int32,
    remark=st.none() | texts,
    language=st.sampled_from(LANGUAGES) | texts,
    version=int32,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(commands, max_size=5), st.lists(st.integers(0, 1 << 20), max_size=20))
def test_valid_frames_round_trip_in_any_chunking(
    cmds: list[RemotingCommand], cuts: list[int]
) -> None:
    data = b"".join(encode_frame(c) for c in cmds)
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for chunk in chunked(data, cuts):
        out += decoder.feed(chunk)
    assert out == cmds
    assert decoder.buffered == 0


@settings(max_examples=200, deadline=None)
@given(
    st.integers(-(1 << 15), (1 << 15) - 1),
    st.integers(0, len(LANGUAGES) - 1),
    st.integers(-(1 << 15), (1 << 15) - 1),
    int32,
    int32,
    st.none() | texts.filter(bool),
    st.dictionaries(texts, texts, max_size=6),
    st.binary(max_size=100),
)
def test_binary_headers_decode_as_built(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext: dict[str, str],
    body: bytes,
) -> None:
    header = binary_header(
        code, language=language, version=version, opaque=opaque, flag=flag, remark=remark, ext=ext
    )
    cmd = decode_one(raw_frame(header, body, serialize_type=1))
    lang = LANGUAGES[language]
    assert cmd == RemotingCommand(code, ext, body, opaque, flag, remark, lang, version)


def feed_all(chunks: list[bytes]) -> None:
    """Feed until the decoder refuses; anything but FrameError fails the test."""
    decoder = FrameDecoder()
    for chunk in chunks:
        try:
            decoder.feed(chunk)
        except FrameError:
            return


@settings(max_examples=500, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=8))
def test_random_bytes_raise_only_frame_error(chunks: list[bytes]) -> None:
    feed_all(chunks)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 3), st.binary(max_size=50))
def test_random_headers_raise_only_frame_error(header: bytes, serialize: int, body: bytes) -> None:
    # a well-formed length around random header bytes reaches the header parsers
    feed_all([raw_frame(header, body, serialize_type=serialize)])


json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | texts
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["code", "opaque", "flag", "version", "remark", "language", "extFields"])
        | texts,
        json_values,
        max_size=8,
    ),
    st.binary(max_size=20),
)
def test_random_json_headers_raise_only_frame_error(header: dict[str, object], body: bytes) -> None:
    try:
        raw = orjson.dumps(header)
    except orjson.JSONEncodeError:  # NaN, integers beyond 64 bits: not JSON anyway
        return
    feed_all([raw_frame(raw, body)])


@settings(max_examples=500, deadline=None)
@given(
    st.lists(commands, min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=6),
    st.lists(st.integers(0, 1 << 20), max_size=6),
)
def test_mutated_frames_raise_only_frame_error(
    cmds: list[RemotingCommand], flips: list[tuple[int, int]], cuts: list[int]
) -> None:
    data = bytearray(b"".join(encode_frame(c) for c in cmds))
    for pos, value in flips:
        data[pos % len(data)] = value
    feed_all(chunked(bytes(data), cuts))


# -- frames with a large body (kept as chunks, joined once) -----------------------------------


def large_frames() -> tuple[list[RemotingCommand], bytes]:
    big = bytes(range(256)) * 1000  # 256,000 bytes: over LARGE_BODY
    cmds = [
        RemotingCommand(11, {"queueId": "1"}, big, opaque=1, flag=FLAG_RESPONSE),
        RemotingCommand(34, {}, b"small", opaque=2),
        RemotingCommand(310, {"b": "T"}, big[::-1] + b"x", opaque=3),
    ]
    return cmds, b"".join(encode_frame(c) for c in cmds)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 1 << 20), max_size=12))
def test_large_bodies_in_any_chunking(cuts: list[int]) -> None:
    cmds, data = large_frames()
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    fed = 0
    for chunk in chunked(data, cuts):
        out += decoder.feed(chunk)
        fed += len(chunk)
        assert decoder.buffered == fed - sum(len(encode_frame(c)) for c in out)
    assert out == cmds
    assert decoder.buffered == 0 and decoder.missing == 0


def test_a_large_frame_reports_what_it_lacks() -> None:
    (cmd, *_), _ = large_frames()
    frame = encode_frame(cmd)
    decoder = FrameDecoder()
    assert decoder.feed(frame[:100_000]) == []
    assert decoder.missing == len(frame) - 100_000
    assert decoder.buffered == 100_000
    assert decoder.feed(frame[100_000:-1]) == [] and decoder.missing == 1
    (got,) = decoder.feed(frame[-1:] + frame[:10])  # and the start of the next frame
    assert got == cmd and decoder.missing == 0 and decoder.buffered == 10


def test_a_large_frame_with_a_lying_header_length_is_refused_when_complete() -> None:
    body = b"b" * 200_000
    header = orjson.dumps({"code": 11, "opaque": 1, "flag": 1})
    frame = bytearray(raw_frame(header, body))
    frame[4:8] = struct.pack(">i", len(header) + len(body) + 10)  # past the frame's end
    decoder = FrameDecoder()
    assert decoder.feed(bytes(frame[:1000])) == []
    assert decoder.missing == 0  # not taken for a large body: nothing to trust
    with pytest.raises(FrameError, match="header length"):
        decoder.feed(bytes(frame[1000:]))
    assert decoder.buffered == 0
    # the header is read when the frame completes: a bad one is the same FrameError
    bad = raw_frame(b"{not json", body)
    decoder = FrameDecoder()
    assert decoder.feed(bad[:1000]) == [] and decoder.missing > 0
    with pytest.raises(FrameError):
        decoder.feed(bad[1000:])
    assert decoder.buffered == 0 and decoder.missing == 0
