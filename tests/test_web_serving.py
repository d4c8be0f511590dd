"""How the server runs: Nagle's algorithm off on every connection, including those accepted from
a listening socket bound the way uvicorn binds one for several workers (protocol number 0),
which asyncio leaves with Nagle on; a few request threads per worker; a lone worker that
cannot start stops the server. Real sockets on 127.0.0.1; nothing here measures time."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator

import anyio.to_thread
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.testclient import TestClient
from uvicorn.config import STARTUP_FAILURE
from uvicorn.server import ServerState

from fresh_loop import run_in_fresh_loop
from normdive.web.app import REQUEST_THREADS
from normdive.web.infrastructure.serving import NoDelayH11Protocol


async def _empty_app(_scope: object, _receive: object, _send: object) -> None:
    return None


@pytest.fixture
def accepted() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(server side, client side) of one TCP connection, accepted from a listening socket made
    like uvicorn's Config.bind_socket: socket.socket(family=AF_INET), protocol number 0."""
    listener = socket.socket(family=socket.AF_INET)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    server_side, _ = listener.accept()
    listener.close()
    yield server_side, client
    client.close()
    server_side.close()


def nodelay(sock: socket.socket) -> bool:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_such_a_socket_keeps_nagle_on_in_asyncio(
    accepted: tuple[socket.socket, socket.socket],
) -> None:
    # The reason for the protocol: asyncio's own transport leaves this connection as it was.
    server_side, _client = accepted
    assert server_side.proto == 0

    async def wrap() -> bool:
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(
            asyncio.Protocol, server_side
        )
        on = nodelay(server_side)
        transport.abort()
        return on

    assert run_in_fresh_loop(wrap) is False


def test_the_servers_protocol_turns_nagle_off(
    accepted: tuple[socket.socket, socket.socket],
) -> None:
    server_side, _client = accepted
    config = uvicorn.Config(_empty_app, lifespan="off", log_level="warning")
    config.load()

    async def serve_one() -> bool:
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_accepted_socket(
            lambda: NoDelayH11Protocol(config=config, server_state=ServerState(), app_state={}),
            server_side,
        )
        on = nodelay(server_side)
        transport.abort()
        return on

    assert run_in_fresh_loop(serve_one) is True


def test_requests_run_on_a_few_threads_per_worker(app: Starlette) -> None:
    def tokens() -> float:
        return anyio.to_thread.current_default_thread_limiter().total_tokens

    with TestClient(app) as client:
        assert client.portal is not None
        assert client.portal.call(tokens) == REQUEST_THREADS


@pytest.mark.slow
def test_a_worker_that_cannot_start_stops_the_server_with_uvicorns_status() -> None:
    # One worker, supervised as several are: its failure to start ends the supervisor too,
    # with the status uvicorn.run gives a lone worker's failure.
    code = (
        "from normdive.web.infrastructure.serving import run; "
        "run('no_module_of_that_name:app', host='127.0.0.1', port=0, workers=1)"
    )
    ended = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert ended.returncode == STARTUP_FAILURE, ended.stderr[-2000:]
    assert "failed to start" in ended.stderr
