"""Limits on what a request may send: its head (HeadLimit, 431) and its body (BodyLimit: 413,
408, or 400 for two lengths). ASGI middlewares, so they hold under any route and server."""

from __future__ import annotations

import anyio
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from normdive.i18n.catalogues import N_, activated, gettext
from normdive.web.infrastructure.errors import error_response
from normdive.web.infrastructure.language import locale_of

# Forms carry six short numbers or a 2,000-character takeaway; nothing legitimate comes near.
MAX_BODY_BYTES = 64 * 1024
# h11's default buffer: h11 refuses a head still arriving past it, HeadLimit a whole one.
MAX_HEAD_BYTES = 16 * 1024

TOO_LARGE = N_("That request is too large to accept. Nothing was saved.")
# Read one way by a proxy and another here: request smuggling (RFC 9112, 6.3).
TWO_LENGTHS = N_(
    "That request gave its body's length two ways (Content-Length and Transfer-Encoding), "
    "so it was refused. Nothing was saved."
)
# An unread body leaves the connection useless for another request (RFC 9112, 9.6).
CLOSE = {"Connection": "close"}
HEAD_TOO_LARGE = N_(
    "That request's address and headers are larger than {kib} KiB, so it was refused. Nothing "
    "was saved; clearing this site's cookies in your browser may help."
)
TOO_SLOW = N_(
    "That request's body took longer than {seconds:g} seconds to arrive, so it was refused. "
    "Nothing was saved; check your connection and try again."
)


def refused(
    scope: Scope, status: int, message: str, headers: dict[str, str], **values: object
) -> Response:
    """A refusal in the request's language: these limits stand outside the Language
    middleware, which has not chosen it yet."""
    request = Request(scope)
    with activated(locale_of(request)):
        return error_response(request, status, gettext(message).format(**values), headers)


def head_bytes(scope: Scope) -> int:
    """The head's size rebuilt from the scope: never over what was sent."""
    path = scope.get("raw_path") or scope["path"].encode()
    query = scope["query_string"]
    target = len(path) + (1 + len(query) if query else 0)
    # "METHOD TARGET HTTP/1.1\r\n", then "name: value\r\n" per field, then "\r\n".
    request_line = (
        len(scope["method"]) + 1 + target + len(" HTTP/") + len(scope["http_version"]) + 2
    )
    fields = sum(len(name) + len(value) + 4 for name, value in scope["headers"])
    return request_line + fields + 2


class HeadLimit:
    """A readable 431 (RFC 6585, 5) for a head over `max_bytes`; the connection closes."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and head_bytes(scope) > self.max_bytes:
            response = refused(scope, 431, HEAD_TOO_LARGE, CLOSE, kib=self.max_bytes // 1024)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


# A Content-Length of more digits than this is larger than any body taken, unread.
MAX_LENGTH_DIGITS = 18


def declared_length(text: str) -> int | None:
    """A Content-Length's value, None when it is no number; bounded before int() sees it."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > MAX_LENGTH_DIGITS:
        return int(10**MAX_LENGTH_DIGITS)
    return int(digits)


def announces_body(scope: Scope) -> bool:
    headers = Headers(scope=scope)
    length = declared_length(headers.get("content-length", ""))
    return "transfer-encoding" in headers or (length is not None and length > 0)


def closing(message: Message) -> Message:
    kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
    return {**message, "headers": [*kept, (b"connection", b"close")]}


class BodyLimit:
    """413 past `max_bytes`, 408 past `timeout_s` (a byte now and then must not hold a thread);
    Connection: close on a response started with the body unread, which nothing would read."""

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if "content-length" in headers and "transfer-encoding" in headers:
            response = refused(scope, 400, TWO_LENGTHS, CLOSE)
            await response(scope, receive, send)
            return
        declared = declared_length(headers.get("content-length", ""))
        if declared is not None and declared > self.max_bytes:
            response = refused(scope, 413, TOO_LARGE, CLOSE)
            await response(scope, receive, send)
            return
        received = 0
        deadline: float | None = None
        complete = not announces_body(scope)
        responded = False

        async def counting_receive() -> Message:
            nonlocal received, deadline, complete
            # No deadline for a disconnect, nor once the response started (closing_send).
            if complete or responded:
                return await receive()
            if deadline is None:
                deadline = anyio.current_time() + self.timeout_s
            try:
                with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                    message = await receive()
            except TimeoutError:
                # Raised inside the route's body read: the app's error handlers answer.
                said = gettext(TOO_SLOW).format(seconds=self.timeout_s)
                raise HTTPException(408, said, CLOSE) from None
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                raise HTTPException(413, gettext(TOO_LARGE), CLOSE)
            return message

        async def closing_send(message: Message) -> None:
            nonlocal responded
            if message["type"] == "http.response.start":
                responded = True
                if not complete:
                    message = closing(message)
            await send(message)

        await self.app(scope, counting_receive, closing_send)
