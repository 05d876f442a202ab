"""RocketMQ's remoting frames: pure encode and decode, no IO.

A frame is ``int32 length | int32 (serializeType << 24 | headerLength) |
header | body``; ``length`` counts everything after its own four bytes.
Headers arrive as JSON (serializeType 0) or in RocketMQ's binary layout
(serializeType 1); pymq writes JSON, which every RocketMQ client reads.

What real clients send (see docs/protocol.md): the C++ client ends its JSON header
with a newline and sends numbers in ``extFields``; a JS client sends
booleans. Any JSON scalar is accepted and kept as the string a Java server
would see (``true`` -> ``"true"``); every ``extFields`` value written is a
string.

``FrameDecoder`` cuts a byte stream into commands; a frame that lies about
its length, exceeds ``MAX_FRAME_BYTES`` or has a header that does not parse
raises ``FrameError``: the connection is beyond repair and is closed.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import orjson

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "MAX_FRAME_BYTES",
    "FrameDecoder",
    "FrameError",
    "HttpPeerError",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "decode_frame",
    "encode_frame",
]

MAX_FRAME_BYTES = 16 * 1024 * 1024  # Java's default cap (com.rocketmq.remoting.frameMaxLength)
FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2
SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
LANGUAGE = "PYTHON"

_I32 = struct.Struct(">i")
# how HTTP answers and requests begin: a remoting peer pointed at a REST port (or the
# other way round) reads these as an absurd frame length, and says what they are
_HTTP_STARTS = frozenset({b"HTTP", b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC"})
_PREFIX = struct.Struct(">ii")  # length, (serializeType << 24) | headerLength
_BIN_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag

# RocketMQ's LanguageCode, by ordinal (the binary header carries the ordinal)
_LANGUAGES = (
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO",
    "PHP", "OMS", "RUST", "NODE_JS",
)  # fmt: skip


class RequestCode(IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    GET_ALL_TOPIC_CONFIG = 21
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    RESET_CONSUMER_CLIENT_OFFSET = 220
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_BROKER_RUNTIME_INFO = 28
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    GET_CONSUME_STATS = 208
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    LITE_PULL_MESSAGE = 361
    # pymq's own: commit the batch halves of one (writer, batch) key at once (JSON body)
    COMMIT_TRANSACTION_BATCH = 40037


class ResponseCode(IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    CONSUMER_NOT_ONLINE = 206


class FrameError(ValueError):
    """Bytes that are not a remoting frame: the connection cannot be trusted further."""


class HttpPeerError(FrameError):
    """The peer speaks HTTP: an address that is a REST port, not a remoting one."""


@dataclass(slots=True)
class RemotingCommand:
    """One request or response. ``ext`` values are strings (what every client reads)."""

    code: int
    ext: dict[str, str] = field(default_factory=dict)
    body: bytes | memoryview = b""
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    language: str = LANGUAGE
    version: int = 0

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        ext: Mapping[str, str] | None = None,
        body: bytes | memoryview = b"",
        remark: str | None = None,
    ) -> RemotingCommand:
        """The answer to this request: same opaque, the response bit set."""
        return RemotingCommand(
            code, dict(ext) if ext else {}, body, self.opaque, FLAG_RESPONSE, remark
        )


def _as_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, int | float):
        return str(value)
    raise FrameError(f"extFields value {value!r} is not a scalar")


def encode_header(cmd: RemotingCommand) -> bytes:
    header: dict[str, Any] = {
        "code": int(cmd.code),
        "language": cmd.language,
        "version": cmd.version,
        "opaque": cmd.opaque,
        "flag": cmd.flag,
        "serializeTypeCurrentRPC": "JSON",
    }
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    if cmd.ext:
        header["extFields"] = cmd.ext
    return orjson.dumps(header)


def encode_frame(cmd: RemotingCommand) -> bytes:
    """The whole frame, length prefix included (JSON header)."""
    header = encode_header(cmd)
    body = cmd.body
    return b"".join((_PREFIX.pack(4 + len(header) + len(body), len(header)), header, body))


def frame_prefix(header_len: int, body_len: int) -> bytes:
    """The 8 bytes before a JSON header of ``header_len`` bytes and a body of ``body_len``:
    a large body can then be written as it is, without joining it to the header."""
    return _PREFIX.pack(4 + header_len + body_len, header_len)


def _decode_json_header(raw: memoryview) -> RemotingCommand:
    try:
        header = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise FrameError("header is not a JSON object")
    try:
        code = header["code"]
        opaque = header.get("opaque", 0)
        flag = header.get("flag", 0)
        version = header.get("version", 0)
    except KeyError:
        raise FrameError("header has no code") from None
    if not (type(code) is type(opaque) is type(flag) is type(version) is int):
        fields = (("code", code), ("opaque", opaque), ("flag", flag), ("version", version))
        for name, value in fields:
            if type(value) is not int:
                raise FrameError(f"header field {name} is not an integer: {value!r}")
    if not -(1 << 31) <= opaque < (1 << 31):
        raise FrameError(f"header field opaque is out of range: {opaque}")
    raw_ext = header.get("extFields") or {}
    if type(raw_ext) is not dict:
        raise FrameError("extFields is not a JSON object")
    # JSON keys are strings; values usually are too (every client sends them so), and then
    # the parsed object is the ext as it is
    for value in raw_ext.values():
        if type(value) is not str:
            ext = {k: _as_str(v) for k, v in raw_ext.items()}
            break
    else:
        ext = raw_ext
    remark = header.get("remark")
    language = header.get("language", "")
    return RemotingCommand(
        code,
        ext,
        b"",
        opaque,
        flag,
        None if remark is None else _as_str(remark),
        language if isinstance(language, str) else _as_str(language),
        version,
    )


def _decode_binary_header(raw: memoryview) -> RemotingCommand:
    n = len(raw)
    try:
        code, language, version, opaque, flag = _BIN_FIXED.unpack_from(raw, 0)
        pos = _BIN_FIXED.size
        (remark_len,) = _I32.unpack_from(raw, pos)
        pos += 4
        if remark_len < 0 or pos + remark_len > n:
            raise FrameError("binary header: remark length out of range")
        remark = bytes(raw[pos : pos + remark_len]).decode() if remark_len else None
        pos += remark_len
        (ext_len,) = _I32.unpack_from(raw, pos)
        pos += 4
        if ext_len < 0 or pos + ext_len != n:
            raise FrameError("binary header: extFields length does not match the header")
        ext: dict[str, str] = {}
        while pos < n:
            (key_len,) = struct.unpack_from(">h", raw, pos)
            pos += 2
            if key_len < 0 or pos + key_len > n:
                raise FrameError("binary header: key length out of range")
            key = bytes(raw[pos : pos + key_len]).decode()
            pos += key_len
            (value_len,) = _I32.unpack_from(raw, pos)
            pos += 4
            if value_len < 0 or pos + value_len > n:
                raise FrameError("binary header: value length out of range")
            ext[key] = bytes(raw[pos : pos + value_len]).decode()
            pos += value_len
    except struct.error:
        raise FrameError("binary header is cut short") from None
    except UnicodeDecodeError:
        raise FrameError("binary header holds text that is not UTF-8") from None
    lang = _LANGUAGES[language] if 0 <= language < len(_LANGUAGES) else "OTHER"
    return RemotingCommand(code, ext, b"", opaque, flag, remark, lang, version)


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """One frame without its 4-byte length prefix; FrameError if it is not one."""
    view = memoryview(frame)
    if len(view) < 4:
        raise FrameError("frame shorter than its header length field")
    (mark,) = _I32.unpack_from(view, 0)
    serialize = (mark >> 24) & 0xFF
    header_len = mark & 0xFFFFFF
    if header_len > len(view) - 4:
        raise FrameError(f"header length {header_len} exceeds the frame ({len(view) - 4} bytes)")
    raw = view[4 : 4 + header_len]
    if serialize == SERIALIZE_JSON:
        cmd = _decode_json_header(raw)
    elif serialize == SERIALIZE_ROCKETMQ:
        cmd = _decode_binary_header(raw)
    else:
        raise FrameError(f"unknown header serialization type {serialize}")
    if len(view) > 4 + header_len:
        cmd.body = bytes(view[4 + header_len :])
    return cmd


class FrameDecoder:
    """Cuts a byte stream into commands. ``feed`` returns the complete ones.

    A frame with a large body (``LARGE_BODY`` bytes or more: a pull answer of
    thousands of messages, a batch send) is not gathered in the buffer: once
    its header is in, the body's chunks are kept as they come and joined once
    (a frame of 2 MiB cost three copies and the buffer's growth before, about
    a fifth of a 10,000-message pull's client CPU). ``missing`` says how many
    bytes that frame still lacks, so a reader can ask for them in one go.
    """

    __slots__ = ("_buf", "_head", "_missing", "_parts", "max_frame_bytes")

    LARGE_BODY = 64 * 1024

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self.max_frame_bytes = max_frame_bytes
        self._head = b""  # the large frame's header part (its length prefix cut)
        self._parts: list[bytes] | None = None  # its body so far, while one is read
        self._missing = 0

    @property
    def buffered(self) -> int:
        held = len(self._buf)
        if self._parts is not None:
            held += 4 + len(self._head) + sum(len(p) for p in self._parts)
        return held

    @property
    def missing(self) -> int:
        """Bytes the large frame being read still lacks (0 when none is)."""
        return self._missing

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        out: list[RemotingCommand] = []
        if self._parts is not None:
            need = self._missing
            if len(data) < need:
                self._parts.append(bytes(data))
                self._missing = need - len(data)
                return out
            self._parts.append(bytes(data[:need]))
            data = data[need:]
            out.append(self._large_frame())
            if not data:
                return out
        buf = self._buf
        buf += data
        pos = 0
        end = len(buf)
        try:
            while end - pos >= 4:
                (length,) = _I32.unpack_from(buf, pos)
                if length < 4 or length > self.max_frame_bytes:
                    if bytes(buf[pos : pos + 4]) in _HTTP_STARTS:
                        raise HttpPeerError("the peer speaks HTTP, not RocketMQ remoting")
                    raise FrameError(f"frame length {length} is outside 4..{self.max_frame_bytes}")
                if end - pos - 4 < length:
                    if length > self.LARGE_BODY and self._start_large(buf, pos, end, length):
                        pos = end
                    break
                with memoryview(buf) as view:
                    out.append(decode_frame(view[pos + 4 : pos + 4 + length]))
                pos += 4 + length
        except BaseException:
            # the stream is beyond repair; the error's traceback still holds views of
            # the buffer, so it is replaced, not resized (BufferError otherwise)
            self._buf = bytearray()
            self._parts, self._missing = None, 0
            raise
        if pos:
            del buf[:pos]
        return out

    def _start_large(self, buf: bytearray, pos: int, end: int, length: int) -> bool:
        """Whether the incomplete frame at ``pos`` has its whole header in and a large
        body: then its header and body so far leave the buffer."""
        if end - pos < 8:
            return False
        body_at = pos + 8 + (_I32.unpack_from(buf, pos + 4)[0] & 0xFFFFFF)
        if body_at > pos + 4 + length or end < body_at:  # a lying header: decode_frame's to say
            return False
        self._head = bytes(buf[pos + 4 : body_at])
        self._parts = [bytes(buf[body_at:end])]
        self._missing = pos + 4 + length - end
        return True

    def _large_frame(self) -> RemotingCommand:
        parts, self._parts, self._missing = self._parts, None, 0
        assert parts is not None
        head, self._head = self._head, b""
        cmd = decode_frame(head)
        cmd.body = parts[0] if len(parts) == 1 else b"".join(parts)
        return cmd


# SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE carry SendMessageRequestHeader's fields under one
# letter each (RocketMQ's SendMessageRequestHeaderV2)
SEND_V2_FIELDS = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "brokerName",
}
SEND_V2_LETTERS = {name: letter for letter, name in SEND_V2_FIELDS.items()}


def long_send_fields(ext: Mapping[str, str]) -> dict[str, str]:
    """A V2 send header's fields under their long names (others kept as they are)."""
    return {SEND_V2_FIELDS.get(k, k): v for k, v in ext.items()}
