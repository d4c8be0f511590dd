"""The security headers every HTTP response carries (SecurityHeaders)."""

from __future__ import annotations

from collections.abc import Sequence

from itsdangerous import Signer
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from normdive.web.security.framing import (
    FRAME_COOKIE,
    UNFRAMED_POLICY,
    framed_policy,
    framing_origins,
)

CONTENT_SECURITY_POLICY = UNFRAMED_POLICY
CSP_HEADER = b"content-security-policy"
FRAME_COOKIE_BYTES = FRAME_COOKIE.encode()
COMMON_HEADERS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    *COMMON_HEADERS,
    # frame-ancestors 'none' above, for browsers that predate it.
    (b"x-frame-options", b"DENY"),
)


class SecurityHeaders:
    """Wraps the whole app, ServerErrorMiddleware included (NormdiveApp), so a 500 has them
    too; a valid framing cookie's origins replace frame-ancestors 'none'."""

    def __init__(self, app: ASGIApp, frame_signer: Signer | None = None) -> None:
        self.app = app
        self.frame_signer = frame_signer

    def _headers(self, scope: Scope) -> Sequence[tuple[bytes, bytes]]:
        if self.frame_signer is None:
            return SECURITY_HEADERS
        # Scanned raw: most requests carry no framing cookie, and this runs for every one.
        raw = b"; ".join(value for name, value in scope["headers"] if name == b"cookie")
        if FRAME_COOKIE_BYTES not in raw:
            return SECURITY_HEADERS
        cookies = cookie_parser(raw.decode("latin-1"))
        origins = framing_origins(cookies.get(FRAME_COOKIE), self.frame_signer)
        if origins is None:
            return SECURITY_HEADERS
        return ((b"content-security-policy", framed_policy(origins).encode()), *COMMON_HEADERS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = self._headers(scope)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                own = message.get("headers", [])
                # A route's own policy (the LTI pages') stays, without X-Frame-Options.
                chosen = COMMON_HEADERS if any(k == CSP_HEADER for k, _ in own) else headers
                message["headers"] = [*own, *chosen]
            await send(message)

        await self.app(scope, receive, send_with_headers)
