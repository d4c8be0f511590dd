"""The security headers every HTTP response carries (SecurityHeaders): the content security
policy (framed only for an LTI launch's platforms, web.security.framing), nosniff, the referrer
policy and, outside a launch, X-Frame-Options."""

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

# The page loads nothing from elsewhere, runs no inline script or style, and is framed by
# nobody (outside an LTI launch: web.security.framing).
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
    """Adds the security headers to every HTTP response. It wraps the whole app, Starlette's
    ServerErrorMiddleware included (NormdiveApp), so an unexpected error's 500 has them too.
    A request with a valid framing cookie (an LTI launch's) gets the launching platform's
    origins as frame-ancestors instead of 'none' (web.security.framing)."""

    def __init__(self, app: ASGIApp, frame_signer: Signer | None = None) -> None:
        self.app = app
        self.frame_signer = frame_signer

    def _headers(self, scope: Scope) -> Sequence[tuple[bytes, bytes]]:
        if self.frame_signer is None:
            return SECURITY_HEADERS
        # The raw headers, scanned without building a Headers: most requests carry no
        # framing cookie, and this runs for every one.
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
                # A route that set its own policy (the LTI pages, framed by the registered
                # platforms) keeps it, without X-Frame-Options.
                chosen = COMMON_HEADERS if any(k == CSP_HEADER for k, _ in own) else headers
                message["headers"] = [*own, *chosen]
            await send(message)

        await self.app(scope, receive, send_with_headers)
