"""Errors as a learner (or a client) should meet them: a readable message, JSON for
`Accept: application/json` and the API, an HTML page otherwise, never a stack trace.

A failing database (store.db.DATABASE_ERRORS: unreachable, a lock held past the wait, a
read-only file, a connection ended under a request) is a 503 with Retry-After on every
route, logged as one line. The app's handler answers those raised in a route;
DatabaseFailures, around every middleware, answers those raised anywhere else below it, so
none reaches Starlette's ServerErrorMiddleware, whose 500 is followed by uvicorn closing the
connection."""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from normdive.i18n.catalogues import N_, gettext
from normdive.store.db import DATABASE_ERRORS, failure_reason, is_database_failure
from normdive.web.views.rendering import Renderer

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"
# What a 503 for an unreachable database asks clients to wait before trying again, in seconds.
DATABASE_RETRY_AFTER_S = 5
ERROR_TITLE = N_("Error")

# Each status's page title, translated where the page is drawn.
TITLES = {
    400: N_("Bad request"),
    401: N_("Not authorised"),
    403: N_("Refused"),
    404: N_("Not found"),
    405: N_("Method not allowed"),
    408: N_("Too slow"),
    409: N_("Not yet"),
    413: N_("Too large"),
    415: N_("Unsupported format"),
    422: N_("Cannot use that"),
    429: N_("Too many attempts"),
    431: N_("Headers too large"),
    500: N_("Something went wrong"),
    503: N_("Unavailable"),
}


def wants_json(request: Request) -> bool:
    """JSON for the API and for the page script (which sends Accept: application/json)."""
    if request.url.path.startswith(API_PREFIX):
        return True
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/html" not in accept


def error_response(
    request: Request,
    status: int,
    message: str,
    headers: dict[str, str] | None = None,
) -> Response:
    if wants_json(request):
        return JSONResponse({"ok": False, "message": message}, status, headers=headers)
    renderer: Renderer = request.app.state.services.renderer
    title = gettext(TITLES.get(status, ERROR_TITLE))
    return HTMLResponse(renderer.error(status, title, message), status, headers=headers)


NOTHING_HERE = N_("There is nothing at {path}.")
WRONG_METHOD = N_("{path} does not accept a {method} request.")


def _http_message(request: Request, exc: HTTPException) -> str:
    if exc.status_code == 404:
        return gettext(NOTHING_HERE).format(path=request.url.path)
    if exc.status_code == 405:
        return gettext(WRONG_METHOD).format(path=request.url.path, method=request.method)
    return str(exc.detail)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers) if exc.headers else None
    if headers and "Allow" in headers:
        # Starlette builds Allow from a set (GET routes take HEAD too): one order, whatever
        # the worker's hash seed.
        headers["Allow"] = ", ".join(sorted(headers["Allow"].split(", ")))
    return error_response(request, exc.status_code, _http_message(request, exc), headers)


DATABASE_UNAVAILABLE = N_("The progress store is not reachable right now. Try again in a moment.")


def database_unavailable(request: Request, exc: BaseException) -> Response:
    """The 503 for a failing database, and its one line in the log: the driver's reason, not
    a trace (the failure is the database's, not the code's). The engine checks a pooled
    connection's socket before using it (store.db), so once the database is back the next
    request is served: nothing here needs a restart."""
    logger.error(
        "progress store failed; answered %s %s with 503: %s",
        request.method,
        request.url.path,
        failure_reason(exc),
    )
    return error_response(
        request, 503, gettext(DATABASE_UNAVAILABLE), {"Retry-After": str(DATABASE_RETRY_AFTER_S)}
    )


async def _on_database_error(request: Request, exc: Exception) -> Response:
    return database_unavailable(request, exc)


class DatabaseFailures:
    """Answers a database failure raised anywhere below it (a middleware, a streamed body) with
    database_unavailable's 503; anything else goes on up unchanged.

    A response's start is held back until its first body message, so a body streamed from
    the database (the instructor's export) whose first read fails is a 503 too, not a 200
    cut short. Once body bytes have gone out, a 503 can no longer be sent: the failure is
    logged as one line and the response is left unfinished, so the server closes the
    connection and the client sees it cut short (finishing it would pass a truncated body
    off as whole). A failure re-raised as another error's cause (Starlette's "response
    already started") counts as the failure it was."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        sent = False

        async def holding_send(message: Message) -> None:
            nonlocal held, sent
            if message["type"] == "http.response.start":
                held = message
                return
            if held is not None:
                start, held = held, None
                await send(start)
            sent = True
            await send(message)

        try:
            await self.app(scope, receive, holding_send)
        except BaseException as exc:
            failure = _database_failure(exc)
            if failure is None:
                raise
            request = Request(scope)
            if sent:
                logger.error(
                    "progress store failed while %s %s was being answered; "
                    "the response is cut short: %s",
                    request.method,
                    request.url.path,
                    failure_reason(failure),
                )
                return
            await database_unavailable(request, failure)(scope, receive, send)
            return
        if held is not None:  # a start with no body message after it: sent as it was
            await send(held)


def _database_failure(exc: BaseException) -> BaseException | None:
    """`exc` when it is a database failure, or the failure it was raised from."""
    causes: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and not any(cause is seen for seen in causes):
        if is_database_failure(cause):
            return cause
        causes.append(cause)
        cause = cause.__cause__
    return None


async def _on_client_disconnect(request: Request, exc: Exception) -> Response:
    # The client went away before its request arrived whole (a closed tab, a lost network):
    # nothing of ours failed, and nobody is left to read an answer. One line for the operator.
    logger.info(
        "client left before its request arrived whole: %s %s", request.method, request.url.path
    )
    return Response(status_code=400)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    # Starlette logs the exception itself after this response is sent.
    return error_response(
        request, 500, "Something went wrong on our side. Reload the page to carry on."
    )


def install_error_handlers(app: Starlette) -> None:
    app.add_exception_handler(HTTPException, _on_http_error)
    for database_error in DATABASE_ERRORS:
        app.add_exception_handler(database_error, _on_database_error)
    app.add_exception_handler(ClientDisconnect, _on_client_disconnect)
    app.add_exception_handler(Exception, _on_unexpected)
