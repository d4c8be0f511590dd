"""Limits on what a request may send: its head (HeadLimit, a 431) and its body (BodyLimit: a
413 past the size, a 408 past the deadline, a 400 for a body whose length is given two ways).
Both are ASGI middlewares, so they hold under any route and any server."""

from __future__ import annotations

import anyio
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from normdive.web.infrastructure.errors import error_response

# Forms carry six short numbers or a 2,000-character takeaway; nothing legitimate comes near.
MAX_BODY_BYTES = 64 * 1024
# The largest request head (request line and header fields) accepted, in bytes: what h11
# buffers by default, and what README promises. h11 refuses a head still arriving past it
# (web.infrastructure.serving); HeadLimit refuses one that arrived whole, under any server.
MAX_HEAD_BYTES = 16 * 1024

TOO_LARGE = "That request is too large to accept. Nothing was saved."
# A request that gives its body's length both ways can be read two ways, by a proxy in front
# and by this server (request smuggling): refused, and the connection closed (RFC 9112,
# section 6.3). No browser sends one.
TWO_LENGTHS = (
    "That request gave its body's length two ways (Content-Length and Transfer-Encoding), "
    "so it was refused. Nothing was saved."
)
# A body refused before it has all arrived leaves the rest of it unread on the connection,
# which can serve no other request until the client has sent it all: the answer closes the
# connection instead of keeping it alive (RFC 9112, section 9.6).
CLOSE = {"Connection": "close"}
HEAD_TOO_LARGE = (
    "That request's address and headers are larger than {kib} KiB, so it was refused. Nothing "
    "was saved; clearing this site's cookies in your browser may help."
)
TOO_SLOW = (
    "That request's body took longer than {seconds:g} seconds to arrive, so it was refused. "
    "Nothing was saved; check your connection and try again."
)


def head_bytes(scope: Scope) -> int:
    """The request head's size in bytes, rebuilt from the scope: request line, header fields
    and the blank line. The server strips the spaces around each field's value, so this can
    be a few bytes under what was sent, never over."""
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
    """Refuses a request whose head is over `max_bytes` with a readable 431 (RFC 6585,
    section 5), before anything reads it further. The connection closes: any body is unread."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and head_bytes(scope) > self.max_bytes:
            message = HEAD_TOO_LARGE.format(kib=self.max_bytes // 1024)
            response = error_response(Request(scope), 431, message, CLOSE)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


# A Content-Length of more digits than this is larger than any body taken, unread.
MAX_LENGTH_DIGITS = 18


def declared_length(text: str) -> int | None:
    """A Content-Length's value, bounded before it is converted (int() refuses thousands of
    digits): None when it is no number, 10 ** MAX_LENGTH_DIGITS for any longer one."""
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > MAX_LENGTH_DIGITS:
        return int(10**MAX_LENGTH_DIGITS)
    return int(digits)


def announces_body(scope: Scope) -> bool:
    """Whether the request says a body follows its head (RFC 9112, section 6.3)."""
    headers = Headers(scope=scope)
    length = declared_length(headers.get("content-length", ""))
    return "transfer-encoding" in headers or (length is not None and length > 0)


def closing(message: Message) -> Message:
    """A response start with `Connection: close` in place of any connection field."""
    kept = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
    return {**message, "headers": [*kept, (b"connection", b"close")]}


class BodyLimit:
    """Refuses request bodies over `max_bytes` with a readable 413: at once when the declared
    length is too large, otherwise as soon as the bytes received pass the limit. A body still
    arriving `timeout_s` after the app first asked for it is refused with a 408, so a client
    sending a byte now and then cannot hold a connection and a request thread. A request that
    gives both a Content-Length and a Transfer-Encoding is refused with a 400 (TWO_LENGTHS).

    A response that starts while some of the body is unread (a route that reads none, such as
    /healthz or a 405, or a refusal before reading) says `Connection: close`, and the server
    closes the connection once it is sent: otherwise the connection would stay open for as long
    as the client dribbles the rest, with no deadline, since nothing reads it."""

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
            response = error_response(Request(scope), 400, TWO_LENGTHS, CLOSE)
            await response(scope, receive, send)
            return
        declared = declared_length(headers.get("content-length", ""))
        if declared is not None and declared > self.max_bytes:
            response = error_response(Request(scope), 413, TOO_LARGE, CLOSE)
            await response(scope, receive, send)
            return
        received = 0
        deadline: float | None = None
        complete = not announces_body(scope)
        responded = False

        async def counting_receive() -> Message:
            nonlocal received, deadline, complete
            # After the body, waiting for a disconnect, which has no deadline. After the
            # response started, nobody could answer a 408 or 413: the connection closes when
            # the response ends (closing_send).
            if complete or responded:
                return await receive()
            if deadline is None:
                deadline = anyio.current_time() + self.timeout_s
            try:
                with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                    message = await receive()
            except TimeoutError:
                # Raised inside the route's body read, so the app's HTTP error handler answers.
                raise HTTPException(408, TOO_SLOW.format(seconds=self.timeout_s), CLOSE) from None
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                # Raised inside the route's body read, so the app's 413 handler answers.
                raise HTTPException(413, TOO_LARGE, CLOSE)
            return message

        async def closing_send(message: Message) -> None:
            nonlocal responded
            if message["type"] == "http.response.start":
                responded = True
                if not complete:
                    message = closing(message)
            await send(message)

        await self.app(scope, counting_receive, closing_send)
