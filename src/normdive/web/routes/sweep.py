"""Routes of the panel "Does it hold at other depths?": its figures as a fragment the lesson
page loads when the panel opens, and the same as a page of its own (for a page without
JavaScript, and a picked cell in the player).

Each answers only once the learner's gate has closed (the panel never changes the gate), and
reads the sweep file (beside the recording, recording.sweep.sweep_path_for) only when asked:
the lesson page itself never reads it for the panel.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from normdive.lesson.translations import localized
from normdive.recording.reader import RecordingProblem
from normdive.recording.runs import Runs
from normdive.recording.sweep import sweep_path_for
from normdive.recording.sweep_reader import sweep_status
from normdive.web.infrastructure.identity import attach_cookie, resolve_learner
from normdive.web.infrastructure.learners import log_recording_problem
from normdive.web.infrastructure.services import Services, services
from normdive.web.views.sweep import CELL_PARAM, SweepPanelView, sweep_panel_view


def panel_for(svc: Services, picked: str | None) -> SweepPanelView:
    """The panel's figures, or the lesson's sentence for a sweep that is missing or unusable
    (the author's message goes to the log). The recording the learner played is marked in
    them and said in the intro."""
    status = sweep_status(sweep_path_for(svc.settings.recording_path))
    if isinstance(status, RecordingProblem):
        if status.reason != "missing":
            log_recording_problem(status.reason, status.message)
        text = localized(svc.lesson).sweep
        return SweepPanelView(problem=text.missing if status.reason == "missing" else text.unusable)
    played = svc.recording()
    return sweep_panel_view(
        status, localized(svc.lesson), picked, played if isinstance(played, Runs) else None
    )


def _gate_closed(svc: Services, learner_id: str) -> bool:
    return svc.state_of(learner_id).gate.closed


def _sweep_page(svc: Services, request: Request, fragment: bool) -> Response:
    learner = resolve_learner(request, svc.signer)
    picked = request.query_params.get(CELL_PARAM)
    if not _gate_closed(svc, learner.id):
        panel = SweepPanelView(problem=localized(svc.lesson).sweep.locked, refused=True)
        status = 409
    else:
        panel = panel_for(svc, picked)
        status = 200
    render = svc.renderer.sweep_fragment if fragment else svc.renderer.sweep_page
    response = HTMLResponse(render(localized(svc.lesson), panel), status)
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


def sweep_page(request: Request) -> Response:
    """The runs at other depths as a page of its own, a picked cell (?cell=) in the player."""
    return _sweep_page(services(request), request, False)


def sweep_panel(request: Request) -> Response:
    """The same figures as the fragment the lesson page swaps into its panel."""
    return _sweep_page(services(request), request, True)


routes = [
    Route("/depths", sweep_page, methods=["GET"]),
    Route("/depths/panel", sweep_panel, methods=["GET"]),
]
