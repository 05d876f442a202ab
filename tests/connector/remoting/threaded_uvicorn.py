"""A real uvicorn server in a thread of the test process, on a free loopback port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from connector.server.serve import bind_socket


@contextmanager
def uvicorn_thread(app: Any, http: Any, **config: Any) -> Iterator[tuple[uvicorn.Server, int]]:
    """The started server and its port; stopped (as SIGTERM would) on exit. ``config``:
    more ``uvicorn.Config`` settings."""
    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(
        uvicorn.Config(app, http=http, log_level="warning", lifespan="off", **config)
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.01)
    try:
        yield server, sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive(), "server did not stop"
