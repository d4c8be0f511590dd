"""What the web framework costs on the hot path: one lesson form (POST /numbers: six typed
answers and the form token) answered by each way of writing the route, side by side in one
run, with the route's own work left out:

    .venv/bin/python bench/framework.py [--requests 20000] [--repeats 5]

- starlette: a starlette.routing.Route whose endpoint reads `await request.form()`, as
  normdive's routes are written (web.routes);
- fastapi-request: the same endpoint as a FastAPI route taking `request: Request`, as the app
  was written before (FastAPI used as Starlette);
- fastapi-typed: FastAPI as FastAPI: the form declared as a pydantic model of `str` fields
  (raw answers stay text) with `Form()`, the token as a `Header()` dependency.

Each request is sent in process straight into the ASGI app (no server, no socket, no HTTP
client): the scope, one body message, and a send that keeps nothing, so what differs between
the rows is the framework alone. Printed: CPU per request (time.process_time over the whole
batch, best of --repeats) and the ratio to the starlette row. No middleware is added to any.
FastAPI is only a test extra (pyproject.toml): the app never imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Form, Header
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message

REQUESTS = 20_000
REPEATS = 5
FIELDS = ("mean_a", "var_a", "norm_a0", "mean_b", "var_b", "norm_b0")
BODY = "&".join(f"{name}=0.123{i}" for i, name in enumerate(FIELDS)).encode() + b"&csrf=ab12"
ANSWER = {"ok": True, "message": "", "fragments": {}}


async def starlette_numbers(request: Request) -> JSONResponse:
    form = await request.form()
    return JSONResponse({**ANSWER, "message": str(len(form))})


def starlette_app() -> ASGIApp:
    return Starlette(routes=[Route("/numbers", starlette_numbers, methods=["POST"])])


def fastapi_request_app() -> ASGIApp:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/numbers")
    async def numbers(request: Request) -> JSONResponse:
        form = await request.form()
        return JSONResponse({**ANSWER, "message": str(len(form))})

    return app


class NumbersForm(BaseModel):
    """The six answers as typed: text, parsed by the lesson, not by the framework."""

    mean_a: str = ""
    var_a: str = ""
    norm_a0: str = ""
    mean_b: str = ""
    var_b: str = ""
    norm_b0: str = ""
    csrf: str = ""


def fastapi_typed_app() -> ASGIApp:
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/numbers")
    async def numbers(
        form: Annotated[NumbersForm, Form()],
        accept: Annotated[str, Header()] = "application/json",
    ) -> JSONResponse:
        return JSONResponse({**ANSWER, "message": str(len(form.model_dump()))})

    return app


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/numbers",
        "raw_path": b"/numbers",
        "root_path": "",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/x-www-form-urlencoded"),
            (b"content-length", str(len(BODY)).encode()),
            (b"accept", b"application/json"),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def _batch(app: ASGIApp, requests: int) -> float:
    """CPU seconds per request over `requests` requests, each checked to be a 200."""
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.process_time()
    for _ in range(requests):
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": BODY, "more_body": False}

        await app(_scope(), receive, send)
    cpu = time.process_time() - started
    assert statuses == [200] * requests, sorted(set(statuses))
    return cpu / requests


def measure(
    apps: dict[str, Callable[[], ASGIApp]], requests: int, repeats: int
) -> dict[str, float]:
    """Best CPU per request of each app, the apps interleaved repeat by repeat so that a
    busy moment of the machine falls on all of them alike."""
    built = {name: make() for name, make in apps.items()}
    best = {name: float("inf") for name in built}
    for _ in range(repeats):
        for name, app in built.items():
            best[name] = min(best[name], asyncio.run(_batch(app, requests)))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    apps = {
        "starlette": starlette_app,
        "fastapi-request": fastapi_request_app,
        "fastapi-typed": fastapi_typed_app,
    }
    best = measure(apps, args.requests, args.repeats)
    base = best["starlette"]
    print(f"{args.requests:,} POST /numbers per batch, best of {args.repeats}, in process")
    print("| route written as | CPU per request | x starlette |")
    print("|---|---|---|")
    for name, cpu in best.items():
        print(f"| {name} | {cpu * 1e6:,.0f} us | {cpu / base:.2f}x |")


if __name__ == "__main__":
    main()
