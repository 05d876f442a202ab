"""Bad and edge-case input on the remoting port of a REAL broker process (with a real
NameServer), spoken through raw sockets with the frame codec: a frame that is not one
closes that connection only; a bad request is answered with an error and stores nothing;
oneway requests are never answered; pulls outside the queue answer as RocketMQ's do; and
what a RocketMQ client sends is stored and pulled back byte for byte. Every wait is
bounded by a socket timeout."""

from __future__ import annotations

import contextlib
import itertools
import re
import socket
import struct
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest

from connector.local.process import ServerProcess
from connector.protocol.batch import encode_batch
from connector.protocol.message import MessageExt
from connector.protocol.msgid import decode_offset_msg_id
from connector.protocol.properties import encode_properties
from connector.protocol.record import decode_record
from connector.protocol.remoting import (
    FLAG_ONEWAY,
    MAX_FRAME_BYTES,
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    encode_frame,
)
from connector.protocol.wire import split_records
from tests.support.processes import Servers

WAIT_S = 10.0
QUEUES = 4
_topics = itertools.count()


class Wire:
    """One raw connection: frames out with ``encode_frame``, in through ``FrameDecoder``."""

    def __init__(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT_S)
        self.decoder = FrameDecoder()
        self.inbox: list[RemotingCommand] = []
        self.seen: list[int] = []  # the opaque of every frame read
        self.opaques = itertools.count(1)

    def close(self) -> None:
        self.sock.close()

    def send(self, cmd: RemotingCommand) -> int:
        cmd.opaque = next(self.opaques)
        self.sock.sendall(encode_frame(cmd))
        return cmd.opaque

    def read(self) -> RemotingCommand:
        """The next frame from the broker (socket.timeout after WAIT_S: the test fails)."""
        while not self.inbox:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self.inbox += self.decoder.feed(data)
        cmd = self.inbox.pop(0)
        self.seen.append(cmd.opaque)
        return cmd

    def call(self, cmd: RemotingCommand) -> RemotingCommand:
        opaque = self.send(cmd)
        resp = self.read()
        assert resp.is_response and resp.opaque == opaque, (resp, opaque)
        return resp

    def closed_by_server(self, timeout_s: float = WAIT_S) -> bool:
        """Does the server close this connection (recv gives b"") within ``timeout_s``?"""
        self.sock.settimeout(timeout_s)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            data = self.sock.recv(65536)
            if not data:
                return True
            self.inbox += self.decoder.feed(data)
        return False

    def max_offset(self, topic: str, queue_id: int) -> int:
        resp = self.call(
            RemotingCommand(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
        )
        assert resp.code == ResponseCode.SUCCESS, resp
        return int(resp.ext["offset"])

    def max_offsets(self, topic: str) -> list[int]:
        return [self.max_offset(topic, q) for q in range(QUEUES)]

    def pull(self, topic: str, queue_id: int, offset: int, **ext: str) -> RemotingCommand:
        fields = {
            "consumerGroup": "CID_bad_input",
            "topic": topic,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": "32",
            "sysFlag": "0",
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
            **ext,
        }
        return self.call(RemotingCommand(RequestCode.PULL_MESSAGE, fields))


def raw_frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return (
        struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header))
        + header
        + body
    )


@pytest.fixture(scope="module")
def processes(module_servers: Servers) -> tuple[str, ServerProcess]:
    """One NameServer and one broker registered with it: the NameServer's address and
    the broker."""
    ns = module_servers.namesrv()
    return ns.addr, module_servers.broker(namesrv=ns.addr)


@pytest.fixture(scope="module")
def addrs(processes: tuple[str, ServerProcess]) -> tuple[str, str]:
    """(NameServer, broker) remoting addresses."""
    return processes[0], processes[1].addr


def pull_counts(processes: tuple[str, ServerProcess]) -> dict[str, float]:
    """The broker's ``pymq_pull_requests_total`` by status (its REST /metrics)."""
    text = httpx.get(f"http://{processes[1].http_addr}/metrics", timeout=WAIT_S).text
    found = re.findall(r'^pymq_pull_requests_total\{status="(\w+)"\} (\S+)$', text, re.M)
    return {status: float(value) for status, value in found}


@pytest.fixture(scope="module")
def broker(addrs: tuple[str, str]) -> str:
    return addrs[1]


@pytest.fixture(scope="module")
def namesrv(addrs: tuple[str, str]) -> str:
    return addrs[0]


@pytest.fixture
def wire(broker: str) -> Iterator[Wire]:
    w = Wire(broker)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def topic(wire: Wire) -> str:
    """A fresh topic of QUEUES queues, created over remoting (UPDATE_AND_CREATE_TOPIC)."""
    name = f"BadInput{next(_topics)}"
    resp = wire.call(
        RemotingCommand(
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {"topic": name, "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES)},
        )
    )
    assert resp.code == ResponseCode.SUCCESS, resp
    assert wire.max_offsets(name) == [0] * QUEUES
    return name


def send_v2(
    topic: str, body: bytes, *, queue_id: int = 0, props: bytes = b"", **ext: str
) -> RemotingCommand:
    fields = {
        "a": "PID_bad_input",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": props.decode(),
        "j": "0",
        "k": "false",
        "m": "false",
        **ext,
    }
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, fields, body)


def stored(wire: Wire, topic: str, queue_id: int, offset: int) -> tuple[bytes, MessageExt]:
    """The one record a pull from ``offset`` returns first: its raw bytes and decoded."""
    resp = wire.pull(topic, queue_id, offset, maxMsgNums="1")
    assert resp.code == ResponseCode.SUCCESS, resp
    assert int(resp.ext["nextBeginOffset"]) == offset + 1
    (record,) = split_records(bytes(resp.body))
    return record, decode_record(record)


# -- frames that are not frames ----------------------------------------------------------------

BAD_FRAMES = {
    "length-zero": struct.pack(">i", 0),
    "length-negative": struct.pack(">i", -5) + b"garbage",
    "length-below-4": struct.pack(">i", 3) + b"abc",
    "length-over-16MiB": struct.pack(">ii", MAX_FRAME_BYTES + 1, 2) + b"{}",
    "length-2GiB": struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 64,
    "header-not-json": raw_frame(b"this is not json"),
    "header-not-utf8": raw_frame(b"\xff\xfe\xfd"),
    "header-json-array": raw_frame(b'[105, "JAVA"]'),
    "header-json-string": raw_frame(b'"GET_ROUTEINFO_BY_TOPIC"'),
    "header-length-beyond-frame": struct.pack(">ii", 4 + 2, 500) + b"{}",
    "code-not-integer": raw_frame(b'{"code": "30", "opaque": 1}'),
    "opaque-not-integer": raw_frame(b'{"code": 30, "opaque": "one"}'),
    "ext-not-object": raw_frame(b'{"code": 30, "opaque": 1, "extFields": "topic=T"}'),
    "unknown-serialize-type": raw_frame(b'{"code": 30}', serialize_type=7),
    "binary-header-cut-short": raw_frame(b"\x00\x1e\x00", serialize_type=1),
    "good-frame-then-garbage": encode_frame(RemotingCommand(9999, opaque=1))
    + raw_frame(b"not json either"),
}


@pytest.mark.parametrize("bad", list(BAD_FRAMES.values()), ids=list(BAD_FRAMES))
def test_a_bad_frame_closes_only_its_connection(broker: str, bad: bytes) -> None:
    keeper = Wire(broker)  # opened before: must keep being served
    victim = Wire(broker)
    try:
        keeper.max_offset("TBW102", 0)
        victim.sock.sendall(bad)
        assert victim.closed_by_server(), "the broker kept a connection that sent garbage"
        assert keeper.max_offset("TBW102", 0) >= 0
        fresh = Wire(broker)
        try:
            assert fresh.max_offset("TBW102", 0) >= 0
        finally:
            fresh.close()
    finally:
        keeper.close()
        victim.close()


def cluster_info(w: Wire) -> dict[str, object]:
    resp = w.call(RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO))
    assert resp.code == ResponseCode.SUCCESS, resp
    info: dict[str, object] = orjson.loads(resp.body)
    return info


@pytest.mark.parametrize(
    "case", ["length-over-16MiB", "length-below-4", "header-not-json", "good-frame-then-garbage"]
)
def test_a_bad_frame_closes_only_its_namesrv_connection(namesrv: str, case: str) -> None:
    keeper = Wire(namesrv)
    victim = Wire(namesrv)
    try:
        assert "brokerAddrTable" in cluster_info(keeper)
        victim.sock.sendall(BAD_FRAMES[case])
        assert victim.closed_by_server(), "the NameServer kept a connection that sent garbage"
        assert "brokerAddrTable" in cluster_info(keeper)
        unknown = keeper.call(RemotingCommand(RequestCode.SEND_MESSAGE_V2))
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    finally:
        keeper.close()
        victim.close()


def test_a_frame_really_over_16_mib_closes_the_connection(broker: str) -> None:
    keeper = Wire(broker)
    victim = Wire(broker)
    try:
        keeper.max_offset("TBW102", 0)
        header = b'{"code": 310, "opaque": 1}'
        frame = raw_frame(header, b"x" * (MAX_FRAME_BYTES + 1024 - len(header) - 4))
        # the broker may close while we are still writing: refused either way
        with contextlib.suppress(OSError):
            victim.sock.sendall(frame)
        try:
            closed = victim.closed_by_server()
        except ConnectionResetError:  # closed with our bytes unread: an RST instead of a FIN
            closed = True
        assert closed
        assert keeper.max_offset("TBW102", 0) >= 0
    finally:
        keeper.close()
        victim.close()


# -- requests the broker refuses -------------------------------------------------------------


@pytest.mark.parametrize("code", [9999, RequestCode.GET_ROUTEINFO_BY_TOPIC, -1])
def test_unknown_code_is_not_supported_and_the_connection_stays(wire: Wire, code: int) -> None:
    resp = wire.call(RemotingCommand(code, {"topic": "T"}, b"body"))
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert str(code) in (resp.remark or "")
    assert wire.max_offset("TBW102", 0) >= 0  # same connection, still served


@pytest.mark.parametrize(
    ("ext", "field"),
    [
        pytest.param({"b": None}, "topic", id="missing-topic"),
        pytest.param({"e": "one"}, "queueId", id="queueId-not-a-number"),
        pytest.param({"e": "1.5"}, "queueId", id="queueId-float"),
        pytest.param({"f": "0x1"}, "sysFlag", id="sysFlag-not-a-number"),
        pytest.param({"g": "yesterday"}, "bornTimestamp", id="bornTimestamp-not-a-number"),
        pytest.param({"h": "[]"}, "flag", id="flag-not-a-number"),
        pytest.param({"e": str(QUEUES + 3)}, "queue", id="queueId-out-of-range"),
    ],
)
def test_bad_send_v2_fields_are_refused_and_store_nothing(
    wire: Wire, topic: str, ext: dict[str, str | None], field: str
) -> None:
    cmd = send_v2(topic, b"must not be stored")
    for key, value in ext.items():
        if value is None:
            del cmd.ext[key]
        else:
            cmd.ext[key] = value
    resp = wire.call(cmd)
    assert resp.code != ResponseCode.SUCCESS, resp
    assert field in (resp.remark or ""), resp.remark
    assert wire.max_offsets(topic) == [0] * QUEUES
    assert wire.call(send_v2(topic, b"a good one")).code == ResponseCode.SUCCESS  # still served


@pytest.mark.parametrize(
    ("body", "props", "code"),
    [
        pytest.param(b"", b"", ResponseCode.MESSAGE_ILLEGAL, id="empty-body"),
        pytest.param(b"x", b"TAGS-without-separators", ResponseCode.MESSAGE_ILLEGAL, id="props"),
    ],
)
def test_bad_send_v2_messages_are_illegal_and_store_nothing(
    wire: Wire, topic: str, body: bytes, props: bytes, code: int
) -> None:
    resp = wire.call(send_v2(topic, body, props=props))
    assert resp.code == code, resp
    assert wire.max_offsets(topic) == [0] * QUEUES


def valid_batch() -> bytes:
    props = encode_properties({"TAGS": "t"})
    return encode_batch([(b"first", 0, props), (b"second", 0, props), (b"third", 0, props)])


BAD_BATCHES = {
    "garbage": b"this is not a batch at all",
    "empty": b"",
    "cut-short": valid_batch()[:-3],
    "trailing-bytes": valid_batch() + b"\x00\x00",
    "total-size-lies": struct.pack(">i", 1 << 20) + valid_batch()[4:],
    "body-length-lies": valid_batch()[:16] + struct.pack(">i", 1 << 20) + valid_batch()[20:],
    "negative-total-size": struct.pack(">i", -1) + valid_batch()[4:],
}


@pytest.mark.parametrize("body", list(BAD_BATCHES.values()), ids=list(BAD_BATCHES))
def test_bad_batch_is_message_illegal_and_stores_nothing(
    wire: Wire, topic: str, body: bytes
) -> None:
    cmd = send_v2(topic, body, m="true")
    cmd.code = RequestCode.SEND_BATCH_MESSAGE
    resp = wire.call(cmd)
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL, resp
    assert wire.max_offsets(topic) == [0] * QUEUES
    # the same request with the batch it was cut from is stored whole
    cmd = send_v2(topic, valid_batch(), m="true")
    cmd.code = RequestCode.SEND_BATCH_MESSAGE
    resp = wire.call(cmd)
    assert resp.code == ResponseCode.SUCCESS, resp
    assert wire.max_offset(topic, 0) == 3


# -- oneway --------------------------------------------------------------------------------------


def oneway(cmd: RemotingCommand) -> RemotingCommand:
    cmd.flag |= FLAG_ONEWAY
    return cmd


def test_oneway_requests_get_no_answer(wire: Wire, topic: str) -> None:
    quiet = [
        wire.send(
            oneway(RemotingCommand(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"}))
        ),
        wire.send(oneway(RemotingCommand(9999))),  # not supported: still no answer
        wire.send(oneway(send_v2(topic, b"x", e="not a number"))),  # an error: no answer
        wire.send(oneway(send_v2(topic, b"oneway message", queue_id=1))),  # stored, no answer
    ]
    # the answers to later requests come, and nothing for the oneway ones before them
    deadline = time.monotonic() + WAIT_S
    while wire.max_offset(topic, 1) != 1:
        assert time.monotonic() < deadline, "the oneway send was not stored"
    assert wire.max_offsets(topic) == [0, 1, 0, 0]
    assert wire.call(RemotingCommand(9999)).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert wire.inbox == []
    assert not set(quiet) & set(wire.seen)


# -- pulls outside the queue -------------------------------------------------------------------


def test_pull_at_and_beyond_the_end(wire: Wire, topic: str) -> None:
    for i in range(3):
        assert wire.call(send_v2(topic, f"m{i}".encode(), queue_id=2)).code == 0
    assert wire.max_offset(topic, 2) == 3

    at_end = wire.pull(topic, 2, 3)
    assert at_end.code == ResponseCode.PULL_NOT_FOUND, at_end
    assert at_end.ext["nextBeginOffset"] == "3" and at_end.ext["maxOffset"] == "3"
    assert at_end.ext["minOffset"] == "0" and at_end.ext["suggestWhichBrokerId"] == "0"
    assert not at_end.body

    beyond = wire.pull(topic, 2, 10)
    assert beyond.code == ResponseCode.PULL_OFFSET_MOVED, beyond
    assert beyond.ext["nextBeginOffset"] == "3"  # corrected: where the queue ends
    assert beyond.ext["maxOffset"] == "3" and beyond.ext["minOffset"] == "0"
    assert not beyond.body

    # from the corrected offset the consumer waits for new messages; the old ones are there
    assert wire.pull(topic, 2, int(beyond.ext["nextBeginOffset"])).code == 19
    found = wire.pull(topic, 2, 0)
    assert found.code == ResponseCode.SUCCESS
    assert [decode_record(r).body for r in split_records(bytes(found.body))] == [
        b"m0",
        b"m1",
        b"m2",
    ]
    assert found.ext["nextBeginOffset"] == "3"


def test_pull_of_an_empty_queue(wire: Wire, topic: str) -> None:
    resp = wire.pull(topic, 3, 0)
    assert resp.code == ResponseCode.PULL_NOT_FOUND, resp
    assert resp.ext["nextBeginOffset"] == "0"
    moved = wire.pull(topic, 3, 5)
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED, moved
    assert moved.ext["nextBeginOffset"] == "0"


def test_pull_with_a_negative_offset_is_moved_to_the_start(wire: Wire, topic: str) -> None:
    for i in range(2):
        assert wire.call(send_v2(topic, f"n{i}".encode(), queue_id=1)).code == 0
    resp = wire.pull(topic, 1, -1)
    assert resp.code == ResponseCode.PULL_OFFSET_MOVED, resp
    assert resp.ext["nextBeginOffset"] == "0"
    assert resp.ext["minOffset"] == "0" and resp.ext["maxOffset"] == "2"


def test_a_held_pull_is_answered_before_the_send_that_wakes_it(
    processes: tuple[str, ServerProcess], wire: Wire, topic: str
) -> None:
    """The held pull is answered from inside the append (one connection: frame order),
    and counted once, as FOUND."""
    before = pull_counts(processes)
    held = wire.send(
        RemotingCommand(
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": "CID_bad_input",
                "topic": topic,
                "queueId": "0",
                "queueOffset": "0",
                "maxMsgNums": "32",
                "sysFlag": "2",  # suspend
                "suspendTimeoutMillis": "5000",
                "subscription": "*",
            },
        )
    )
    wire.max_offset(topic, 0)  # answered while the pull is held: it is parked
    sent = wire.send(send_v2(topic, b"wake", queue_id=0))
    first, second = wire.read(), wire.read()
    assert (first.opaque, second.opaque) == (held, sent)
    assert first.code == ResponseCode.SUCCESS and second.code == ResponseCode.SUCCESS
    assert [decode_record(r).body for r in split_records(bytes(first.body))] == [b"wake"]
    after = pull_counts(processes)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in set(after) | set(before)}
    assert {k: v for k, v in delta.items() if v} == {"FOUND": 1}


def test_a_connection_closed_with_a_pull_held_leaves_the_queue_working(
    broker: str, wire: Wire, topic: str
) -> None:
    gone = Wire(broker)
    gone.send(
        RemotingCommand(
            RequestCode.PULL_MESSAGE,
            {
                "topic": topic,
                "queueId": "1",
                "queueOffset": "0",
                "maxMsgNums": "32",
                "sysFlag": "2",
                "suspendTimeoutMillis": "5000",
            },
        )
    )
    gone.max_offset(topic, 1)  # the pull is held
    gone.close()
    assert wire.call(send_v2(topic, b"after", queue_id=1)).code == ResponseCode.SUCCESS
    assert [decode_record(r).body for r in split_records(bytes(wire.pull(topic, 1, 0).body))] == [
        b"after"
    ]


def test_bad_pull_fields(wire: Wire, topic: str) -> None:
    resp = wire.pull(topic, 0, 0, queueOffset="zero")
    assert resp.code != ResponseCode.SUCCESS and "queueOffset" in (resp.remark or "")
    resp = wire.pull(topic, QUEUES + 1, 0)
    assert resp.code != ResponseCode.SUCCESS and "queue" in (resp.remark or "")
    resp = wire.pull("NoSuchTopicHere", 0, 0)
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST, resp


# -- what real clients send is stored byte for byte ----------------------------------------------

BODY = bytes(range(256)) * 3 + b"\x00\n\r\x01\x02 end"


def test_send_message_cpp_style_is_pulled_back_byte_for_byte(wire: Wire, topic: str) -> None:
    born = int(time.time() * 1000) - 5000
    props = "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x017F000001ABCD\x02WAIT\x01true\x02"
    # SEND_MESSAGE (10) as the C++ client writes it: long names, JSON numbers and
    # booleans in extFields, and a newline after the header
    header = (
        orjson.dumps(
            {
                "code": 10,
                "language": "CPP",
                "version": 0,
                "opaque": 41,
                "flag": 0,
                "remark": "",
                "extFields": {
                    "AccessKey": "",
                    "OnsChannel": "ALIYUN",
                    "Signature": "",
                    "producerGroup": "PID_cpp",
                    "topic": topic,
                    "defaultTopic": "TBW102",
                    "defaultTopicQueueNums": 4,
                    "queueId": 2,
                    "sysFlag": 0,
                    "bornTimestamp": born,
                    "flag": 7,
                    "properties": props,
                    "reconsumeTimes": 0,
                    "unitMode": False,
                    "batch": False,
                    "maxReconsumeTimes": 16,
                },
            }
        )
        + b"\n"
    )
    wire.sock.sendall(raw_frame(header, BODY))
    resp = wire.read()
    assert resp.opaque == 41 and resp.code == ResponseCode.SUCCESS, resp
    assert resp.ext["queueId"] == "2" and resp.ext["queueOffset"] == "0"
    _, commit_log_offset = decode_offset_msg_id(resp.ext["msgId"])

    record, msg = stored(wire, topic, 2, 0)
    assert msg.body == BODY
    assert msg.topic == topic and msg.queue_id == 2 and msg.queue_offset == 0
    assert msg.flag == 7 and msg.sys_flag == 0 and msg.born_timestamp == born
    assert msg.commit_log_offset == commit_log_offset
    assert msg.properties["TAGS"] == "TagA" and msg.properties["KEYS"] == "k1 k2"
    assert msg.properties["UNIQ_KEY"] == "7F000001ABCD"

    # the record a pull returns is the stored one (VIEW_MESSAGE_BY_ID reads it by offset)
    view = wire.call(
        RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(commit_log_offset)})
    )
    assert view.code == ResponseCode.SUCCESS and bytes(view.body) == record


def test_send_message_v2_is_pulled_back_byte_for_byte(wire: Wire, topic: str) -> None:
    props = encode_properties({"TAGS": "TagB", "KEYS": "order-1", "custom": "välue"})
    offsets = []
    for i in range(3):
        resp = wire.call(send_v2(topic, BODY + bytes([i]), queue_id=1, props=props, h=str(i)))
        assert resp.code == ResponseCode.SUCCESS, resp
        assert resp.ext["queueId"] == "1" and resp.ext["queueOffset"] == str(i)
        offsets.append(decode_offset_msg_id(resp.ext["msgId"])[1])
    assert offsets == sorted(offsets)

    pulled = wire.pull(topic, 1, 0)
    assert pulled.code == ResponseCode.SUCCESS, pulled
    assert pulled.ext["nextBeginOffset"] == "3" and pulled.ext["maxOffset"] == "3"
    msgs = [decode_record(r) for r in split_records(bytes(pulled.body))]
    assert [m.body for m in msgs] == [BODY + bytes([i]) for i in range(3)]
    assert [m.queue_offset for m in msgs] == [0, 1, 2]
    assert [m.flag for m in msgs] == [0, 1, 2]
    assert [m.commit_log_offset for m in msgs] == offsets
    for m in msgs:
        assert m.topic == topic and m.queue_id == 1
        assert m.properties["TAGS"] == "TagB" and m.properties["custom"] == "välue"
    assert wire.max_offsets(topic) == [0, 3, 0, 0]
