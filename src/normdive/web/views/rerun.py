"""What the panel "Re-run the ablation on this device" shows: the stack it trains against the
recording's, the controls with the set the browser trains next (as JSON for rerun.js), the
chart (each row's recorded cell and its curve on the device), and the side-by-side of the
four rows (the learner's prediction, the recording's outcome, the lab grid's cell at the
re-run's size, what the device did), with the sentence composed from the numbers once a set
is whole, and the learner's earlier sets.

    rerun_view(lesson, state, grid, sets, recorded_stack, message=None, refused=False)
        -> RerunView
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from normdive.i18n.catalogues import gettext, pgettext
from normdive.lesson.content import Lesson
from normdive.lesson.plurals import counted
from normdive.progress.ablation import RowState
from normdive.progress.figures import percent
from normdive.progress.rerun import (
    MAX_RERUNS,
    TOO_MANY_RERUNS,
    Rerun,
    complete,
    next_row,
    order_sentences,
    pairs,
    rerun_choice,
    row_keys,
)
from normdive.progress.state import LessonState
from normdive.web.views.charts import CurveChart, series_style
from normdive.web.views.lab_grid import LabGridView, PanelView
from normdive.web.views.training_chart import TrainingLine, training_chart

# The rows' colours on the chart and beside their names in the table (Okabe and Ito's
# palette for colour-blind readers, each at 4.5:1 or more on white), in the lesson's order.
ROW_COLOURS = ("#0072b2", "#b34700", "#007a5e", "#a3487e")
# The stack's settings the panel states, for the re-run and for the recording.
_STACK_FIELDS = ("depth", "d_model", "copy_length", "steps", "batch_size")


@dataclass(frozen=True)
class RerunRowView:
    key: str
    label: str
    colour: str
    predicted: str
    recording: str  # the recorded ablation's outcome: band and accuracy (HTML)
    small: str  # the lab grid's cell at the re-run's setting: its final accuracy (HTML)
    device: str  # what the learner's device did, or "not yet" (HTML)


@dataclass(frozen=True)
class RerunView(PanelView):
    smaller: str = ""
    start_label: str = ""
    data: str = "{}"  # the set the browser trains next, as rerun.js reads it
    chart: CurveChart | None = None
    rows: tuple[RerunRowView, ...] = ()
    kept: str = ""  # how many rows of the shown set are kept
    sentences: tuple[str, ...] = ()  # once the shown set is whole
    history: tuple[str, ...] = ()  # the earlier whole sets, one line each
    full: str | None = None  # why no other set can begin: as many are kept as the lab keeps


def _stack(lesson: Lesson, settings: Mapping[str, Any]) -> str:
    return lesson.rerun.stack.format(**{name: settings[name] for name in _STACK_FIELDS})


def _recorded_finals(state: LessonState) -> dict[str, float]:
    return {row.key: row.result.accuracy for row in state.ablation.rows if row.result is not None}


def _row_view(
    lesson: Lesson, row: RowState, colour: str, grid: LabGridView, shown: Rerun | None
) -> RerunRowView:
    text = lesson.rerun
    outcomes: dict[str, str] = {o.id: o.label for o in lesson.outcomes}
    cell = grid.cell(rerun_choice(lesson, row.key))
    kept = shown.row(row.key) if shown is not None else None
    result = row.result
    return RerunRowView(
        key=row.key,
        label=row.label,
        colour=colour,
        predicted=row.prediction_label or text.no_prediction,
        recording=_outcome(text.outcome_cell, result.band_label, result.accuracy_text)
        if result is not None
        else text.not_yet,
        small=_figure(percent(cell.final_accuracy)) if cell is not None else lesson.lab.grid_none,
        device=_outcome(
            text.outcome_cell,
            outcomes.get(kept.outcome, kept.outcome),
            percent(kept.final.heldout_accuracy),
        )
        if kept is not None
        else text.not_yet,
    )


def _figure(text: str) -> Markup:
    """A figure kept on one line ("100.0 %" never breaks before its "%")."""
    return Markup('<span class="figure">{}</span>').format(text)


def _outcome(template: str, band: str, accuracy: str) -> Markup:
    """An outcome in the table: its band and its figure, as the lesson's template puts them."""
    return escape(template).format(band=band, accuracy=_figure(accuracy))


def _history_line(lesson: Lesson, rerun: Rerun, recorded: dict[str, float]) -> str:
    labels: dict[str, str] = {row.key: row.label for row in lesson.rows}
    finals = rerun.finals()
    comma = pgettext("between the items of a list", ", ")
    shown = comma.join(f"{labels[key]} {percent(finals[key])}" for key in row_keys(lesson))
    differing = sum(
        not pair.agrees
        for pair in pairs(finals, recorded, row_keys(lesson), lesson.rerun.level_points)
    )
    ranking = (
        counted(lesson.rerun.pairs_differ, differing, count=differing)
        if differing
        else lesson.rerun.all_same
    )
    return lesson.rerun.history_line.format(number=rerun.number, finals=shown, ranking=ranking)


def _chart(lesson: Lesson, grid: LabGridView, shown: Rerun | None) -> CurveChart:
    """Each row's recorded cell, dashed, and its curve on the device in the set on show."""
    labels: dict[str, str] = {row.key: row.label for row in lesson.rows}
    lines = []
    for index, key in enumerate(row_keys(lesson)):
        cell = grid.cell(rerun_choice(lesson, key))
        kept = shown.row(key) if shown is not None else None
        lines.append(
            TrainingLine(
                key=key,
                label=labels[key],
                recorded=cell.curve if cell is not None else None,
                device=kept.curve if kept is not None else (),
                colour=ROW_COLOURS[index % len(ROW_COLOURS)],
                marker=series_style(index).marker,
            )
        )
    return training_chart(grid.steps, lines)


def _data(lesson: Lesson, grid: LabGridView, sets: tuple[Rerun, ...]) -> dict[str, Any]:
    """The set the browser trains next: its number, the index of its next row, and each row's
    configuration and seed."""
    number, key = next_row(sets, lesson)
    keys = row_keys(lesson)
    shown = sets[-1] if sets else None
    labels: dict[str, str] = {row.key: row.label for row in lesson.rows}
    rows = []
    for row_key in keys:
        choice = rerun_choice(lesson, row_key)
        rows.append(
            {
                "key": row_key,
                "name": labels[row_key],
                "config": grid.config(choice),
                "seed": choice.seed,
            }
        )
    return {
        "number": number,
        "next": keys.index(key),
        "full": number > MAX_RERUNS,
        "shownComplete": shown is not None and complete(shown, lesson),
        "steps": grid.steps,
        "rows": rows,
    }


def rerun_view(
    lesson: Lesson,
    state: LessonState,
    grid: LabGridView | str,
    sets: tuple[Rerun, ...],
    recorded_stack: Mapping[str, Any],
    message: str | None = None,
    refused: bool = False,
) -> RerunView:
    """The panel for a learner whose gate has closed (`grid`: the lab grid, or the lesson's
    sentence for one missing or unusable; `recorded_stack`: the recording's settings, for the
    sentence that compares the two stacks)."""
    text = lesson.rerun
    if not state.ablation.available:  # the recording cannot be used: say why, as the page does
        problem = state.ablation.problem or text.not_played
        return RerunView(lesson, problem=problem, refused=refused, message=message)
    if not state.ablation.all_played:
        return RerunView(lesson, problem=text.not_played, refused=refused, message=message)
    if isinstance(grid, str):
        return RerunView(lesson, problem=grid, refused=refused, message=message)
    recorded = _recorded_finals(state)
    shown = sets[-1] if sets else None
    whole = shown is not None and complete(shown, lesson)
    rows = tuple(
        _row_view(lesson, row, ROW_COLOURS[i % len(ROW_COLOURS)], grid, shown)
        for i, row in enumerate(state.ablation.rows)
    )
    data = _data(lesson, grid, sets)
    begun = shown is not None and not whole
    here = _stack(lesson, {**grid.base, "depth": text.config.depth})
    full = data["full"] and whole
    return RerunView(
        lesson,
        smaller=text.smaller.format(here=here, recorded=_stack(lesson, recorded_stack)),
        start_label=(
            text.continue_label if begun else text.again_label if whole else text.start_label
        ),
        data=json.dumps(data),
        chart=_chart(lesson, grid, shown),
        rows=rows,
        kept=text.kept_rows.format(done=len(shown.rows) if shown else 0, rows=len(rows)),
        sentences=order_sentences(lesson, shown.finals(), recorded) if whole and shown else (),
        history=tuple(
            _history_line(lesson, earlier, recorded)
            for earlier in sets[:-1]
            if complete(earlier, lesson)
        ),
        full=gettext(TOO_MANY_RERUNS).format(count=MAX_RERUNS) if full else None,
        message=message,
        refused=refused,
    )
