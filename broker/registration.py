"""Registration with every NameServer (RocketMQ's BrokerOuterAPI).

At start and every ``register_name_server_period_ms`` the broker posts its
identity and full topic config to each NameServer, in parallel; a topic
change triggers an extra registration at once. On clean shutdown it
unregisters, so routes drop it immediately instead of after the expiry.
A NameServer that is down is logged and retried on the next period; it
never delays the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import httpx

from connector.protocol.route import RegisterBrokerRequest, UnregisterBrokerRequest

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
    ) -> None:
        self.namesrv_addrs = namesrv_addrs
        self.build_request = build_request
        self.period_s = period_ms / 1000
        self.timeout_s = timeout_ms / 1000
        self.registrations = 0
        self._client: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._kick: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        if not self.namesrv_addrs:
            log.warning("no NameServer configured (--namesrv): clients cannot find this broker")
            return
        self._loop = asyncio.get_running_loop()
        self._kick = asyncio.Event()
        self._client = httpx.AsyncClient(timeout=self.timeout_s)
        await self.register_all()
        self._task = asyncio.create_task(self._run(), name="register-name-server")

    def register_soon(self) -> None:
        """Ask for a registration now (thread-safe): a topic changed."""
        if self._loop is None or self._kick is None:
            return
        self._loop.call_soon_threadsafe(self._kick.set)

    async def _run(self) -> None:
        assert self._kick is not None
        while True:
            with contextlib.suppress(asyncio.TimeoutError):  # builtin only from 3.11
                await asyncio.wait_for(self._kick.wait(), self.period_s)
            self._kick.clear()
            await self.register_all()

    async def register_all(self) -> int:
        """Register with every NameServer at once; how many accepted."""
        if self._client is None:
            return 0
        body = self.build_request().model_dump(mode="json")
        results = await asyncio.gather(
            *(self._post(addr, "/brokers/register", body) for addr in self.namesrv_addrs)
        )
        self.registrations += 1
        return sum(results)

    async def _post(self, addr: str, path: str, body: dict[str, object]) -> bool:
        assert self._client is not None
        try:
            resp = await self._client.post(f"http://{addr}{path}", json=body)
        except httpx.HTTPError as exc:
            log.warning("NameServer %s unreachable for %s: %s", addr, path, exc)
            return False
        if resp.status_code != 200:
            log.warning("NameServer %s refused %s: %s %s", addr, path, resp.status_code, resp.text)
            return False
        return True

    async def stop(self, unregister: UnregisterBrokerRequest | None) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._client is None:
            return
        if unregister is not None:
            body = unregister.model_dump(mode="json")
            await asyncio.gather(
                *(self._post(addr, "/brokers/unregister", body) for addr in self.namesrv_addrs)
            )
        await self._client.aclose()
        self._client = None
