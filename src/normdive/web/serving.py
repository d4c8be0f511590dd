"""How `normdive serve` runs uvicorn, in one place (bench/load.py serves its bare endpoint
through the same function, so the two are compared on equal terms).

Nagle's algorithm is turned off on every connection (TCP_NODELAY). uvicorn writes an answer's
head and its body in two writes. With Nagle on, the body waits until the client acknowledges
the head, and clients delay that acknowledgement (40 ms on Linux, RFC 1122 4.2.3.2), so every
answer took more than 40 ms. asyncio turns Nagle off only on connections accepted from a socket
whose protocol number is IPPROTO_TCP (asyncio.base_events._set_nodelay), and the socket uvicorn
binds for several workers has protocol number 0: with `--workers 2`, every answer took 44 ms
on this machine, against 0.3 ms with one worker (bench/RESULTS.md, "Load").
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.h11_impl import H11Protocol

# Trust X-Forwarded-For/-Proto from the proxy in front (uvicorn reads them only from
# FORWARDED_ALLOW_IPS, 127.0.0.1 by default).
PROXY_HEADERS = True


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol (h11), with Nagle's algorithm off on its connection."""

    def connection_made(  # type: ignore[override]  # uvicorn narrows the transport too
        self, transport: asyncio.Transport
    ) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)


def run(app: str, *, host: str, port: int, workers: int, reload: bool = False) -> None:
    """Serve the ASGI app factory named by `app` ("module:function") until stopped."""
    import uvicorn

    uvicorn.run(
        app,
        factory=True,
        host=host,
        port=port,
        workers=None if reload else workers,
        reload=reload,
        proxy_headers=PROXY_HEADERS,
        http=NoDelayH11Protocol,
    )
