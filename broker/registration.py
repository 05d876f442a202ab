"""Registration with every NameServer (RocketMQ's BrokerOuterAPI).

At start and every ``register_name_server_period_ms`` the broker sends its
identity and full topic config to each NameServer over remoting
(REGISTER_BROKER, 103: RocketMQ's header fields, pymq's registration JSON as
the body, which also carries the broker's HTTP address), in parallel; a topic
change triggers an extra registration at once. On clean shutdown it
unregisters, so routes drop it immediately instead of after the expiry.
A NameServer that is down is logged and retried on the next period; it
never delays the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable

import orjson

from connector.protocol.acl import Credentials
from connector.protocol.remoting import FrameError, RemotingCommand, RequestCode, ResponseCode
from connector.protocol.route import RegisterBrokerRequest, UnregisterBrokerRequest
from connector.server.remoting import call

__all__ = ["BrokerRegistrar"]

log = logging.getLogger(__name__)


class BrokerRegistrar:
    def __init__(
        self,
        namesrv_addrs: list[str],
        build_request: Callable[[], RegisterBrokerRequest],
        *,
        period_ms: int,
        timeout_ms: int,
        credentials: Credentials | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.namesrv_addrs = namesrv_addrs
        self.tls = tls  # NameServers reached over TLS
        self.credentials = credentials  # signs registrations for an ACL-enabled NameServer
        self.build_request = build_request
        self.period_s = period_ms / 1000
        self.timeout_s = timeout_ms / 1000
        self.registrations = 0
        # what the NameServers last said of this broker's master (a slave replicates
        # from ``ha_server_addr``)
        self.master_addr: str | None = None
        self.ha_server_addr: str | None = None
        self._started = False
        self._task: asyncio.Task[None] | None = None
        self._kick: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        if not self.namesrv_addrs:
            log.warning("no NameServer configured (--namesrv): clients cannot find this broker")
            return
        self._loop = asyncio.get_running_loop()
        self._kick = asyncio.Event()
        self._started = True
        await self.register_all()
        self._task = asyncio.create_task(self._run(), name="register-name-server")

    def register_soon(self) -> None:
        """Ask for a registration now (thread-safe): a topic changed."""
        if self._loop is None or self._kick is None:
            return
        self._loop.call_soon_threadsafe(self._kick.set)

    async def register_now(self) -> int:
        """``register_all`` for a request that changed a topic: the change is made
        already, so a defect here is logged (the periodic registration goes on), not
        turned into the request's error."""
        try:
            return await self.register_all()
        except Exception:
            log.exception("registering with the NameServers after a topic change failed")
            return 0

    async def _run(self) -> None:
        assert self._kick is not None
        while True:
            with contextlib.suppress(asyncio.TimeoutError):  # builtin only from 3.11
                await asyncio.wait_for(self._kick.wait(), self.period_s)
            self._kick.clear()
            await self.register_all()

    async def register_all(self) -> int:
        """Register with every NameServer at once; how many accepted."""
        if not self._started:
            return 0
        req = self.build_request()
        results = await asyncio.gather(
            *(self._send(addr, RequestCode.REGISTER_BROKER, req) for addr in self.namesrv_addrs)
        )
        self.registrations += 1
        return sum(results)

    async def _send(
        self, addr: str, code: int, req: RegisterBrokerRequest | UnregisterBrokerRequest
    ) -> bool:
        ext = {
            "brokerName": req.broker_name,
            "brokerAddr": req.broker_addr,
            "clusterName": req.cluster,
            "brokerId": str(req.broker_id),
        }
        body = orjson.dumps(req.model_dump(mode="json"))
        what = "registration" if code == RequestCode.REGISTER_BROKER else "unregistration"
        try:
            resp = await call(
                addr, RemotingCommand(code, ext, body), self.timeout_s, self.credentials, self.tls
            )
        except (OSError, asyncio.TimeoutError, FrameError) as exc:
            log.warning("NameServer %s unreachable for the %s: %s", addr, what, exc or "timeout")
            return False
        if resp.code != ResponseCode.SUCCESS:
            log.warning("NameServer %s refused the %s: %s %s", addr, what, resp.code, resp.remark)
            return False
        if code == RequestCode.REGISTER_BROKER:
            self.master_addr = resp.ext.get("masterAddr") or None
            self.ha_server_addr = resp.ext.get("haServerAddr") or None
        return True

    async def stop(self, unregister: UnregisterBrokerRequest | None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if not self._started:
            return
        if unregister is not None:
            await asyncio.gather(
                *(
                    self._send(addr, RequestCode.UNREGISTER_BROKER, unregister)
                    for addr in self.namesrv_addrs
                )
            )
        self._started = False
