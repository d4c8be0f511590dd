"""Routes that read: the lesson page, the learner's state as JSON, one recorded row's curves
for the chart, the health check."""

from __future__ import annotations

import dataclasses
import math
from datetime import date, datetime
from enum import Enum
from typing import Any

from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from normdive.i18n.catalogues import N_, gettext
from normdive.lesson.translations import localized
from normdive.progress.actions import unknown_row_message
from normdive.progress.state import LessonState
from normdive.recording.format import Recording, non_finite_marker
from normdive.web.infrastructure.flash import FLASH_COOKIE, clear_flash, refusal_from
from normdive.web.infrastructure.identity import attach_cookie, resolve_learner
from normdive.web.infrastructure.services import services
from normdive.web.security.csrf import form_token
from normdive.web.views.page import CARRIED_PARAMS, PLAY_PARAM, carry_from, eps_is_on
from normdive.web.views.player import row_payload


def _player_row(state: LessonState, asked: str | None) -> str | None:
    """The row the player shows: the one the address names, once played; otherwise (a plain
    visit, or a row not played) of the rows the learner has played, the one first played last,
    so that a learner coming back (the address names a row only while the page is open) finds
    curves of their own, not an empty player."""
    played = state.ablation.play_order
    if asked in played:
        return asked
    return played[-1] if played else None


def _repeated_carry(request: Request) -> Response | None:
    """A redirect to the page's address with each carried parameter once, when one came more
    than once: the switch's form without JavaScript sends eps twice when it is ticked on (its
    hidden "off" and the box's "on"; the last one counts, as the page reads it), and the
    address would keep both, and a second one at every flip. The browser keeps the anchor."""
    names = [name for name, _ in request.query_params.multi_items() if name in CARRIED_PARAMS]
    if len(names) == len(set(names)):
        return None
    carry = carry_from(dict(request.query_params), services(request).lesson)
    return RedirectResponse(carry.address(), status_code=303)


def lesson_page(request: Request) -> Response:
    """The lesson, or while 8.5 is not done, a page saying what it waits for. A plain
    function: Starlette runs it in its thread pool (it reads the store)."""
    svc = services(request)
    repeated = _repeated_carry(request)
    if repeated is not None:
        return repeated
    learner = resolve_learner(request, svc.signer)
    read = svc.read(learner.id)
    state = read.state
    flashed = request.cookies.get(FLASH_COOKIE)
    # A form refused without JavaScript, redirected here (web.infrastructure.flash): shown this
    # once.
    refusal = refusal_from(flashed, learner.id, svc.settings.secret_key)
    view = svc.page_view(
        learner.id,
        state,
        read.status,
        eps_on=eps_is_on(request.query_params.get("eps")),
        own_row_text=request.query_params.get("row"),
        player_row=_player_row(state, request.query_params.get(PLAY_PARAM)),
        refusal=refusal,
    )
    message = refusal.message if refusal is not None else None
    body = (
        svc.renderer.page(view) if state.prerequisite_done else svc.renderer.locked(view, message)
    )
    response = HTMLResponse(body)
    attach_cookie(response, learner, svc.signer, svc.settings)
    if flashed is not None:
        clear_flash(response, learner, svc.settings)
    return response


def json_safe(value: Any) -> Any:
    """`value` (plain data: dataclasses.asdict's output) as JSON can hold it: every
    non-finite float spelled as the recording format does ("nan", "inf", "-inf"), so that a
    diverged row's figures cannot break the API; tuples and sets as lists, enums as their
    values, times in ISO 8601, keys as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return non_finite_marker(value)
    if isinstance(value, Enum):
        return json_safe(value.value)
    if isinstance(value, dict):
        return {str(json_safe(key)): json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(item) for item in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def state_json(request: Request) -> Response:
    """The learner's derived state, exactly what the page is drawn from, and their form token
    (a script of the page's own origin sends it as X-CSRF-Token)."""
    svc = services(request)
    learner = resolve_learner(request, svc.signer)
    state = json_safe(dataclasses.asdict(svc.state_of(learner.id)))
    token = form_token(svc.settings.secret_key, learner.id)
    response = JSONResponse({"learner_id": learner.id, "state": state, "csrf_token": token})
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


NOT_PLAYED = N_("Play the {label} row first; its curves open once it has played.")


def _refused(http_status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "message": message}, http_status)


def row_data(request: Request) -> Response:
    """One row's recorded curves (every seed), for the chart; once the learner played it."""
    svc, key = services(request), request.path_params["key"]
    lesson = localized(svc.lesson)
    learner = resolve_learner(request, svc.signer)
    recording_status = svc.recording()
    state = svc.state_of(learner.id, recording_status)
    row = state.ablation.row(key)
    response: Response
    if lesson.row(key) is None:
        response = _refused(404, unknown_row_message(key))
    elif not state.ablation.available or not isinstance(recording_status, Recording):
        problem = state.ablation.problem or lesson.ablation.unavailable
        response = _refused(503, problem)
    elif row is None or row.plays == 0:
        label = row.label if row is not None else key
        response = _refused(409, gettext(NOT_PLAYED).format(label=f"“{label}”"))
    else:
        payload = row_payload(recording_status, lesson, key)
        if payload is None:  # the lesson knows the row, the recording does not
            response = _refused(503, lesson.ablation.unavailable)
        else:
            response = JSONResponse(payload)
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


def health(request: Request) -> Response:
    """For load balancers: 200 when the progress store answers."""
    with services(request).engine.connect() as connection:
        connection.execute(text("SELECT 1"))
    return JSONResponse({"ok": True, "database": "ok"})


routes = [
    Route("/", lesson_page, methods=["GET"]),
    Route("/api/state", state_json, methods=["GET"]),
    Route("/recording/rows/{key}.json", row_data, methods=["GET"]),
    Route("/healthz", health, methods=["GET"]),
]
