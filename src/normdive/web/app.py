"""The web app factory: `create_app(settings)` wires settings, lesson, store and renderer
into a FastAPI app with the page's routes, its static files and readable error handling.

Run it with `normdive serve`, or any ASGI server: `uvicorn --factory normdive.web.app:create_app`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import anyio
import anyio.to_thread
from fastapi import FastAPI
from itsdangerous import Signer
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request, cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from normdive import __version__
from normdive.config import Settings, get_settings
from normdive.lesson.content import load_lesson
from normdive.progress.history import History
from normdive.store.db import make_engine
from normdive.store.event_store import Store
from normdive.store.snapshots import Snapshots
from normdive.web import actions, instructor_pages, lab_pages, lti_routes, pages, sweep_pages
from normdive.web.assets import CompressResponses, StaticAssets
from normdive.web.errors import DatabaseFailures, error_response, install_error_handlers
from normdive.web.identity import make_signer
from normdive.web.pool_reports import PoolReports
from normdive.web.rendering import STATIC_DIR, STATIC_MOUNT, Renderer, static_version
from normdive.web.security.framing import (
    FRAME_COOKIE,
    UNFRAMED_POLICY,
    frame_signer,
    framed_policy,
    framing_origins,
)
from normdive.web.security.proxy import TrustedProxy
from normdive.web.services import Histories, Services

# Threads per worker process that run requests' blocking work (the database, deriving,
# rendering). Python runs one thread at a time, so more threads only add waiting for the GIL:
# 4 overlap one request's database waits with another's work, at about 20 % less CPU per
# request than anyio's default of 40 (bench/RESULTS.md, "Load").
REQUEST_THREADS = 4

# Forms carry six short numbers or a 2,000-character takeaway; nothing legitimate comes near.
MAX_BODY_BYTES = 64 * 1024
# The largest request head (request line and header fields) accepted, in bytes: what h11
# buffers by default, and what README promises. h11 refuses a head still arriving past it
# (web.serving); HeadLimit refuses one that arrived whole, under any server.
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


class HeadAsGet:
    """Answers HEAD on every GET route as GET would, without the body (RFC 9110, section 9.3.2:
    a general-purpose server must support HEAD). FastAPI routes answer only the methods they
    name, so a load balancer's HEAD health check would get a 405 from /healthz. The headers,
    Content-Length among them, are those of the GET."""

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


def announces_body(scope: Scope) -> bool:
    """Whether the request says a body follows its head (RFC 9112, section 6.3)."""
    headers = Headers(scope=scope)
    length = headers.get("content-length", "")
    return "transfer-encoding" in headers or (
        length.isascii() and length.isdigit() and int(length) > 0
    )


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
        declared = headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > self.max_bytes:
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


class NormdiveApp(FastAPI):
    """FastAPI with SecurityHeaders around its whole middleware stack. Starlette puts its
    ServerErrorMiddleware outside every middleware added with add_middleware, and that one
    sends the 500 for an unexpected error: headers added inside it never reach that 500."""

    frame_signer: Signer | None = None

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack(), self.frame_signer)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    engine = make_engine(settings.database_url)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # run_in_threadpool (starlette) takes anyio's default limiter, one per event loop.
        anyio.to_thread.current_default_thread_limiter().total_tokens = REQUEST_THREADS
        yield
        engine.dispose()  # close the pool's connections when the server stops

    version = static_version(STATIC_DIR)
    app = NormdiveApp(
        lifespan=lifespan,
        title="normdive",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        # No redirect from /path/ to /path: Starlette builds it from the request's Host, which
        # any client sets, and a 307 makes the browser post the form again, there.
        redirect_slashes=False,
    )
    lesson = load_lesson()
    app.frame_signer = frame_signer(settings.secret_key)
    app.state.services = Services(
        settings=settings,
        lesson=lesson,
        engine=engine,
        store=Store(engine),
        signer=make_signer(settings),
        renderer=Renderer(version=version),
        histories=Histories(lesson),
        snapshots=Snapshots(engine, History.start(lesson)),
        pool_reports=PoolReports(lesson),
    )
    app.include_router(pages.router)
    app.include_router(actions.router)
    app.include_router(sweep_pages.router)
    app.include_router(lab_pages.router)
    app.include_router(lti_routes.router)
    app.include_router(instructor_pages.router)
    app.mount(STATIC_MOUNT, StaticAssets(STATIC_DIR, version), name="static")
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES, timeout_s=settings.body_timeout_s)
    app.add_middleware(CompressResponses)
    # Outside the others added, so everything inside sees the client a trusted proxy names.
    app.add_middleware(TrustedProxy, forwarded_allow_ips=settings.forwarded_allow_ips)
    app.add_middleware(HeadAsGet)
    # Outermost but one: the head is measured as it arrived, before anything uses it.
    app.add_middleware(HeadLimit, max_bytes=MAX_HEAD_BYTES)
    # Outermost of the added ones: a database failure raised in any of them is a 503 too.
    app.add_middleware(DatabaseFailures)
    return app
