"""A server's access control: the rules of its ``acl_file``, kept current, and the
checks of both edges.

The file is looked at (its size, mtime and inode) at most once a second, on
the request that comes then; a changed file is read again and, if it is
valid, its rules apply from that request on (a log line says how many
accounts). A file that does not parse, or names a bad permission, is
refused with a log line naming what is wrong, and the old rules stay.

Checks, RocketMQ ACL 1.0's order: a globally white-listed address passes; an
unsigned request, an unknown access key or a signature that does not match
is AUTHENTICATION_FAILED (remoting: NO_PERMISSION, 16; REST: 401), except
from the account's own white-listed address (passes unsigned, as in
RocketMQ, but, unlike RocketMQ, still within the account's permissions);
then the account must be allowed what the request needs (NO_PERMISSION;
REST 403). Requests signed by pymq's clients also carry a
time and a rising number (``connector.protocol.acl``): one older than the
window, or numbered at or below what its client instance sent before, is
a replay. A REST request's nonce is accepted once within its window.
Secrets are never logged; refusals are logged with the address and the
access key.
"""

from __future__ import annotations

import collections
import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from connector.errors import AuthenticationFailedError, ConfigError, NoPermissionError, PyMQError
from connector.protocol.acl import (
    ACCESS_KEY,
    CHECK_EXPIRED,
    CHECK_MALFORMED,
    CHECK_MISMATCH,
    CHECK_OK,
    REST_WINDOW_MS,
    SIGN_TIME,
    RemotingSigner,
    document_signature,
    rest_signature,
    settle_remoting,
)
from connector.protocol.remoting import RemotingCommand
from connector.server.acl.model import Account, AclRules, Needs, refusal
from connector.server.acl.plain import load_plain_acl
from connector.server.acl.remoting import remoting_needs

__all__ = ["AclService", "PendingCheck"]

log = logging.getLogger(__name__)

CHECK_FILE_S = 1.0
MAX_NONCES = 1_000_000  # REST nonces remembered (each for the window): bounded memory
MAX_INSTANCES = 10_000  # client instances whose last request number is kept (then pruned)


class PendingCheck:
    """A request's ACL check waiting for its signature (``AclService.begin_remoting``):
    call it before the request changes anything; it raises the refusal, if any, on
    every call, and checks once."""

    __slots__ = ("_check", "_refusal")

    def __init__(self, check: Callable[[], None]) -> None:
        self._check: Callable[[], None] | None = check
        self._refusal: PyMQError | None = None

    def __call__(self) -> None:
        check = self._check
        if check is not None:
            self._check = None
            try:
                check()
            except PyMQError as exc:
                self._refusal = exc
        if self._refusal is not None:
            raise self._refusal

    def refusal(self) -> PyMQError | None:
        """Check (if not yet); the refusal, or None when the request may be served."""
        try:
            self()
        except PyMQError as exc:
            return exc
        return None


class AclService:
    """Thread-safe: the REST app and the remoting loop may check at once."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] | None = None,
    ) -> None:
        """``clock``: monotonic seconds (the file's checks); ``wall_ms``: Unix ms (the
        signed time windows), None: the system's clock, read in the compiled check."""
        self.path = Path(path)
        self.clock = clock
        self.wall_ms = wall_ms
        self.rules: AclRules = load_plain_acl(self.path)  # a bad file stops the start
        self._signers = _signers(self.rules)
        # (access key, what a request needs) -> why it is refused ("" allowed), per rules
        self._decisions: dict[tuple[str, Needs], str] = {}
        self._stamp = _stamp(self.path)
        self._checked = clock()
        self._lock = threading.Lock()
        self._seqs: dict[str, tuple[int, int]] = {}  # client instance -> (last n, wall ms)
        self._nonces: set[tuple[str, str]] = set()
        self._nonce_order: collections.deque[tuple[int, tuple[str, str]]] = collections.deque()
        self.refused = 0
        log.info("ACL on: %s, %d accounts", self.path, len(self.rules.accounts))

    # -- the file ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the file again if it changed (looked at once a second at most)."""
        now = self.clock()
        if now - self._checked < CHECK_FILE_S:
            return
        with self._lock:
            if now - self._checked < CHECK_FILE_S:
                return
            self._checked = now
            stamp = _stamp(self.path)
            if stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                rules = load_plain_acl(self.path)
            except ConfigError as exc:
                log.error("ACL: %s; the previous rules stay", exc.message)
                return
            self.rules = rules
            self._signers = _signers(rules)
            self._decisions = {}
        log.info("ACL: %s reloaded, %d accounts", self.path, len(rules.accounts))

    # -- remoting ------------------------------------------------------------------------

    def check_remoting(self, request: RemotingCommand, addr: str) -> None:
        """Raise AuthenticationFailedError / NoPermissionError unless ``request`` from
        ``addr`` may be served. On every request: its common case (a signed request of
        a known account, allowed before) is kept to dictionary lookups and one compiled
        call (the signature made and compared, the replay check); each Python step here
        cost ~3-10x its tight-loop time in the broker's real path (caches cold between
        requests), so fewer steps matter more than their sum suggests."""
        account = self._signing_account(request, addr)
        if account is not None:
            signer = self._signers.get(account.access_key) or RemotingSigner(account.secret_key)
            now = -1 if self.wall_ms is None else self.wall_ms()
            status = signer.verify(request.ext, request.body, self._seqs, now, REST_WINDOW_MS)
            self._settled(request, addr, account, status)

    def begin_remoting(self, request: RemotingCommand, addr: str) -> PendingCheck | None:
        """``check_remoting`` with the body's signature hashed on another thread (the
        GIL released) while the caller goes on: None when the request passed already
        (no signature to check), else the check to call before anything of the request
        is stored, answered or counted. For a large body (a batch): its hashing then
        runs beside the work a handler does before it stores (decoding and scanning the
        batch), where it used to come before it."""
        account = self._signing_account(request, addr)
        if account is None:
            return None
        signer = self._signers.get(account.access_key) or RemotingSigner(account.secret_key)
        pending = signer.begin(request.ext, request.body)

        def check() -> None:
            now = -1 if self.wall_ms is None else self.wall_ms()
            status = settle_remoting(request.ext, pending.result(), self._seqs, now)
            self._settled(request, addr, account, status)

        return PendingCheck(check)

    def _signing_account(self, request: RemotingCommand, addr: str) -> Account | None:
        """The account whose signature ``request`` must carry, or None when it may be
        served without one (a globally white-listed address; the account's own
        white-listed address, its permissions checked here)."""
        if self.clock() - self._checked >= CHECK_FILE_S:
            self.refresh()
        rules = self.rules
        if rules.global_white and rules.trusted(addr):
            return None
        access_key = request.ext.get(ACCESS_KEY)
        account = rules.accounts.get(access_key) if access_key else None
        if account is None:
            account = self._account(rules, access_key, addr, f"request code {request.code}")
        if account.white and account.trusted_from(addr):
            self._authorize(account, remoting_needs(request), addr)
            return None
        return account

    def _settled(self, request: RemotingCommand, addr: str, account: Account, status: int) -> None:
        """The rest of the check once ``status`` (``settle_remoting``'s) is known: the
        signature must have matched and the request not be a replay; the account must be
        allowed what it needs."""
        if status != CHECK_OK:
            self._refuse_remoting(request, addr, account, status)
        if len(self._seqs) > MAX_INSTANCES:  # forget instances silent for longer than the window
            now = self._now_ms()
            self._seqs = {k: v for k, v in self._seqs.items() if now - v[1] < REST_WINDOW_MS}
        needs = remoting_needs(request)
        if self._decisions.get((account.access_key, needs)) != "":
            self._authorize(account, needs, addr)

    def _refuse_remoting(
        self, request: RemotingCommand, addr: str, account: Account, status: int
    ) -> NoReturn:
        if status == CHECK_MISMATCH:
            self._refuse(addr, account.access_key, "signature does not match")
            raise AuthenticationFailedError(
                f"the signature of request code {request.code} does not match "
                f"{account.access_key}'s secret key"
            )
        if status == CHECK_MALFORMED:
            raise AuthenticationFailedError("pymqSignSeq / pymqSignTime are malformed")
        now, sent_ms = self._now_ms(), int(request.ext[SIGN_TIME])
        if status == CHECK_EXPIRED:
            self._refuse(addr, account.access_key, "signed too long ago")
            raise AuthenticationFailedError(
                f"the request was signed {abs(now - sent_ms) / 1000:.0f} s away from this "
                f"server's clock (window {REST_WINDOW_MS // 1000} s): expired, or clocks differ"
            )
        self._refuse(addr, account.access_key, "replayed")
        raise AuthenticationFailedError("the request was seen before (a replay)")

    def _now_ms(self) -> int:
        return int(time.time() * 1000) if self.wall_ms is None else self.wall_ms()

    # -- signed documents (the HA handshake) ---------------------------------------------

    def check_document(self, doc: Mapping[str, Any], addr: str, needs: Needs) -> None:
        """A JSON handshake signed by ``sign_document``: the account, the signature, the
        time window, the nonce once, then ``needs``."""
        self.refresh()
        rules = self.rules
        if rules.trusted(addr):
            return
        access_key = doc.get("access_key")
        account = self._account(
            rules, access_key if isinstance(access_key, str) else None, addr, "the handshake"
        )
        if account.trusted_from(addr):
            self._authorize(account, needs, addr)
            return
        signature, nonce, sent_ms = doc.get("signature"), doc.get("nonce"), doc.get("signed_at")
        if not isinstance(signature, str) or not isinstance(nonce, str):
            raise AuthenticationFailedError("the handshake carries no signature")
        expected = document_signature(account.secret_key, doc)
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            self._refuse(addr, account.access_key, "signature does not match")
            raise AuthenticationFailedError(
                f"the handshake's signature does not match {account.access_key}'s secret key"
            )
        now = self._now_ms()
        if not isinstance(sent_ms, int) or abs(now - sent_ms) > REST_WINDOW_MS:
            self._refuse(addr, account.access_key, "expired")
            raise AuthenticationFailedError("the handshake was signed too long ago")
        self._use_nonce(account.access_key, nonce, now, addr)
        self._authorize(account, needs, addr)

    # -- REST ----------------------------------------------------------------------------

    def check_rest(
        self,
        *,
        access_key: str | None,
        timestamp: str | None,
        nonce: str | None,
        signature: str | None,
        string_to_sign: Callable[[], bytes],
        needs: Needs,
        addr: str,
    ) -> None:
        self.refresh()
        rules = self.rules
        if rules.trusted(addr):
            return
        account = self._account(rules, access_key, addr, "the request")
        if account.trusted_from(addr):
            self._authorize(account, needs, addr)
            return
        if not timestamp or not nonce or not signature:
            self._refuse(addr, account.access_key, "signature headers missing")
            raise AuthenticationFailedError(
                "a signed request needs X-Pymq-Timestamp, X-Pymq-Nonce and X-Pymq-Signature"
            )
        if not 8 <= len(nonce) <= 64:
            raise AuthenticationFailedError("X-Pymq-Nonce must be 8 to 64 characters")
        expected = rest_signature(account.secret_key, string_to_sign())
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            self._refuse(addr, account.access_key, "signature does not match")
            raise AuthenticationFailedError(
                f"the signature does not match {account.access_key}'s secret key"
            )
        try:
            sent_ms = int(timestamp)
        except ValueError:
            raise AuthenticationFailedError("X-Pymq-Timestamp is not Unix milliseconds") from None
        now = self._now_ms()
        if abs(now - sent_ms) > REST_WINDOW_MS:
            self._refuse(addr, account.access_key, "expired")
            raise AuthenticationFailedError(
                f"the request was signed {abs(now - sent_ms) / 1000:.0f} s away from this "
                f"server's clock (window {REST_WINDOW_MS // 1000} s): expired, or clocks differ"
            )
        self._use_nonce(account.access_key, nonce, now, addr)
        self._authorize(account, needs, addr)

    def _use_nonce(self, access_key: str, nonce: str, now: int, addr: str) -> None:
        key = (access_key, nonce)
        with self._lock:
            order = self._nonce_order
            while order and (now - order[0][0] > 2 * REST_WINDOW_MS or len(order) > MAX_NONCES):
                self._nonces.discard(order.popleft()[1])
            if key in self._nonces:
                self._refuse(addr, access_key, "replayed")
                raise AuthenticationFailedError("the request was seen before (a replay)")
            self._nonces.add(key)
            order.append((now, key))

    # -- both ----------------------------------------------------------------------------

    def _account(self, rules: AclRules, access_key: str | None, addr: str, what: str) -> Account:
        if not access_key:
            self._refuse(addr, "", "unsigned")
            raise AuthenticationFailedError(
                f"{what} is not signed; this server has ACL on: give the client "
                "access_key and secret_key"
            )
        account = rules.accounts.get(access_key)
        if account is None:
            self._refuse(addr, access_key, "unknown access key")
            raise AuthenticationFailedError(f"access key {access_key} is not known here")
        return account

    def _authorize(self, account: Account, needs: Needs, addr: str) -> None:
        key = (account.access_key, needs)
        reason = self._decisions.get(key)
        if reason is None:
            reason = refusal(account, needs) or ""
            if len(self._decisions) > 100_000:
                self._decisions = {}
            self._decisions[key] = reason
        if reason:
            self._refuse(addr, account.access_key, reason)
            raise NoPermissionError(reason)

    def _refuse(self, addr: str, access_key: str, why: str) -> None:
        self.refused += 1
        log.info("ACL: refused a request from %s (access key %r): %s", addr, access_key, why)


def _signers(rules: AclRules) -> dict[str, RemotingSigner]:
    return {key: RemotingSigner(a.secret_key) for key, a in rules.accounts.items()}


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
