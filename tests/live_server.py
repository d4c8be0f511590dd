"""uvicorn serving one ASGI app for real on a free 127.0.0.1 port, in a daemon thread of the
test process: over HTTP for the browser tests, over TLS for the LTI sites (a certificate for
their names, lti_browser_sites.certificate)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn
from starlette.types import ASGIApp

# How long a server may take to start, and to stop.
SERVER_START_TIMEOUT_S = 30.0
# How every test server runs unless its caller says otherwise: quiet, no WebSockets (the app
# has none), the app's lifespan run (its startup checks and its shutdown).
SERVER_OPTIONS: dict[str, Any] = {"log_level": "warning", "ws": "none", "lifespan": "on"}


class LiveServer:
    """uvicorn serving `app` on 127.0.0.1, over TLS when given (certificate, key) PEM files;
    `config` goes to uvicorn.Config over SERVER_OPTIONS. Start and stop it, or use it as a
    context manager."""

    def __init__(self, app: ASGIApp, *, tls: tuple[Path, Path] | None = None, **config: Any):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))  # the kernel picks a free port
        self.port: int = self._sock.getsockname()[1]
        self.url = f"{'http' if tls is None else 'https'}://127.0.0.1:{self.port}"
        options = dict(SERVER_OPTIONS)
        if tls is not None:
            certificate, key = tls
            options.update(ssl_certfile=str(certificate), ssl_keyfile=str(key))
        self._server = uvicorn.Server(uvicorn.Config(app, **{**options, **config}))
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[self._sock])),
            name="normdive-live-server",
            daemon=True,
        )

    def start(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=SERVER_START_TIMEOUT_S)
        self._sock.close()

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
