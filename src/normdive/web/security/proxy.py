"""Which proxy to believe: the forwarded headers (X-Forwarded-For, -Proto, -Host) count only
when the peer that sent them is one of `Settings.forwarded_allow_ips`, the rule and the
variable (FORWARDED_ALLOW_IPS) uvicorn uses. From anyone else they are ignored: otherwise any
client could name itself another address (and start learners past the limit) or name the
host its forged Origin points at (and pass the Origin check).

The app applies the rule itself, with uvicorn's own ProxyHeadersMiddleware, so it holds under
any ASGI server and in the in-process test client; `normdive serve` turns uvicorn's copy off
(web.infrastructure.serving). The middleware rewrites the request's client and scheme from a trusted
peer's X-Forwarded-For and -Proto; before that, TrustedProxy notes in the scope whether the peer was
trusted, which decides whether X-Forwarded-Host counts (web.security.csrf).
"""

from __future__ import annotations

from typing import Any, cast

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

# The scope key saying whether the request's peer is a trusted proxy.
PEER_TRUSTED = "normdive.peer_trusted"


class TrustedProxy:
    """uvicorn's ProxyHeadersMiddleware, noting first whether the peer was trusted."""

    def __init__(self, app: ASGIApp, forwarded_allow_ips: str) -> None:
        self.proxy_headers = ProxyHeadersMiddleware(cast(Any, app), forwarded_allow_ips)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            peer = scope.get("client")
            scope[PEER_TRUSTED] = (peer[0] if peer else None) in self.proxy_headers.trusted_hosts
        await self.proxy_headers(cast(Any, scope), cast(Any, receive), cast(Any, send))


def peer_is_trusted_proxy(request: Request) -> bool:
    """True when the request came through a proxy named in FORWARDED_ALLOW_IPS."""
    return bool(request.scope.get(PEER_TRUSTED, False))


def client_address(request: Request) -> str:
    """The client's address: the peer, or the client a trusted proxy forwarded for."""
    return request.client.host if request.client is not None else ""
