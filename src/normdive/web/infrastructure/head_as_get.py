"""HEAD answered on every GET route as GET would, without the body."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """Answers HEAD on every GET route as GET would, without the body (RFC 9110, section 9.3.2:
    a general-purpose server must support HEAD): a load balancer's HEAD health check gets what
    GET /healthz would. Starlette routes a HEAD to a GET route, but the response still sends
    its body, which a HEAD answer must not. The headers, Content-Length among them, are those
    of the GET."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)
