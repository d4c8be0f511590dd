"""Routes of the panel "Train one yourself": the panel's controls as a fragment the lesson page
loads when the panel opens (with the open run's chart, its recorded cell drawn), the same
panel as a page of its own (without JavaScript: the learner's runs and the recorded lab grid
as a table), and the two writes: commit a prediction for an offered configuration, and keep a
finished run's figures.

Every route answers only once the learner's gate has closed; the lab's events are no part of
the gate (progress.lab). The grid (beside the recording, recording.lab_grid.lab_path_for) is read
only when asked: the lesson page never reads it.

Writes go through the checks every form passes (web.security: the form token, the origin, the
attempts limit) and are decided on the learner's lab events with Store.append_decided, so a
run is committed once and its figures kept once however many requests race.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from normdive.i18n.catalogues import N_, gettext, ngettext, pgettext
from normdive.i18n.numbers import shown_in
from normdive.lesson.content import Lesson
from normdive.lesson.translations import localized
from normdive.progress.actions import Action, ActionRefused
from normdive.progress.figures import percent
from normdive.progress.lab import (
    RESULT_FIELD,
    ROW_SWITCHES,
    LabRun,
    commit_lab_run,
    comparison,
    config_name,
    eps_text,
    finish_lab_run,
    lab_runs,
    open_run,
    outcome_sentence,
    run_line,
)
from normdive.progress.sweep import seed_words
from normdive.store.event_store import EventList
from normdive.web.infrastructure.admission import vouched_learner
from normdive.web.infrastructure.errors import error_response, wants_json
from normdive.web.infrastructure.forms import vouched_form
from normdive.web.infrastructure.identity import (
    attach_cookie,
    resolve_learner,
)
from normdive.web.infrastructure.learners import Refused, refusal_status, retry_headers
from normdive.web.infrastructure.services import Services, services
from normdive.web.views.charts import CurveChart
from normdive.web.views.lab_grid import LabGridView, PanelView, grid_or_sentence
from normdive.web.views.training_chart import TrainingLine, training_chart

PANEL_TEMPLATE = "lab_fragments.html"
# The open run's curve on the panel's chart, as lab-panel.js names it.
LIVE_LINE = "run"
NO_LAB_RUN = N_("There is no lab run {number!r}.")
# The grid's base configuration as the panel says it (_base_words), in the order it says it.
_BASE_FIELDS = (
    "d_model",
    "n_heads",
    "steps",
    "batch_size",
    "copy_length",
    "vocab_size",
    "eval_every",
)
# A lab write's decision on the learner's runs and the grid (then with the form too): the
# event to append. Raises Conflict / Invalid.
LabDecideOne = Callable[[tuple[LabRun, ...], LabGridView], Action]
LabDecideForm = Callable[[tuple[LabRun, ...], LabGridView, dict[str, str]], Action]


@dataclass(frozen=True)
class GridTable:
    init: str
    caption: str
    depths: tuple[int, ...]
    lines: tuple[tuple[str, tuple[str, ...]], ...]  # (row label, one text per depth)


@dataclass(frozen=True)
class LabResult:
    heading: str
    sentences: tuple[str, ...]


@dataclass(frozen=True)
class LabView(PanelView):
    config_line: str = ""
    trimmed: str | None = None
    runs: tuple[str, ...] = ()
    pending: str | None = None  # the open run, in words
    pending_data: str | None = None  # the open run as the browser trains it (JSON)
    result: LabResult | None = None  # the latest finished run
    tables: tuple[GridTable, ...] = ()
    eps_options: tuple[str, ...] = ()
    depths: tuple[int, ...] = ()  # the lesson's offered depths the grid has cells at
    rows: tuple[tuple[str, str], ...] = ()  # (key, label)
    inits: tuple[tuple[str, str], ...] = ()
    cells: str = "[]"  # the recorded points, so the form can say which have no cell
    pending_recorded: bool = True  # the open run has a recorded cell to be drawn against
    chart: CurveChart | None = None  # the open run's chart: its recorded cell, if any


def grid_view(svc: Services) -> LabGridView | str:
    """The grid, or the lesson's sentence for one missing or unusable."""
    return grid_or_sentence(svc.settings.recording_path, localized(svc.lesson))


def _percent(value: float) -> str:
    """A final accuracy as the panel writes it, in the current locale's writing."""
    return percent(value)


def _base_words(grid: LabGridView) -> str:
    b = grid.base
    # Counted by {eval_every}, the number a noun follows last ("every 25 steps"; in Arabic
    # "كل 25 خطوة", the singular after 11 to 99).
    return ngettext(
        "width {d_model} with {n_heads} heads, {steps} training steps of {batch_size} "
        "sequences, copying {copy_length} symbols of {vocab_size}, held-out figures every "
        "{eval_every} step",
        "width {d_model} with {n_heads} heads, {steps} training steps of {batch_size} "
        "sequences, copying {copy_length} symbols of {vocab_size}, held-out figures every "
        "{eval_every} steps",
        int(b["eval_every"]),
    ).format(**{key: b[key] for key in _BASE_FIELDS})


def _depths(lesson: Lesson, grid: LabGridView) -> tuple[int, ...]:
    """The offered depths the grid has recorded cells at (all offered, if it has none): a
    depth the lesson offers beyond the grid's is left out of the form and the tables."""
    recorded = {cell.choice.depth for cell in grid.cells}
    offered = tuple(lesson.lab.offered.depths)
    return tuple(depth for depth in offered if depth in recorded) or offered


def _tables(lesson: Lesson, grid: LabGridView) -> tuple[GridTable, ...]:
    offered = lesson.lab.offered
    depths = _depths(lesson, grid)
    labels: dict[str, str] = {row.key: row.label for row in lesson.rows}
    comma = pgettext("between the items of a list", ", ")
    tables = []
    for init in offered.inits:
        lines = []
        for key, (layernorm, _residual) in ROW_SWITCHES.items():
            for eps in offered.eps if layernorm else [None]:
                name = labels[key] + (
                    f"{comma}eps {shown_in(eps_text(float(eps)))}" if eps is not None else ""
                )
                texts = []
                for depth in depths:
                    found = [
                        cell
                        for cell in grid.cells
                        if (cell.choice.depth, cell.choice.row, cell.choice.init)
                        == (depth, key, init)
                        and (
                            (eps is None and cell.choice.eps is None)
                            or (
                                eps is not None
                                and cell.choice.eps is not None
                                and math.isclose(cell.choice.eps, float(eps))
                            )
                        )
                    ]
                    found.sort(key=lambda cell: cell.choice.seed)
                    texts.append(
                        " · ".join(_percent(c.final_accuracy) for c in found)
                        or lesson.lab.grid_none
                    )
                lines.append((name, tuple(texts)))
        seeds = sorted({c.choice.seed for c in grid.cells if c.choice.init == init})
        caption = lesson.lab.grid_caption.format(
            init=lesson.sweep.init_labels.get(init, init),
            seeds=seed_words(seeds) if seeds else lesson.lab.grid_none,
        )
        tables.append(GridTable(init, caption, depths, tuple(lines)))
    return tuple(tables)


def _result(lesson: Lesson, grid: LabGridView, run: LabRun) -> LabResult:
    assert run.final is not None
    figures = lesson.lab.result_figures.format(
        step=run.final.step,
        accuracy=_percent(run.final.heldout_accuracy),
        loss=shown_in(f"{run.final.heldout_loss:.4f}")
        if math.isfinite(run.final.heldout_loss)
        else "—",
    )
    cell = grid.cell(run.choice)
    said = comparison(lesson, run, cell.curve if cell is not None else None)
    heading = f"{lesson.lab.result_heading}: {config_name(lesson, run.choice)}"
    sentences = (figures, outcome_sentence(lesson, run), said)
    return LabResult(heading, tuple(s for s in sentences if s))


def lab_view(
    svc: Services, runs: tuple[LabRun, ...], message: str | None = None, refused: bool = False
) -> LabView:
    lesson = localized(svc.lesson)
    grid = grid_view(svc)
    lines = tuple(run_line(lesson, run) for run in runs)
    if isinstance(grid, str):
        return LabView(lesson, problem=grid, runs=lines, refused=refused)
    pending = open_run(runs)
    cell = grid.cell(pending.choice) if pending is not None else None
    recorded = pending is None or cell is not None
    finished = [run for run in runs if run.final is not None]
    offered = lesson.lab.offered
    cells = [
        [c.choice.depth, c.choice.row, c.choice.eps, c.choice.init, c.choice.seed]
        for c in grid.cells
    ]
    return LabView(
        lesson,
        config_line=lesson.lab.config_line.format(config=_base_words(grid)),
        trimmed=lesson.lab.trimmed.format(count=grid.left_out, offered=grid.offered_runs)
        if grid.left_out
        else None,
        runs=lines,
        pending=(
            lesson.lab.committed_sentence(pending.predicted, config_name(lesson, pending.choice))
            if pending is not None
            else None
        ),
        pending_data=_pending_data(lesson, grid, pending) if pending is not None else None,
        pending_recorded=recorded,
        result=_result(lesson, grid, finished[-1]) if finished else None,
        tables=_tables(lesson, grid),
        eps_options=tuple(f"{value.normalize():f}" for value in offered.eps),
        depths=_depths(lesson, grid),
        rows=tuple((row.key, row.label) for row in lesson.rows),
        inits=tuple((init, lesson.sweep.init_labels.get(init, init)) for init in offered.inits),
        message=message,
        refused=refused,
        cells=json.dumps(cells),
        chart=training_chart(
            grid.steps,
            [TrainingLine(LIVE_LINE, "", cell.curve if cell is not None else None)],
        )
        if pending is not None
        else None,
    )


def _pending_data(lesson: Lesson, grid: LabGridView, pending: LabRun) -> str:
    """What the trainer needs of the open run, as JSON: its number, config, seed and name."""
    choice = pending.choice
    return json.dumps(
        {
            "run": pending.number,
            "config": grid.config(choice),
            "seed": choice.seed,
            "name": config_name(lesson, choice),
        }
    )


def _runs(svc: Services, learner_id: str) -> tuple[LabRun, ...]:
    return lab_runs(svc.store.read(learner_id, EventList()).events)


def _render(svc: Services, macro: str, view: LabView) -> str:
    module: Any = svc.renderer.env.get_template(PANEL_TEMPLATE).module
    return str(Markup(getattr(module, macro)(view)).strip())


def _gate_closed(svc: Services, learner_id: str) -> bool:
    return svc.state_of(learner_id).gate.closed


def _lab_page(svc: Services, request: Request, fragment: bool) -> Response:
    learner = resolve_learner(request, svc.signer)
    if not _gate_closed(svc, learner.id):
        view = LabView(
            localized(svc.lesson), problem=localized(svc.lesson).lab.locked, refused=True
        )
        status = 409
    else:
        view = lab_view(svc, _runs(svc, learner.id))
        status = 200
    if fragment:
        body = _render(svc, "lab_body", view)
    else:
        body = svc.renderer.env.get_template("lab.html").render(
            lesson=localized(svc.lesson), view=view
        )
    response = HTMLResponse(body, status)
    attach_cookie(response, learner, svc.signer, svc.settings)
    return response


async def lab_page(request: Request) -> Response:
    """The lab as a page of its own: the learner's runs and the recorded grid as a table."""
    return await run_in_threadpool(_lab_page, services(request), request, False)


async def lab_panel(request: Request) -> Response:
    """The panel's controls, runs and grid, as the lesson page swaps them in."""
    return await run_in_threadpool(_lab_page, services(request), request, True)


class _NoGrid(ActionRefused):
    """The recorded lab grid a write is decided against cannot be used (503)."""


def _status(refused: Refused) -> int:
    """The HTTP status of a refused lab write: a grid that cannot be used is the server's
    (503); anything else as for every write."""
    return 503 if isinstance(refused, _NoGrid) else refusal_status(refused)


def _write(svc: Services, request: Request, learner_id: str, decide_one: LabDecideOne) -> Response:
    """Decide one lab write on the learner's lab runs and append it (Services.write_lab:
    refused before the gate closes and past the attempts limit); answer with the panel drawn
    again (JSON for the page script; a redirect to the lab page without it)."""

    def decide(runs: tuple[LabRun, ...]) -> Action:
        grid = grid_view(svc)  # read only once the gate and the limit let the write on
        if isinstance(grid, str):
            raise _NoGrid(grid)
        return decide_one(runs, grid)

    written = svc.write_lab(learner_id, decide)
    refused = written.refused
    view = lab_view(
        svc, written.runs, refused.message if refused else None, refused=refused is not None
    )
    message = refused.message if refused is not None else _said(svc, view)
    status = _status(refused) if refused is not None else 200
    headers = retry_headers(refused)
    response: Response
    if wants_json(request):
        body = {"ok": refused is None, "message": message, "html": _render(svc, "lab_body", view)}
        response = JSONResponse(body, status, headers=headers)
    elif refused is None:
        response = RedirectResponse("/lab#lab", status_code=303)
    else:
        page = svc.renderer.env.get_template("lab.html").render(
            lesson=localized(svc.lesson), view=view
        )
        response = HTMLResponse(page, status, headers=headers)
    attach_cookie(response, vouched_learner(request, learner_id), svc.signer, svc.settings)
    return response


def _said(svc: Services, view: LabView) -> str:
    """What a write's answer announces: the committed run, or the finished run's result."""
    if view.pending is not None:
        return view.pending
    if view.result is not None:
        return " ".join(view.result.sentences)
    return ""


async def _lab_write(request: Request, decide_one: LabDecideForm) -> Response:
    svc = services(request)
    checked = await vouched_form(request, svc.signer, svc.settings)
    if isinstance(checked, Response):
        return checked
    form = checked.fields
    return await run_in_threadpool(
        _write, svc, request, checked.learner_id, lambda runs, grid: decide_one(runs, grid, form)
    )


async def commit_run(request: Request) -> Response:
    """Commit a prediction for an offered configuration (fields depth, row, eps, init, seed,
    outcome); once, before it trains, never changed."""
    lesson = localized(services(request).lesson)
    return await _lab_write(request, lambda runs, _grid, form: commit_lab_run(runs, lesson, form))


async def finish_run(request: Request) -> Response:
    """Keep run `number`'s figures (field `result`: JSON {"final", "curve"}); once."""
    number = request.path_params["number"]
    lesson = localized(services(request).lesson)
    if not (number.isascii() and number.isdigit() and len(number) <= 6):
        return error_response(request, 404, gettext(NO_LAB_RUN).format(number=number[:20]))

    def decide(runs: tuple[LabRun, ...], grid: LabGridView, form: dict[str, str]) -> Action:
        return finish_lab_run(
            runs, lesson, int(number), form.get(RESULT_FIELD, ""), grid.chance_level, grid.steps
        )

    return await _lab_write(request, decide)


routes = [
    Route("/lab", lab_page, methods=["GET"]),
    Route("/lab/panel", lab_panel, methods=["GET"]),
    Route("/lab/runs", commit_run, methods=["POST"]),
    Route("/lab/runs/{number}/result", finish_run, methods=["POST"]),
]
