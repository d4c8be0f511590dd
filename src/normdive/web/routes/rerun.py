"""Routes of the panel "Re-run the ablation on this device": the panel's contents as a fragment
the lesson page loads when the panel opens, and the one write, keeping a row the learner's
device trained (each row an event, once, in the lesson's order: progress.rerun).

Both answer only once the learner's gate has closed, and the panel trains only once every
recorded row has played; the re-run's events are no part of the gate. The write goes
through the checks every form passes (web.security: the form token, the origin, the attempts
limit) and is decided on the learner's re-runs with Store.append_decided, so a row is kept
once however many requests race.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from normdive.i18n.catalogues import N_, gettext
from normdive.lesson.translations import localized
from normdive.progress.actions import Action, ActionRefused, unknown_row_message
from normdive.progress.figures import percent
from normdive.progress.lab import RESULT_FIELD
from normdive.progress.rerun import Rerun, finish_rerun_row, reruns
from normdive.progress.state import LessonState
from normdive.recording.runs import Runs
from normdive.store.event_store import EventList
from normdive.web.infrastructure.admission import vouched_learner
from normdive.web.infrastructure.errors import error_response
from normdive.web.infrastructure.forms import vouched_form
from normdive.web.infrastructure.identity import attach_cookie, resolve_learner
from normdive.web.infrastructure.learners import refusal_status, retry_headers
from normdive.web.infrastructure.services import Services, services
from normdive.web.views.lab_grid import grid_or_sentence
from normdive.web.views.rerun import RerunView, rerun_view

PANEL_TEMPLATE = "rerun_fragments.html"
NO_SUCH_RERUN = N_("There is no re-run {number!r}.")
# The longest re-run number or row key a path may name (MAX_RERUNS is two digits; keys are
# short words).
MAX_NUMBER_CHARS = 6
MAX_ROW_CHARS = 40


def _recorded_stack(svc: Services) -> dict[str, Any]:
    """The recording's settings, as the panel compares the two stacks (empty when the
    recording cannot be used: then no row has played and the panel says so)."""
    status = svc.recording()
    return status.plan.base.model_dump() if isinstance(status, Runs) else {}


def _view(
    svc: Services,
    learner_id: str,
    sets: tuple[Rerun, ...],
    message: str | None = None,
    state: LessonState | None = None,
) -> RerunView:
    """The panel drawn for the learner (`state`: theirs, when the caller derived it already)."""
    lesson = localized(svc.lesson)
    return rerun_view(
        lesson,
        state if state is not None else svc.state_of(learner_id),
        grid_or_sentence(svc.settings.recording_path, lesson),
        sets,
        _recorded_stack(svc),
        message=message,
        refused=message is not None,
    )


def _render(svc: Services, macro: str, view: RerunView) -> str:
    module: Any = svc.renderer.env.get_template(PANEL_TEMPLATE).module
    return str(Markup(getattr(module, macro)(view)).strip())


def _sets(svc: Services, learner_id: str) -> tuple[Rerun, ...]:
    return reruns(svc.store.read(learner_id, EventList()).events)


def _panel(svc: Services, request: Request) -> Response:
    learner = resolve_learner(request, svc.signer)
    state = svc.state_of(learner.id)
    if not state.gate.closed:
        lesson = localized(svc.lesson)
        view = RerunView(lesson, problem=lesson.rerun.locked, refused=True)
        status = 409
    else:
        view = _view(svc, learner.id, _sets(svc, learner.id), state=state)
        status = 200
    response = HTMLResponse(_render(svc, "rerun_body", view), status)
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


async def rerun_panel(request: Request) -> Response:
    """The panel's stack, controls and side-by-side, as the lesson page swaps them in."""
    return await run_in_threadpool(_panel, services(request), request)


class _NoGrid(ActionRefused):
    """The recorded lab grid a row is kept against cannot be used (503)."""


def _keep_row(
    svc: Services, request: Request, learner_id: str, number: int, row: str, text: str
) -> Response:
    lesson = localized(svc.lesson)

    def decide(sets: tuple[Rerun, ...]) -> Action:
        # The grid is read only once the gate and the limit let the write on.
        grid = grid_or_sentence(svc.settings.recording_path, lesson)
        if isinstance(grid, str):
            raise _NoGrid(grid)
        return finish_rerun_row(sets, lesson, number, row, text, grid.chance_level, grid.steps)

    written = svc.write_rerun(learner_id, decide)
    refused = written.refused
    view = _view(svc, learner_id, written.runs, refused.message if refused else None)
    if refused is None:
        kept = next(s for s in reversed(written.runs) if s.number == number).row(row)
        assert kept is not None
        names: dict[str, str] = {r.key: r.label for r in lesson.rows}
        said = lesson.rerun.row_finished.format(
            name=names[row], accuracy=percent(kept.final.heldout_accuracy)
        )
        message = " ".join((said, *view.sentences))
    else:
        message = refused.message
    body = {
        "ok": refused is None,
        "message": message,
        "results": _render(svc, "rerun_results", view),
        "data": view.data,
        "startLabel": view.start_label,
    }
    status = (
        200 if refused is None else 503 if isinstance(refused, _NoGrid) else refusal_status(refused)
    )
    response = JSONResponse(body, status, headers=retry_headers(refused))
    attach_cookie(response, vouched_learner(request, learner_id), svc.signer, svc.settings)
    return response


async def keep_row(request: Request) -> Response:
    """Keep row `row` of re-run `number` (field `result`: JSON {"final", "curve"}); once."""
    number, row = request.path_params["number"], request.path_params["row"]
    if not (number.isascii() and number.isdigit() and len(number) <= MAX_NUMBER_CHARS):
        return error_response(request, 404, gettext(NO_SUCH_RERUN).format(number=number[:20]))
    if len(row) > MAX_ROW_CHARS:
        return error_response(request, 404, unknown_row_message(row))
    svc = services(request)
    checked = await vouched_form(request, svc.signer, svc.settings)
    if isinstance(checked, Response):
        return checked
    text = checked.fields.get(RESULT_FIELD, "")
    return await run_in_threadpool(
        _keep_row, svc, request, checked.learner_id, int(number), row, text
    )


routes = [
    Route("/lab/rerun/panel", rerun_panel, methods=["GET"]),
    Route("/lab/reruns/{number}/rows/{row}", keep_row, methods=["POST"]),
]
