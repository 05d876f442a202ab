"""RocketMQ ACL 1.0's ``plain_acl.yml``, read into ``AclRules``.

    globalWhiteRemoteAddresses: ["10.10.103.*"]
    accounts:
      - accessKey: RocketMQ
        secretKey: "12345678"
        whiteRemoteAddress: 192.168.0.*
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: SUB
        topicPerms: ["topicA=DENY", "topicB=PUB|SUB"]
        groupPerms: ["groupA=DENY", "groupB=SUB"]

Everything wrong in a file is a ``ConfigError`` naming where: an unknown
permission, a key shorter than 6 characters (RocketMQ's rule), an access key
twice, a bad address pattern, a field of the wrong type. RocketMQ reads an
unknown permission as DENY; pymq refuses the file instead, so that a typo
cannot lock everyone out (or in) silently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from connector.errors import ConfigError
from connector.server.acl.addresses import parse_addresses
from connector.server.acl.model import GROUP, TOPIC, Account, AclRules, parse_perm

__all__ = ["MIN_KEY_CHARS", "load_plain_acl", "parse_plain_acl"]

MIN_KEY_CHARS = 6
_ACCOUNT_FIELDS = {
    "accessKey", "secretKey", "whiteRemoteAddress", "admin", "defaultTopicPerm",
    "defaultGroupPerm", "topicPerms", "groupPerms",
}  # fmt: skip


def load_plain_acl(path: Path) -> AclRules:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"acl_file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"acl_file {path}: {exc}") from None
    return parse_plain_acl(text, str(path))


def parse_plain_acl(text: str, where: str = "plain_acl.yml") -> AclRules:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{where}:{at} is not YAML ({getattr(exc, 'problem', exc)})") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping with accounts")
    accounts: dict[str, Account] = {}
    items = raw.get("accounts") or []
    if not isinstance(items, list):
        raise ConfigError(f"{where}: accounts must be a list")
    for i, item in enumerate(items):
        account = _account(item, f"{where}: accounts[{i}]")
        if account.access_key in accounts:
            raise ConfigError(f"{where}: accessKey {account.access_key} appears twice")
        accounts[account.access_key] = account
    white = parse_addresses(raw.get("globalWhiteRemoteAddresses"))
    return AclRules(accounts, tuple(white))


def _account(item: Any, where: str) -> Account:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: an account is a mapping")
    unknown = set(item) - _ACCOUNT_FIELDS
    if unknown:
        raise ConfigError(f"{where}: unknown fields {', '.join(sorted(map(str, unknown)))}")
    access_key = _key(item.get("accessKey"), f"{where}.accessKey")
    where = f"{where} ({access_key})"
    secret_key = _key(item.get("secretKey"), f"{where}.secretKey")
    admin = item.get("admin", False)
    if not isinstance(admin, bool):
        raise ConfigError(f"{where}.admin must be true or false")
    grants = {}
    for kind, name in ((TOPIC, "topicPerms"), (GROUP, "groupPerms")):
        entries = item.get(name) or []
        if not isinstance(entries, list):
            raise ConfigError(f"{where}.{name} must be a list of NAME=PERM")
        for entry in entries:
            res, sep, perm = str(entry).partition("=")
            if not sep or not res.strip():
                raise ConfigError(f"{where}.{name}: {entry!r} is not NAME=PERM")
            grants[(kind, res.strip())] = parse_perm(perm, f"{where}.{name} {res.strip()}")
    defaults = {
        TOPIC: parse_perm(item.get("defaultTopicPerm") or "DENY", f"{where}.defaultTopicPerm"),
        GROUP: parse_perm(item.get("defaultGroupPerm") or "DENY", f"{where}.defaultGroupPerm"),
    }
    return Account(
        access_key, secret_key, admin, defaults, grants,
        tuple(parse_addresses(item.get("whiteRemoteAddress"))),
    )  # fmt: skip


def _key(value: Any, where: str) -> str:
    if value is None or isinstance(value, bool | dict | list):
        raise ConfigError(f"{where} is missing")
    text = str(value)
    if len(text) < MIN_KEY_CHARS:
        raise ConfigError(f"{where} must be at least {MIN_KEY_CHARS} characters")
    return text
