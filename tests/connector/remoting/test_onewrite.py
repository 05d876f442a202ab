"""Responses leave in one write: the head waits for its body, never longer than a loop step."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Response
from fastapi.responses import StreamingResponse
from threaded_uvicorn import uvicorn_thread

from connector.edge.onewrite import OneWriteHttpToolsProtocol, _HeadHoldingTransport
from connector.remoting.http import HttpPool

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def test_head_and_body_in_one_write() -> None:
    async def run() -> Recorder:
        rec = Recorder()
        t = _HeadHoldingTransport(rec, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(HEAD)
        assert rec.writes == []
        t.write(b"ok")
        t.write(b"raw bytes pass through")
        await asyncio.sleep(0)
        assert t.get_extra_info("peername") == "info:peername"
        return rec

    rec = asyncio.run(run())
    assert rec.writes == [HEAD + b"ok", b"raw bytes pass through"]


def test_a_lone_head_goes_out_after_one_loop_step_or_on_close() -> None:
    async def run() -> tuple[list[bytes], list[bytes], bool]:
        rec = Recorder()
        t = _HeadHoldingTransport(rec, asyncio.get_running_loop())  # type: ignore[arg-type]
        t.write(HEAD)
        await asyncio.sleep(0)
        after_step = list(rec.writes)
        t.write(HEAD)
        t.close()
        return after_step, rec.writes, rec.closed

    after_step, writes, closed = asyncio.run(run())
    assert after_step == [HEAD]
    assert writes == [HEAD, HEAD] and closed


def app() -> FastAPI:
    api = FastAPI()

    @api.get("/json")
    def json() -> dict[str, int]:
        return {"answer": 42}

    @api.delete("/nothing", status_code=204)
    def nothing() -> Response:
        return Response(status_code=204)

    @api.get("/stream")
    def stream() -> StreamingResponse:
        async def chunks() -> AsyncIterator[bytes]:
            yield b"first,"
            await asyncio.sleep(0.01)
            yield b"second"

        return StreamingResponse(chunks(), media_type="text/plain")

    return api


@pytest.fixture(scope="module")
def server_addr() -> Iterator[str]:
    with uvicorn_thread(app(), OneWriteHttpToolsProtocol) as (_, port):
        yield f"127.0.0.1:{port}"


def test_real_server_answers_every_kind_of_response(server_addr: str) -> None:
    pool = HttpPool(server_addr)
    try:
        for _ in range(3):  # the same kept-alive connection each time
            got: Any = pool.request("GET", "/json", timeout_s=10)
            assert got.status == 200 and got.body == b'{"answer":42}'
            got = pool.request("DELETE", "/nothing", timeout_s=10)
            assert got.status == 204 and got.body == b""
            got = pool.request("GET", "/stream", timeout_s=10)
            assert got.status == 200 and got.body == b"first,second"
    finally:
        pool.close()
