"""Consumer groups over remoting, against a real broker: HEART_BEAT records each group's
live clients, GET_CONSUMER_LIST_BY_GROUP lists them, and every member is told
(NOTIFY_CONSUMER_IDS_CHANGED, a request from the broker on the member's own connection)
when one joins, unregisters or its connection closes. Every wait is bounded."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterator

import orjson
import pytest

from connector.client.connection import RemotingConnection
from connector.protocol.remoting import RemotingCommand, RequestCode, ResponseCode
from tests.support.processes import Servers
from tests.support.waits import wait_until

GROUP = "CID_remoting_members"
WAIT_S = 5.0


class Member:
    """A consumer of ``group`` on a connection of its own, recording what the broker asks."""

    def __init__(self, addr: str, client_id: str, group: str = GROUP) -> None:
        self.client_id = client_id
        self.group = group
        self.asked: queue.Queue[RemotingCommand] = queue.Queue()
        self.conn = RemotingConnection(addr, on_request=lambda _c, cmd: self.asked.put(cmd))

    def heartbeat(self) -> RemotingCommand:
        body = {
            "clientID": self.client_id,
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": self.group,
                    "consumeType": 1,  # numbers, as the C++ client sends the enums
                    "messageModel": 1,
                    "consumeFromWhere": 0,
                    "subscriptionDataSet": [{"topic": "T", "subString": "A || B"}],
                    "unitMode": False,
                }
            ],
        }
        cmd = RemotingCommand(RequestCode.HEART_BEAT, body=orjson.dumps(body))
        return self.conn.invoke(cmd, WAIT_S)

    def members(self) -> list[str]:
        cmd = RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group})
        resp = self.conn.invoke(cmd, WAIT_S)
        if resp.code != ResponseCode.SUCCESS:
            return []
        return list(orjson.loads(resp.body)["consumerIdList"])

    def notified(self) -> RemotingCommand:
        deadline = time.monotonic() + WAIT_S
        while True:
            cmd = self.asked.get(timeout=max(0.0, deadline - time.monotonic()))
            if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
                return cmd

    def quiet(self) -> bool:
        return self.asked.empty()


@pytest.fixture
def broker_addr(servers: Servers) -> Iterator[str]:
    yield servers.broker().addr


def test_members_are_listed_and_told_when_the_group_changes(broker_addr: str) -> None:
    a = Member(broker_addr, "client-a")
    b = Member(broker_addr, "client-b")
    try:
        assert a.heartbeat().code == ResponseCode.SUCCESS
        assert a.notified().ext == {"consumerGroup": GROUP}  # joining changes the group
        assert a.members() == ["client-a"]

        assert b.heartbeat().code == ResponseCode.SUCCESS
        a.notified()
        b.notified()
        assert a.members() == b.members() == ["client-a", "client-b"]

        a.heartbeat()  # a heartbeat of a known member changes nothing
        assert b.members() == ["client-a", "client-b"]

        resp = b.conn.invoke(
            RemotingCommand(
                RequestCode.UNREGISTER_CLIENT, {"clientID": "client-b", "consumerGroup": GROUP}
            ),
            WAIT_S,
        )
        assert resp.code == ResponseCode.SUCCESS
        a.notified()
        assert a.members() == ["client-a"]

        b.heartbeat()  # back in
        a.notified()
        b.conn.close()  # its connection closes: it leaves at once
        a.notified()
        assert a.members() == ["client-a"]
    finally:
        a.conn.close()
        b.conn.close()


def test_an_empty_group_has_no_consumer_list(broker_addr: str) -> None:
    m = Member(broker_addr, "lonely")
    try:
        assert m.members() == []
        resp = m.conn.invoke(RemotingCommand(RequestCode.HEART_BEAT, body=b"not json"), WAIT_S)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "JSON" in (resp.remark or "")
        assert m.members() == []
    finally:
        m.conn.close()


def test_a_consumer_groups_heartbeat_creates_its_retry_topic_and_the_namesrv_routes_it(
    servers: Servers,
) -> None:
    """As RocketMQ's broker: push consumers subscribe to ``%RETRY%group`` as they start
    and look up its route at once, before any message was sent back."""
    namesrv = servers.namesrv()
    broker = servers.broker(namesrv=namesrv.addr)
    lookup = RemotingConnection(namesrv.addr)
    m = Member(broker.addr, "client-retry")

    def route() -> int:
        cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": f"%RETRY%{GROUP}"})
        return lookup.invoke(cmd, WAIT_S).code

    try:
        assert route() == ResponseCode.TOPIC_NOT_EXIST
        assert m.heartbeat().code == ResponseCode.SUCCESS
        wait_until(lambda: route() == ResponseCode.SUCCESS, WAIT_S, what="the retry topic routed")
    finally:
        m.conn.close()
        lookup.close()


def test_a_group_named_too_long_for_a_retry_topic_still_joins(broker_addr: str) -> None:
    """127 characters is a legal group name, but ``%RETRY%`` + it is no legal topic name:
    the heartbeat registers the member all the same, without a retry topic."""
    m = Member(broker_addr, "client-long", group="G" * 127)
    try:
        assert m.heartbeat().code == ResponseCode.SUCCESS
        assert m.members() == ["client-long"]
    finally:
        m.conn.close()


def test_connections_and_settings_over_remoting(broker_addr: str) -> None:
    """GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204),
    GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25), as RocketMQ's mqadmin asks."""
    m = Member(broker_addr, "10.1.1.1@conns", group="CID_conns")
    try:
        assert m.heartbeat().code == ResponseCode.SUCCESS
        ask = RemotingCommand(
            RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CID_conns"}
        )
        resp = m.conn.invoke(ask, WAIT_S)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        body = orjson.loads(resp.body)
        (conn,) = body["connectionSet"]
        assert conn["clientId"] == "10.1.1.1@conns" and conn["clientAddr"].startswith("127.0.0.1:")
        assert body["subscriptionTable"]["T"]["subString"] == "A || B"
        nobody = RemotingCommand(
            RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "none"}
        )
        assert m.conn.invoke(nobody, WAIT_S).code == ResponseCode.CONSUMER_NOT_ONLINE
        producers = RemotingCommand(
            RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "p"}
        )
        resp = m.conn.invoke(producers, WAIT_S)
        assert orjson.loads(resp.body) == {"connectionSet": []}

        resp = m.conn.invoke(RemotingCommand(RequestCode.GET_BROKER_CONFIG), WAIT_S)
        lines = bytes(resp.body).decode().splitlines()
        assert "max_reconsume_times=16" in lines
        update = RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=b"max_reconsume_times=5\n")
        assert m.conn.invoke(update, WAIT_S).code == ResponseCode.SUCCESS
        resp = m.conn.invoke(RemotingCommand(RequestCode.GET_BROKER_CONFIG), WAIT_S)
        assert "max_reconsume_times=5" in bytes(resp.body).decode().splitlines()
        refused = RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=b"store_dir=/x\n")
        resp = m.conn.invoke(refused, WAIT_S)
        assert resp.code != ResponseCode.SUCCESS and "read at start only" in (resp.remark or "")
    finally:
        m.conn.close()
