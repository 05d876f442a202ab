"""The ACL file, address patterns, the decision and the signatures, without servers."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest

from connector.errors import AuthenticationFailedError, ConfigError, NoPermissionError
from connector.protocol.acl import Credentials, sign_remoting, signed_content
from connector.protocol.remoting import RemotingCommand, RequestCode
from connector.server.acl import AclService
from connector.server.acl.addresses import AddressPattern
from connector.server.acl.model import PUB, SUB, Needs, refusal
from connector.server.acl.plain import parse_plain_acl
from connector.server.acl.remoting import remoting_needs
from tests.support.clocks import FakeClock

ROCKETMQ_SAMPLE = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def test_rocketmqs_sample_file_reads_as_rocketmq_means_it() -> None:
    rules = parse_plain_acl(ROCKETMQ_SAMPLE)
    user, admin = rules.accounts["RocketMQ"], rules.accounts["rocketmq2"]
    assert user.secret_key == "12345678"  # a YAML number, read as the text it is
    assert "12345678" not in repr(user)
    assert rules.trusted("10.10.103.7") and not rules.trusted("10.10.104.7")
    assert admin.trusted_from("192.168.1.9") and not user.trusted_from("192.168.1.9")
    assert refusal(user, Needs.of(("topic", "topicB", PUB))) is None
    assert refusal(user, Needs.of(("topic", "topicC", PUB))) is not None
    assert refusal(user, Needs.of(("topic", "topicA", SUB))) is not None  # DENY
    assert refusal(user, Needs.of(("topic", "other", SUB))) is not None  # default DENY
    assert refusal(user, Needs.of(("group", "other", SUB))) is None  # default SUB
    assert refusal(user, Needs.of(("group", "groupA", SUB))) is not None
    assert refusal(user, Needs(admin=True)) is not None
    assert refusal(admin, Needs(admin=True)) is None
    assert refusal(admin, Needs.of(("topic", "anything", PUB))) is None


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("accounts: [{accessKey: abcdefg, secretKey: short}]", "at least 6"),
        ("accounts: [{secretKey: abcdefgh}]", "accessKey is missing"),
        ("accounts: [{accessKey: abcdefg, secretKey: abcdefgh, defaultTopicPerm: ALL}]",
         "is not DENY, PUB, SUB or PUB|SUB"),
        ("accounts: [{accessKey: abcdefg, secretKey: abcdefgh, topicPerms: [T]}]",
         "is not NAME=PERM"),
        ("accounts: [{accessKey: abcdefg, secretKey: abcdefgh, admin: yes please}]",
         "true or false"),
        ("accounts: [{accessKey: abcdefg, secretKey: abcdefgh, colour: red}]", "unknown fields"),
        ("accounts:\n - {accessKey: abcdefg, secretKey: abcdefgh}\n"
         " - {accessKey: abcdefg, secretKey: abcdefgh}", "appears twice"),
        ("globalWhiteRemoteAddresses: ['300.1.1.1']", "above 255"),
        ("globalWhiteRemoteAddresses: ['10.1']", "white list entry"),
        ("accounts: [", "is not YAML"),
        ("- just a list", "expected a mapping"),
    ],
)  # fmt: skip
def test_a_bad_file_is_refused_with_where(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_plain_acl(text)


def test_address_patterns() -> None:
    cases = {
        "*": ("1.2.3.4", None),
        "192.168.0.{1,2}": ("192.168.0.2", "192.168.0.3"),
        "192.168.*.*": ("192.168.77.1", "192.169.0.1"),
        "192.168.1.10-20": ("192.168.1.15", "192.168.1.21"),
        "10.0.0.0/8": ("10.200.0.1", "11.0.0.1"),
        "::1": ("::1", "127.0.0.1"),
    }
    for text, (yes, no) in cases.items():
        pattern = AddressPattern(text)
        assert pattern.matches(yes), (text, yes)
        assert no is None or not pattern.matches(no), (text, no)
    assert AddressPattern("127.0.0.1").matches("::ffff:127.0.0.1")


def test_the_remoting_signature_is_rocketmqs() -> None:
    """Base64 HMAC-SHA1 over the ext values sorted by key (Signature left out), then the
    body: computed here by hand, as RocketMQ's AclUtils does."""
    ext = {"topic": "T", "queueId": "3", "producerGroup": "PG"}
    body = b"hello"
    sign_remoting(ext, body, Credentials("AK123456", "SK123456"))
    content = b"AK123456" + b"PG" + b"3" + b"T" + body  # AccessKey, producerGroup, queueId, topic
    expected = base64.b64encode(hmac.new(b"SK123456", content, hashlib.sha1).digest()).decode()
    assert ext["Signature"] == expected
    assert signed_content(ext, body) == content
    # RocketMQ's broker leaves _UNIQUE_KEY_QUERY out too; one field alone, or none
    assert signed_content({**ext, "_UNIQUE_KEY_QUERY": "true"}, body) == content
    assert signed_content({"Signature": "s", "x": "1"}, b"") == b"1"
    assert signed_content({}, b"b") == b"b"


def test_what_requests_need() -> None:
    send = RemotingCommand(RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "PG"})
    assert remoting_needs(send) == Needs.of(("topic", "T", PUB))
    back = RemotingCommand(RequestCode.SEND_MESSAGE, {"topic": "%RETRY%G1"})
    assert remoting_needs(back) == Needs.of(("group", "G1", SUB))
    pull = RemotingCommand(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"})
    assert remoting_needs(pull) == Needs.of(("topic", "T", SUB), ("group", "G", SUB))
    beat = RemotingCommand(
        RequestCode.HEART_BEAT,
        body=b'{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":'
        b'[{"topic":"T"},{"topic":"%RETRY%G"}]}]}',
    )
    assert remoting_needs(beat) == Needs.of(("group", "G", SUB), ("topic", "T", SUB))
    lock = RemotingCommand(RequestCode.LOCK_BATCH_MQ, body=b'{"consumerGroup": "G2", "mqSet": []}')
    assert remoting_needs(lock) == Needs.of(("group", "G2", SUB))
    assert remoting_needs(RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER)).admin
    assert remoting_needs(RemotingCommand(RequestCode.REGISTER_BROKER)).admin
    assert remoting_needs(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC)) == Needs()


def test_reload_keeps_the_old_rules_when_the_new_file_is_bad(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text("accounts: [{accessKey: keyOne1, secretKey: secretOne1, admin: true}]")
    clock = FakeClock(0.0)
    acl = AclService(path, clock=clock)
    signed = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    sign_remoting(signed.ext, b"", Credentials("keyOne1", "secretOne1"))
    acl.check_remoting(signed, "10.0.0.1")
    path.write_text("accounts: [{accessKey: keyOne1, secretKey: short}]")
    clock.now += 0.5
    acl.check_remoting(signed, "10.0.0.1")  # not looked at yet: a second has not passed
    clock.now += 1.0
    acl.check_remoting(signed, "10.0.0.1")  # looked at, refused: the old rules stay
    assert "the previous rules stay" in caplog.text and "secretOne1" not in caplog.text
    path.write_text("accounts: [{accessKey: keyTwo2, secretKey: secretTwo2}]")
    clock.now += 1.0
    with pytest.raises(AuthenticationFailedError, match="keyOne1 is not known"):
        acl.check_remoting(signed, "10.0.0.1")
    other = RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T"})
    sign_remoting(other.ext, b"", Credentials("keyTwo2", "secretTwo2"))
    with pytest.raises(NoPermissionError, match="not an admin"):
        acl.check_remoting(other, "10.0.0.1")
