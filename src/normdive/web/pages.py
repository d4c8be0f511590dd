"""Routes that read: the lesson page, the learner's state as JSON, the health check."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from fastapi import APIRouter
from fastapi.encoders import jsonable_encoder
from sqlalchemy import text
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from normdive.web.identity import attach_cookie, resolve_learner
from normdive.web.services import Services, services
from normdive.web.view import build_page_view, eps_is_on

router = APIRouter()


def _lesson_page(svc: Services, request: Request) -> Response:
    learner = resolve_learner(request, svc.store, svc.signer)
    state = svc.state_of(learner.id)
    view = build_page_view(
        svc.lesson,
        state,
        learner.id,
        eps_on=eps_is_on(request.query_params.get("eps")),
        own_row_text=request.query_params.get("row"),
    )
    body = svc.renderer.page(view) if state.prerequisite_done else svc.renderer.locked(view)
    response = HTMLResponse(body)
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


@router.get("/", response_class=HTMLResponse)
async def lesson_page(request: Request) -> Response:
    """The lesson, or while 8.5 is not done, a page saying what it waits for."""
    return await run_in_threadpool(_lesson_page, services(request), request)


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float spelled as JSON can hold it ("nan", "inf", "-inf"),
    as the recording format does: a diverged row's figures must not break the API."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_safe(item) for item in value]
    return value


def _state_json(svc: Services, request: Request) -> Response:
    learner = resolve_learner(request, svc.store, svc.signer)
    state = json_safe(jsonable_encoder(dataclasses.asdict(svc.state_of(learner.id))))
    response = JSONResponse({"learner_id": learner.id, "state": state})
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


@router.get("/api/state")
async def state_json(request: Request) -> Response:
    """The learner's derived state, exactly what the page is drawn from."""
    return await run_in_threadpool(_state_json, services(request), request)


def _health(svc: Services) -> tuple[int, dict[str, Any]]:
    with svc.engine.connect() as connection:
        connection.execute(text("SELECT 1"))
    return 200, {"ok": True, "database": "ok"}


@router.get("/healthz")
async def health(request: Request) -> Response:
    """For load balancers: 200 when the progress store answers."""
    status, body = await run_in_threadpool(_health, services(request))
    return JSONResponse(body, status)
