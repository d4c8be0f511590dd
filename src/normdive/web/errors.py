"""Errors as a learner (or a client) should meet them: a readable message, JSON for
`Accept: application/json` and the API, an HTML page otherwise, never a stack trace."""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from normdive.web.rendering import Renderer

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"
# What a 503 for an unreachable database asks clients to wait before trying again, in seconds.
DATABASE_RETRY_AFTER_S = 5

TITLES = {
    400: "Bad request",
    401: "Not authorised",
    403: "Refused",
    404: "Not found",
    405: "Method not allowed",
    408: "Too slow",
    409: "Not yet",
    413: "Too large",
    415: "Unsupported format",
    422: "Cannot use that",
    429: "Too many attempts",
    431: "Headers too large",
    500: "Something went wrong",
    503: "Unavailable",
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
    title = TITLES.get(status, "Error")
    return HTMLResponse(renderer.error(status, title, message), status, headers=headers)


def _http_message(request: Request, exc: HTTPException) -> str:
    if exc.status_code == 404:
        return f"There is nothing at {request.url.path}."
    if exc.status_code == 405:
        return f"{request.url.path} does not accept a {request.method} request."
    return str(exc.detail)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers) if exc.headers else None
    return error_response(request, exc.status_code, _http_message(request, exc), headers)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    fields = ", ".join(
        ".".join(str(part) for part in error.get("loc", ())) for error in exc.errors()
    )
    return error_response(request, 422, f"Some of what was sent could not be read ({fields}).")


async def _on_database_error(request: Request, exc: Exception) -> Response:
    # The trace goes to the server's log for the operator, never into the answer. The engine
    # pings a pooled connection before using it (store.db), so once the database is back the
    # next request is served: nothing here needs a restart.
    logger.exception("progress store failed", exc_info=exc)
    return error_response(
        request,
        503,
        "The progress store is not reachable right now. Try again in a moment.",
        {"Retry-After": str(DATABASE_RETRY_AFTER_S)},
    )


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


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(HTTPException, _on_http_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(SQLAlchemyError, _on_database_error)
    app.add_exception_handler(ClientDisconnect, _on_client_disconnect)
    app.add_exception_handler(Exception, _on_unexpected)
