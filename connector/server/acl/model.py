"""Who may do what: accounts, their grants on resources, and the decision.

The model is RocketMQ ACL 1.0's, kept general enough for ACL 2.0 (users
and policies with finer actions), which accepts the same signatures:

- a ``Resource`` is a kind and a name (``topic``/``group`` today; 2.0 adds
  cluster, namespace and name patterns);
- actions are bit flags (``PUB``, ``SUB`` today; 2.0's SEND / RECEIVE /
  UPDATE / GET map onto more flags), ``DENY`` overrides every other;
- an ``Account`` holds its grants by resource and a default per kind.

A request needs a set of (resource, action) pairs, and maybe an admin
account (``Needs``). ``refusal`` gives the reason it is refused, or None.
The decision is RocketMQ's: an admin account without grants may do
everything; otherwise each pair is checked against the account's grant
for that resource, else its default for the kind; DENY always loses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from connector.errors import ConfigError
from connector.server.acl.addresses import AddressPattern

__all__ = [
    "DENY",
    "PUB",
    "SUB",
    "Account",
    "AclRules",
    "Needs",
    "Resource",
    "parse_perm",
    "perm_text",
    "refusal",
]

DENY = 1  # RocketMQ's flag values (2 is its ANY, unused here)
PUB = 4
SUB = 8
_PERMS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB}

TOPIC = "topic"
GROUP = "group"
Resource = tuple[str, str]  # (kind, name)


def parse_perm(text: object, where: str) -> int:
    """``DENY``, ``PUB``, ``SUB`` or ``PUB|SUB`` (spaces allowed)."""
    key = str(text).replace(" ", "").upper()
    if key not in _PERMS:
        raise ConfigError(f"{where}: permission {text!r} is not DENY, PUB, SUB or PUB|SUB")
    return _PERMS[key]


def perm_text(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return "|".join(name for name, flag in (("PUB", PUB), ("SUB", SUB)) if perm & flag) or "DENY"


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    admin: bool = False
    defaults: dict[str, int] = field(default_factory=lambda: {TOPIC: DENY, GROUP: DENY})
    grants: dict[Resource, int] = field(default_factory=dict)
    white: tuple[AddressPattern, ...] = ()

    def trusted_from(self, addr: str) -> bool:
        """RocketMQ: a request from the account's white-listed address passes unsigned."""
        return any(p.matches(addr) for p in self.white)


@dataclass(frozen=True, slots=True)
class AclRules:
    accounts: dict[str, Account]
    global_white: tuple[AddressPattern, ...] = ()

    def trusted(self, addr: str) -> bool:
        """A globally white-listed address may do everything, signed or not."""
        return any(p.matches(addr) for p in self.global_white)


@dataclass(frozen=True, slots=True)
class Needs:
    """What one request needs: an admin account, and actions on resources."""

    admin: bool = False
    resources: tuple[tuple[Resource, int], ...] = ()
    # hashed once: a check looks its decision up by (access key, needs) on every request
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.admin, self.resources)))

    def __hash__(self) -> int:
        return self._hash

    @staticmethod
    def of(*pairs: tuple[str, str | None, int], admin: bool = False) -> Needs:
        """``Needs.of((TOPIC, "T", PUB), (GROUP, g, SUB))``; a pair whose name is None
        or empty (the request did not say) is left out."""
        return Needs(admin, tuple(((kind, name), act) for kind, name, act in pairs if name))


ANYONE = Needs()  # any known account
ADMIN = Needs(admin=True)


def refusal(account: Account, needs: Needs) -> str | None:
    """Why ``account`` may not make a request that needs ``needs`` (None: it may)."""
    if needs.admin and not account.admin:
        return f"{account.access_key} is not an admin account"
    if not needs.resources or (account.admin and not account.grants):
        return None
    for resource, action in needs.resources:
        owned = account.grants.get(resource)
        if owned is None:
            owned = account.defaults.get(resource[0], DENY)
        if owned & DENY or not owned & action:
            kind, name = resource
            return f"{account.access_key} may not {perm_text(action)} {kind} {name}"
    return None
