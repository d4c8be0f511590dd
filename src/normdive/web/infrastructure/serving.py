"""How `normdive serve` runs uvicorn, in one place (bench/load.py serves its bare endpoint
through the same function, so the two are compared on equal terms).

Nagle's algorithm is turned off on every connection (TCP_NODELAY). uvicorn writes an answer's
head and its body in two writes. With Nagle on, the body waits until the client acknowledges
the head, and clients delay that acknowledgement (40 ms on Linux, RFC 1122 4.2.3.2), so every
answer took more than 40 ms. asyncio turns Nagle off only on connections accepted from a socket
whose protocol number is IPPROTO_TCP (asyncio.base_events._set_nodelay), and the socket uvicorn
binds for several workers has protocol number 0: with `--workers 2`, every answer took 44 ms
on this machine, against 0.3 ms with one worker (bench/RESULTS.md, "Load").

Slow clients. uvicorn closes a kept-alive connection idle for `timeout_keep_alive` seconds,
but has no deadline for a request's head: a client sending its headers a byte at a time held a
connection for as long as it liked. The protocol here closes a connection whose request head
has not arrived whole HEADER_TIMEOUT_S seconds after the connection opened or the previous
answer ended. h11 refuses with a 400 a head still incomplete past web.security.limits.MAX_HEAD_BYTES
(its max_incomplete_event_size, which bounds only what it buffers: a larger head arriving whole in
one read passes it, and the app refuses that one with a 431, web.security.limits.HeadLimit). The
body has its own deadline in the app (Settings.body_timeout_s, web.security.limits.BodyLimit), so it
holds under any server. A proxy in front should still set its own (README, "Deploying it"): it can
refuse slow clients before they cost this process a connection.

Supervised, one worker included. uvicorn's supervisor (Multiprocess) starts a worker in place
of one that dies; uvicorn.run uses it only for two or more, and a lone worker that died left
nothing serving. A worker can die of no fault of its own: SQLite maps its WAL index (the -shm)
into memory, shared and writable, and once the file is made immutable (chattr +i: ext4 writes
the mapped pages back and write-protects them) the kernel answers the next write to one with
SIGBUS, which no process survives (tests/test_ops_write_recovery.py).

Logging is web.infrastructure.logging_setup's: uvicorn's lines, the access log with secrets and long
paths cut, and normdive's own lines with a timestamp, level and logger name.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

import h11
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.supervisors import Multiprocess

from normdive.web.infrastructure.logging_setup import logging_config
from normdive.web.security.limits import MAX_HEAD_BYTES

# The app applies FORWARDED_ALLOW_IPS to the forwarded headers itself (web.security.proxy), with
# uvicorn's own middleware; uvicorn's copy would rewrite the client before the app could see
# which peer sent them.
PROXY_HEADERS = False
# Seconds a request's head (request line and headers) may take to arrive whole.
HEADER_TIMEOUT_S = 10.0
# Seconds an idle kept-alive connection stays open (uvicorn's default, named here).
KEEP_ALIVE_TIMEOUT_S = 5
# Seconds a worker process of `--workers N` may take to answer the supervisor's health check,
# its first one included, which comes only once the worker has started Python and imported
# uvicorn. At uvicorn's default of 5 s, a worker starting on a busy machine is killed as hung
# and replaced by one that starts no faster: two workers on two busy cores were killed and
# replaced ten times in a minute, and the server never answered.
WORKER_HEALTHCHECK_TIMEOUT_S = 30


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol (h11), with Nagle's algorithm off on its connection, and a
    deadline of `header_timeout_s` for each request's head."""

    header_timeout_s: float = HEADER_TIMEOUT_S
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(  # type: ignore[override]  # uvicorn narrows the transport too
        self, transport: asyncio.Transport
    ) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        self._await_request_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._await_request_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_deadline()
        super().connection_lost(exc)

    def _await_request_head(self) -> None:
        self._cancel_head_deadline()
        self._head_deadline = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _cancel_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        # IDLE: h11 has not yet parsed a whole request head since the deadline was set.
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closed a connection whose request head did not arrive in time")
            self.transport.close()


def connection_options() -> dict[str, Any]:
    """How every connection is served, as uvicorn.run and uvicorn.Config take it (the tests
    serve the app with these too)."""
    return {
        "proxy_headers": PROXY_HEADERS,
        "http": NoDelayH11Protocol,
        "timeout_keep_alive": KEEP_ALIVE_TIMEOUT_S,
        "h11_max_incomplete_event_size": MAX_HEAD_BYTES,
    }


class Supervisor(Multiprocess):
    """uvicorn's supervisor, which notices a worker that died during a health check at once.

    It checks each worker every half second: a ping down a pipe, and a wait of up to
    WORKER_HEALTHCHECK_TIMEOUT_S for the answer. It keeps the worker's end of that pipe open
    itself, so a worker that died with a ping unanswered (as one killed while busy often does)
    never closes it, and was replaced only after the whole wait, 30 s. Closed here (the worker
    has its own copy from its start), the wait ends when the worker does."""

    def keep_subprocess_alive(self) -> None:
        for worker in self.processes:
            worker.child_conn.close()  # closing again is harmless
        super().keep_subprocess_alive()


def run(app: str, *, host: str, port: int, workers: int, reload: bool = False) -> None:
    """Serve the ASGI app factory named by `app` ("module:function") until stopped: `workers`
    processes under uvicorn's supervisor, which starts another in place of one that dies, one
    worker included (uvicorn.run serves a single worker in its own process, unsupervised)."""
    import uvicorn

    options: dict[str, Any] = {
        "factory": True,
        "host": host,
        "port": port,
        # Applied by uvicorn in every process it serves from, workers and reloads included.
        "log_config": logging_config(),
        "timeout_worker_healthcheck": WORKER_HEALTHCHECK_TIMEOUT_S,
        **connection_options(),
    }
    if reload:
        uvicorn.run(app, reload=True, **options)
        return
    config = uvicorn.Config(app, workers=workers, **options)
    supervisor = Supervisor(config, sockets=[config.bind_socket()])
    supervisor.run()
    # The supervisor stops when a worker fails before serving (the app or the socket is
    # broken, and would be in every worker it started): the server failed to start.
    if any(worker.exitcode == STARTUP_FAILURE for worker in supervisor.processes):
        sys.exit(STARTUP_FAILURE)
