"""Routes that write: the page's four forms and the host platform's prerequisite report.

One flow for every form, with or without JavaScript. The progress layer decides (returning
the event to append, or raising Conflict / Invalid); this module only translates:
- without JavaScript, success is a 303 back to the section, and a refusal re-renders the whole
  page with its status (409 / 422), the message beside the form and what the learner typed;
- with JavaScript (`Accept: application/json`), the same statuses with
  {"ok", "message", "fragments"}: the page's regions re-rendered by the same macros.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from normdive.lesson.content import Lesson
from normdive.progress.actions import (
    Conflict,
    Invalid,
    check_numbers,
    commit_prediction,
    lock_reading,
    save_takeaway,
)
from normdive.progress.state import LessonState
from normdive.store.events import EventKind
from normdive.web.errors import wants_json
from normdive.web.identity import attach_cookie, is_learner_id, resolve_learner
from normdive.web.services import Services, services
from normdive.web.view import Refusal, build_page_view

router = APIRouter()

Outcome = tuple[EventKind, Mapping[str, Any]]
# The longest value of one form field that is passed on; the takeaway is the longest (2,000
# characters), and the store caps raw answers itself. Beyond this it is not a learner typing.
MAX_FIELD_CHARS = 20_000


@dataclass(frozen=True)
class FormAction:
    """One form of the page: what it does and what it re-renders."""

    name: str  # the form's name in PageView.refusal
    anchor: str  # where a no-JavaScript success lands
    fragments: tuple[str, ...]  # regions the page script swaps after this action
    act: Callable[[LessonState, Lesson, dict[str, str]], Outcome]
    announce: Callable[[LessonState, Lesson, Mapping[str, Any]], str]


def _field_values(form: FormData) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, value in form.multi_items():
        if isinstance(value, str):
            values[key] = value[:MAX_FIELD_CHARS]
    return values


def _predict_announcement(state: LessonState, lesson: Lesson, _: Mapping[str, Any]) -> str:
    chosen = next((c.label for c in lesson.predict.choices if c.id == state.prediction), "")
    return f"{lesson.predict.committed_text} {chosen}"


def _numbers_announcement(state: LessonState, lesson: Lesson, payload: Mapping[str, Any]) -> str:
    parts = []
    for answer in payload.get("answers", []):
        number_field = lesson.field(str(answer.get("field")))
        field_state = state.fields.get(str(answer.get("field")))
        if number_field is None or field_state is None:
            continue
        said = lesson.numbers.landed_text if field_state.landed else (field_state.message or "")
        parts.append(f"{number_field.label}: {said}")
    return " ".join(parts)


def _reading_announcement(state: LessonState, _lesson: Lesson, _p: Mapping[str, Any]) -> str:
    return state.reading.feedback or ""


def _takeaway_announcement(_s: LessonState, _l: Lesson, _p: Mapping[str, Any]) -> str:
    return "Saved"


PREDICT = FormAction(
    name="predict",
    anchor="try",
    fragments=(
        "predict-body",
        "try-lock",
        "eps-control",
        "own-row",
        "numbers",
        "reading",
        "hints-body",
        "gate",
    ),
    act=lambda state, lesson, form: commit_prediction(state, lesson, form.get("choice", "")),
    announce=_predict_announcement,
)
NUMBERS = FormAction(
    name="numbers",
    anchor="numbers-section",
    fragments=("numbers", "hints-body", "gate"),
    act=lambda state, lesson, form: check_numbers(
        state, lesson, {k: v for k, v in form.items() if k in state.fields}
    ),
    announce=_numbers_announcement,
)
READING = FormAction(
    name="reading",
    anchor="reading-section",
    fragments=("reading", "hints-body", "gate"),
    act=lambda state, lesson, form: lock_reading(state, lesson, form.get("choice", "")),
    announce=_reading_announcement,
)
TAKEAWAY = FormAction(
    name="takeaway",
    anchor="takeaway-section",
    fragments=("takeaway-status",),
    act=lambda state, lesson, form: save_takeaway(state, lesson, form.get("text", "")),
    announce=_takeaway_announcement,
)


def _perform(svc: Services, request: Request, action: FormAction, form: dict[str, str]) -> Response:
    learner = resolve_learner(request, svc.store, svc.signer)
    state = svc.state_of(learner.id)
    refusal: Refusal | None = None
    payload: Mapping[str, Any] = {}
    try:
        kind, payload = action.act(state, svc.lesson, form)
    except Conflict as exc:
        status, refusal = 409, Refusal(action.name, exc.message, form)
    except Invalid as exc:
        status, refusal = 422, Refusal(action.name, exc.message, form)
    else:
        svc.store.append(learner.id, kind, payload)
        state = svc.state_of(learner.id)
        status = 200

    response: Response
    if refusal is None and not wants_json(request):
        response = RedirectResponse(f"/#{action.anchor}", status_code=303)
    else:
        view = build_page_view(svc.lesson, state, learner.id, refusal=refusal)
        message = refusal.message if refusal else action.announce(state, svc.lesson, payload)
        if wants_json(request):
            fragments = svc.renderer.fragments(action.fragments, view)
            body = {"ok": refusal is None, "message": message, "fragments": fragments}
            response = JSONResponse(body, status)
        elif state.prerequisite_done:
            response = HTMLResponse(svc.renderer.page(view), status)
        else:
            response = HTMLResponse(svc.renderer.locked(view, message), status)
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


async def _run(request: Request, action: FormAction) -> Response:
    form = _field_values(await request.form())
    return await run_in_threadpool(_perform, services(request), request, action, form)


@router.post("/predict")
async def predict(request: Request) -> Response:
    """Commit the opening prediction (once; it never changes)."""
    return await _run(request, PREDICT)


@router.post("/numbers")
async def numbers(request: Request) -> Response:
    """Check the six numbers (fields named by the lesson's field ids)."""
    return await _run(request, NUMBERS)


@router.post("/reading")
async def reading(request: Request) -> Response:
    """Lock a reading of the epsilon."""
    return await _run(request, READING)


@router.post("/takeaway")
async def takeaway(request: Request) -> Response:
    """Save the takeaway (button or autosave)."""
    return await _run(request, TAKEAWAY)


# --- the host platform reports that lesson 8.5 is done ---------------------------------------


def _json_message(ok: bool, message: str, status: int, **extra: Any) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"ok": ok, "message": message, **extra}, status, headers=headers)


def _bearer_token(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _record_prerequisite(svc: Services, learner_id: str) -> JSONResponse:
    if not svc.store.learner_exists(learner_id):
        return _json_message(False, f"No learner with id {learner_id}.", 404)
    prerequisite = svc.lesson.prerequisite
    events = svc.store.events_for(learner_id)
    if any(event.kind == EventKind.PREREQUISITE_DONE for event in events):
        message = f"{prerequisite.id} was already recorded as done for {learner_id}."
        return _json_message(True, message, 200, already_done=True)
    svc.store.append(learner_id, EventKind.PREREQUISITE_DONE, {"source": "host"})
    message = f"Recorded: {prerequisite.id} is done for {learner_id}."
    return _json_message(True, message, 200, already_done=False)


@router.post("/api/prerequisite")
async def prerequisite_done(request: Request) -> Response:
    """The host platform says a learner finished 8.5: JSON {"learner_id": "..."} with
    `Authorization: Bearer <host token>`."""
    svc = services(request)
    expected = svc.settings.host_token
    if expected is None:
        return _json_message(
            False, "This server accepts no prerequisite reports: it has no host token set.", 503
        )
    given = _bearer_token(request)
    if given is None:
        return _json_message(False, "Send the host token as Authorization: Bearer <token>.", 401)
    if not hmac.compare_digest(given.encode(), expected.get_secret_value().encode()):
        return _json_message(False, "That host token is not the one this server expects.", 401)
    try:
        body = json.loads(await request.body())
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    learner_id = body.get("learner_id") if isinstance(body, dict) else None
    if not isinstance(learner_id, str) or not is_learner_id(learner_id):
        return _json_message(
            False,
            'Send a JSON object {"learner_id": "..."} with a 32-character hex learner id.',
            422,
        )
    return await run_in_threadpool(_record_prerequisite, svc, learner_id)
