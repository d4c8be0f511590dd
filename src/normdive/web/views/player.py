"""The recording as the page shows it: the row in the player (its curves drawn as SVG, its
curve as a table and its final figures), every played row's curve on one chart, the
provenance card and the per-block gradient norms as dot plots. Pure functions of the
recording's runs and the Lesson (no I/O, no learner state), so each view is computed once per
recording and kept (web.views.kept): every learner who plays a row is shown the same objects,
which the renderer keeps drawn in turn (web.views.rendering).

The server draws every chart (web.views.charts), with or without JavaScript; a row just
played grows its curves with CSS. Non-finite figures are never dropped: the table spells them
in words and the charts mark them with a cross.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from normdive.lesson.content import Lesson
from normdive.like_named import like_named
from normdive.numeric.display import non_finite_words
from normdive.progress import figures
from normdive.progress.sweep import listed
from normdive.recording.format import ROW_KEYS, BlockGradNorms, RowKey, as_float, recorded
from normdive.recording.runs import AblationPlan, Run, Runs
from normdive.web.views.charts import (
    CurveChart,
    CurveSeries,
    DotPlotFrame,
    DotSeries,
    SeriesStyle,
    curve_chart,
    dot_plot_frame,
    dot_series,
    series_style,
)
from normdive.web.views.kept import kept

# Significant digits of a gradient norm: they span several orders of magnitude, so a fixed
# number of decimals would show the vanishing ones as 0.000.
NORM_DIGITS = 3
# Views kept per recording (web.views.kept), a few recordings deep (a recording changes only
# when its file does): a row's curves per row, the player per row and set of rows played
# (four rows: sixteen sets), one provenance card and one set of gradient plots.
ROWS_KEPT = 16
PLAYERS_KEPT = 128
RECORDING_VIEWS_KEPT = 4


@dataclass(frozen=True)
class CurvePointView:
    step: int
    accuracy: str  # "21.3 %", or "not a number"
    loss: str  # "2.204", or "infinity"
    exact_match: str
    non_finite: bool  # one of the three is not a finite number (the chart marks it)


@dataclass(frozen=True)
class PlayerView:
    """The row in the player: its page-seed curve and where it ended."""

    key: str
    label: str
    seed: int  # the page seed
    other_seeds: tuple[int, ...]  # the seeds drawn faintly behind it
    steps: int
    points: tuple[CurvePointView, ...]
    accuracy: str
    loss: str
    exact_match: str
    full_accuracy_step: int | None
    learns_min: str  # the band edges the accuracy chart draws as dashed lines: "90 %"
    chance_max: str  # "12.5 %"
    accuracy_chart: CurveChart
    loss_chart: CurveChart
    together: TogetherView | None = None  # two or more rows played: their curves on one chart

    @property
    def marks_crosses(self) -> bool:
        """Whether the charts mark a point with a cross: one of the played curve's points is not
        a finite number (the faint seeds' are not marked)."""
        return any(point.non_finite for point in self.points)


@dataclass(frozen=True)
class ProvenanceView:
    """Where the rows come from, as the provenance card lists it."""

    file: str  # the recording's file name (never the server's full path)
    command: str
    script: str
    normdive_version: str
    git_commit: str | None
    depth: int
    copy_length: int
    seed: int
    seeds: str  # "0, 1, 2"
    steps: int
    init: str  # the initialisation in words (Lesson.init_names)
    python_version: str
    torch_version: str
    device: str
    created_at: str  # "2025-11-30 00:24 UTC"


@dataclass(frozen=True)
class LegendEntry:
    """One row's key on a chart of several rows: its name beside a sample of its line and
    marker."""

    label: str
    style: SeriesStyle


@dataclass(frozen=True)
class GradientChart:
    step: int  # the update this plot shows
    first: bool  # the first recorded update (the start of training)
    label: str  # the plot's accessible name
    rows: tuple[DotSeries, ...]


@dataclass(frozen=True)
class GradientTableRow:
    label: str
    step: int
    norms: tuple[str, ...]


@dataclass(frozen=True)
class GradientsView:
    depth: int
    frame: DotPlotFrame  # the scale and axes both moments share
    legend: tuple[LegendEntry, ...]
    charts: tuple[GradientChart, ...]  # the first recorded update, then the last one
    table: tuple[GradientTableRow, ...]  # every recorded update of every row, for the table

    @property
    def low(self) -> str:
        return self.frame.low

    @property
    def high(self) -> str:
        return self.frame.high


@dataclass(frozen=True)
class TogetherView:
    """Every played row's curve (its page seed) on one accuracy chart."""

    label: str  # the chart's accessible name, each row with where it ended
    chart: CurveChart
    legend: tuple[LegendEntry, ...]


def row_key(key: str) -> RowKey | None:
    """`key` as one of the recording's row keys, or None when it names no row."""
    return key if key in ROW_KEYS else None


def norm_text(value: float) -> str:
    """A gradient norm with NORM_DIGITS significant digits: 0.00123 -> "0.00123",
    1.234e-07 -> "1.23e-07"; non-finite values in words."""
    if not math.isfinite(value):
        return non_finite_words(value)
    return f"{value:.{NORM_DIGITS}g}"


def _non_finite(*values: float | str) -> bool:
    return any(not math.isfinite(as_float(value)) for value in values)


@kept(PLAYERS_KEPT)
def player_view(
    recording: Runs, lesson: Lesson, key: str, played: Sequence[str] = ()
) -> PlayerView | None:
    """The player's row at the page seed, or None when the recording has no such row.
    `played`: the rows the learner has played, drawn together once there are two."""
    alone = _row_player(recording, lesson, key)
    if alone is None:
        return None
    together = together_view(recording, lesson, played)
    return alone if together is None else dataclasses.replace(alone, together=together)


@kept(ROWS_KEPT)
def _row_player(recording: Runs, lesson: Lesson, key: str) -> PlayerView | None:
    """The player's row alone: every player of the row shares its curves and charts."""
    text, known = lesson.row(key), row_key(key)
    run = recording.row(known) if known is not None else None
    if text is None or known is None or run is None:
        return None
    seeds = recording.plan_as(AblationPlan).seeds
    others = [
        found
        for seed in seeds
        if seed != run.config.seed and (found := recording.row(known, seed=seed)) is not None
    ]
    return run_player(run, others, text.label, lesson)


def run_player(run: Run, others: Sequence[Run], label: str, lesson: Lesson) -> PlayerView:
    """The player of `run` (named `label`), the runs of its `others` seeds faint behind it:
    a recording's row, or a cell of the depth sweep."""
    learns_min = lesson.bands.learns_min_accuracy
    chance_max = chance_max_of(run, lesson)
    accuracy_chart, loss_chart = curve_charts(run, others, run.config.steps, learns_min, chance_max)
    return PlayerView(
        key=run.config.row_key,
        label=label,
        seed=run.config.seed,
        other_seeds=tuple(found.config.seed for found in others),
        steps=run.config.steps,
        points=curve_points(run),
        accuracy=figures.percent(as_float(run.final.heldout_accuracy)),
        loss=figures.loss(as_float(run.final.heldout_loss)),
        exact_match=figures.percent(recorded(run.final.heldout_exact_match)),
        full_accuracy_step=run.final.first_step_at_full_accuracy,
        learns_min=figures.exact_percent(learns_min),
        chance_max=figures.exact_percent(chance_max),
        accuracy_chart=accuracy_chart,
        loss_chart=loss_chart,
    )


def curve_points(run: Run) -> tuple[CurvePointView, ...]:
    """A run's curve as its table shows it."""
    return tuple(
        CurvePointView(
            step=point.step,
            accuracy=figures.percent(as_float(point.heldout_accuracy)),
            loss=figures.loss(as_float(point.heldout_loss)),
            exact_match=figures.percent(exact),
            non_finite=_non_finite(point.heldout_accuracy, point.heldout_loss, exact),
        )
        for point in run.curve
        for exact in (recorded(point.heldout_exact_match),)
    )


def _series(run: Run, name: str, label: str, css: str, **look: Any) -> CurveSeries:
    return CurveSeries(
        label=label,
        steps=tuple(point.step for point in run.curve),
        values=tuple(as_float(getattr(point, name)) for point in run.curve),
        css=css,
        **look,
    )


def curve_charts(
    row: Run, others: Sequence[Run], steps: int, learns_min: Decimal, chance_max: Decimal
) -> tuple[CurveChart, CurveChart]:
    """The row's held-out accuracy and loss against step: the played seed in full, the other
    seeds faint behind it (a band between them when there are two or more), the band edges
    dashed on the accuracy chart."""
    edges = [(float(edge), figures.exact_percent(edge)) for edge in (learns_min, chance_max)]
    charts = []
    for name, percent in (("heldout_accuracy", True), ("heldout_loss", False)):
        series = [
            *(_series(other, name, f"seed {other.config.seed}", "other") for other in others),
            _series(row, name, f"seed {row.config.seed}", "played"),
        ]
        charts.append(
            curve_chart(series, steps=steps, percent=percent, rules=edges if percent else ())
        )
    return charts[0], charts[1]


def legend_entry(label: str, index: int) -> LegendEntry:
    return LegendEntry(label=label, style=series_style(index))


@kept(PLAYERS_KEPT)
def together_view(recording: Runs, lesson: Lesson, played: Sequence[str]) -> TogetherView | None:
    """The page seed's accuracy of every played row on one chart, each row in its own colour,
    line pattern and end marker (its place in the lesson's order); None before two rows have
    played."""
    text = lesson.ablation
    picked = [
        (index, row_text, row)
        for index, row_text in enumerate(lesson.rows)
        if row_text.key in played
        and (known := row_key(row_text.key)) is not None
        and (row := recording.row(known)) is not None
    ]
    if len(picked) < 2:
        return None
    series = [
        _series(
            row,
            "heldout_accuracy",
            row_text.label,
            series_style(index).css,
            dash=series_style(index).dash,
            marker=series_style(index).marker,
        )
        for index, row_text, row in picked
    ]
    edges = [
        (float(edge), figures.exact_percent(edge))
        for edge in (lesson.bands.learns_min_accuracy, chance_max_of(picked[0][2], lesson))
    ]
    ends = [
        text.together_row.format(
            row=row_text.label, accuracy=figures.percent(as_float(row.final.heldout_accuracy))
        )
        for _, row_text, row in picked
    ]
    return TogetherView(
        label=text.together_label.format(rows=listed(ends)),
        chart=curve_chart(series, steps=recording.plan.base.steps, percent=True, rules=edges),
        legend=tuple(legend_entry(row_text.label, index) for index, row_text, _ in picked),
    )


def chance_max_of(run: Run, lesson: Lesson) -> Decimal:
    """The accuracy below which `run` is at chance, by the lesson's bands."""
    return lesson.bands.chance_max_multiple / Decimal(run.config.vocab_size)


def _date(created_at: str) -> str:
    try:
        moment = datetime.fromisoformat(created_at)
    except ValueError:
        return created_at
    zone = moment.tzname()
    return moment.strftime("%Y-%m-%d %H:%M") + (f" {zone}" if zone else "")


@kept(RECORDING_VIEWS_KEPT)
def provenance_view(recording: Runs, lesson: Lesson, file_name: str) -> ProvenanceView:
    plan = recording.plan_as(AblationPlan)
    made = recording.provenance[0]
    config = plan.base
    return ProvenanceView(
        file=file_name,
        **like_named(made, "command", "script", "normdive_version", "git_commit"),
        **like_named(made, "python_version", "torch_version", "device"),
        **like_named(config, "depth", "copy_length", "steps"),
        seed=plan.page_seed,
        seeds=", ".join(str(seed) for seed in plan.seeds),
        init=lesson.init_names.get(config.init, config.init),
        created_at=_date(made.created_at),
    )


def _at(points: list[BlockGradNorms], step: int) -> BlockGradNorms:
    """The recorded point at `step`, or the nearest one before it (rows record the same
    updates, but a hand-made file need not)."""
    earlier = [point for point in points if point.step <= step]
    return max(earlier, key=lambda p: p.step) if earlier else min(points, key=lambda p: p.step)


@kept(RECORDING_VIEWS_KEPT)
def gradients_view(recording: Runs, lesson: Lesson) -> GradientsView | None:
    """Each row's per-block gradient norms at the first recorded update and at the last, as
    dot plots on one logarithmic scale that both moments share (so a fall from the first
    moment to the second is a fall on the page). The norms span many orders of magnitude: the
    scale covers the top of the data and at most charts.MAX_DECADES powers of ten below it,
    one labelled grid line per power of ten; a value further down sits at the floor as an
    arrow with its figure. None without rows."""
    rows = [
        (index, text, norms)
        for index, text in enumerate(lesson.rows)
        if (known := row_key(text.key)) is not None
        and (row := recording.row(known)) is not None
        and (norms := row.block_grad_norms)
    ]
    if not rows:
        return None
    first = min(point.step for _, _, norms in rows for point in norms)
    last = max(point.step for _, _, norms in rows for point in norms)
    steps = [first] if last == first else [first, last]
    picked = [[(index, text, _at(norms, step)) for index, text, norms in rows] for step in steps]
    depth = recording.plan.base.depth
    values = [as_float(n) for chart in picked for _, _, point in chart for n in point.norms]
    frame = dot_plot_frame(values, depth)
    label = lesson.ablation.gradients_chart_label
    return GradientsView(
        depth=depth,
        frame=frame,
        legend=tuple(legend_entry(text.label, index) for index, text, _ in rows),
        charts=tuple(
            GradientChart(
                step=step,
                first=step == first,
                label=label.format(step=step, low=frame.low, high=frame.high),
                rows=tuple(
                    dot_series(
                        frame,
                        text.key,
                        text.label,
                        index,
                        len(lesson.rows),
                        [as_float(n) for n in point.norms],
                        [norm_text(as_float(n)) for n in point.norms],
                    )
                    for index, text, point in chart
                ),
            )
            for step, chart in zip(steps, picked, strict=True)
        ),
        table=tuple(
            GradientTableRow(
                label=text.label,
                step=point.step,
                norms=tuple(norm_text(as_float(n)) for n in point.norms),
            )
            for _, text, norms in rows
            for point in sorted(norms, key=lambda p: p.step)
        ),
    )
