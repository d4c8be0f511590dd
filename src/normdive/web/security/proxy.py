"""Which proxy to believe: FORWARDED_ALLOW_IPS, uvicorn's rule, applied here with its own
middleware so it holds under any server; TrustedProxy also notes it for X-Forwarded-Host."""

from __future__ import annotations

from typing import Any, cast

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

PEER_TRUSTED = "normdive.peer_trusted"


class TrustedProxy:
    def __init__(self, app: ASGIApp, forwarded_allow_ips: str) -> None:
        self.proxy_headers = ProxyHeadersMiddleware(cast(Any, app), forwarded_allow_ips)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            peer = scope.get("client")
            scope[PEER_TRUSTED] = (peer[0] if peer else None) in self.proxy_headers.trusted_hosts
        await self.proxy_headers(cast(Any, scope), cast(Any, receive), cast(Any, send))


def peer_is_trusted_proxy(request: Request) -> bool:
    return bool(request.scope.get(PEER_TRUSTED, False))


def client_address(request: Request) -> str:
    """The client's address: the peer, or the client a trusted proxy forwarded for."""
    return request.client.host if request.client is not None else ""
