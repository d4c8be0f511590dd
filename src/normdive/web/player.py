"""The recording as the page shows it: the row in the player (its curve as a table and its
final figures), the provenance card, the per-block gradient bars, and the JSON the chart
fetches. Pure functions of the Recording and the Lesson (no I/O, no learner state).

The chart's data is NOT in the page: page.js fetches `row_payload` from
GET /recording/rows/{key}.json only when a row is played or shown again, so the page's first
load stays small. What the server renders is what a page without JavaScript needs: one row's
curve as a text table (the same figures the chart draws) and its final figures.

Non-finite figures are never dropped: the table spells them in words, and the JSON keeps the
recording's markers ("nan", "inf", "-inf") so the chart can mark those points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from normdive.lesson.content import Lesson
from normdive.numeric.display import non_finite_words
from normdive.progress import figures
from normdive.recording.format import ROW_KEYS, BlockGradNorms, Recording, RowKey, as_float

# Where the chart fetches one row's curves (every seed of it).
ROW_DATA_URL = "/recording/rows/{key}.json"
# Significant digits of a gradient norm: they span several orders of magnitude, so a fixed
# number of decimals would show the vanishing ones as 0.000.
NORM_DIGITS = 3
# The gradient bars: a viewBox of BAR_AREA_WIDTH x BAR_AREA_HEIGHT user units; a finite,
# positive norm gets at least MIN_BAR_HEIGHT so the smallest one is still seen as a bar.
BAR_AREA_WIDTH = 160
BAR_AREA_HEIGHT = 80
MIN_BAR_HEIGHT = 2.0
BAR_GAP = 4


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
    data_url: str
    points: tuple[CurvePointView, ...]
    accuracy: str
    loss: str
    exact_match: str
    full_accuracy_step: int | None
    learns_min: str  # the band edges the accuracy chart draws as dashed lines: "90 %"
    chance_max: str  # "12.5 %"

    @property
    def marks_crosses(self) -> bool:
        """Whether the charts mark a point with a cross: one of the played curve's points is not
        a finite number (player.js marks the played curve only)."""
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
class GradientBar:
    block: int  # 1 is the first block (nearest the embeddings)
    text: str  # the norm as a learner reads it
    x: float  # the bar's place and size in the chart's viewBox
    y: float
    width: float
    height: float
    marked: bool  # not a finite positive number: drawn as a mark, spelled in the text


@dataclass(frozen=True)
class GradientRow:
    key: str
    label: str
    bars: tuple[GradientBar, ...]


@dataclass(frozen=True)
class GradientTableRow:
    label: str
    step: int
    norms: tuple[str, ...]


@dataclass(frozen=True)
class GradientChart:
    step: int  # the update these bars show
    first: bool  # the first recorded update (the start of training)
    rows: tuple[GradientRow, ...]


@dataclass(frozen=True)
class GradientsView:
    depth: int
    low: str  # the shared scale's ends, as text
    high: str
    width: int
    height: int
    charts: tuple[GradientChart, ...]  # the first recorded update, then the last one
    table: tuple[GradientTableRow, ...]  # every recorded update of every row, for the table


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


def player_view(recording: Recording, lesson: Lesson, key: str) -> PlayerView | None:
    """The player's row at the page seed, or None when the recording has no such row."""
    text, known = lesson.row(key), row_key(key)
    row = recording.row(known) if known is not None else None
    if text is None or row is None:
        return None
    points = tuple(
        CurvePointView(
            step=point.step,
            accuracy=figures.percent(as_float(point.heldout_accuracy)),
            loss=figures.loss(as_float(point.heldout_loss)),
            exact_match=figures.percent(as_float(point.heldout_exact_match)),
            non_finite=_non_finite(
                point.heldout_accuracy, point.heldout_loss, point.heldout_exact_match
            ),
        )
        for point in row.curve
    )
    others = tuple(
        seed for seed in recording.seeds if seed != row.seed and recording.row(row.key, seed)
    )
    return PlayerView(
        key=row.key,
        label=text.label,
        seed=row.seed,
        other_seeds=others,
        steps=recording.config.steps,
        data_url=ROW_DATA_URL.format(key=row.key),
        points=points,
        accuracy=figures.percent(as_float(row.final.heldout_accuracy)),
        loss=figures.loss(as_float(row.final.heldout_loss)),
        exact_match=figures.percent(as_float(row.final.heldout_exact_match)),
        full_accuracy_step=row.final.first_step_at_full_accuracy,
        learns_min=figures.exact_percent(lesson.bands.learns_min_accuracy),
        chance_max=figures.exact_percent(_chance_max(recording, lesson)),
    )


def _chance_max(recording: Recording, lesson: Lesson) -> Decimal:
    return lesson.bands.chance_max_multiple / Decimal(recording.config.vocab_size)


def _date(created_at: str) -> str:
    try:
        moment = datetime.fromisoformat(created_at)
    except ValueError:
        return created_at
    zone = moment.tzname()
    return moment.strftime("%Y-%m-%d %H:%M") + (f" {zone}" if zone else "")


def provenance_view(recording: Recording, lesson: Lesson, file_name: str) -> ProvenanceView:
    made = recording.provenance
    config = recording.config
    return ProvenanceView(
        file=file_name,
        command=made.command,
        script=made.script,
        normdive_version=made.normdive_version,
        git_commit=made.git_commit,
        depth=config.depth,
        copy_length=config.copy_length,
        seed=recording.page_seed,
        seeds=", ".join(str(seed) for seed in recording.seeds),
        steps=config.steps,
        init=lesson.init_names.get(config.init, config.init),
        python_version=made.python_version,
        torch_version=made.torch_version,
        device=made.device,
        created_at=_date(made.created_at),
    )


def _bars(norms: list[float], low: float, high: float, depth: int) -> tuple[GradientBar, ...]:
    slot = BAR_AREA_WIDTH / depth
    bars = []
    for index, value in enumerate(norms):
        usable = math.isfinite(value) and value > 0
        if usable and high > low:
            fraction = (math.log10(value) - low) / (high - low)
            height = MIN_BAR_HEIGHT + fraction * (BAR_AREA_HEIGHT - MIN_BAR_HEIGHT)
        elif usable:
            height = float(BAR_AREA_HEIGHT)
        else:
            height = MIN_BAR_HEIGHT  # a flat mark on the axis: zero or not a number
        bars.append(
            GradientBar(
                block=index + 1,
                text=norm_text(value),
                x=round(index * slot + BAR_GAP / 2, 3),
                y=round(BAR_AREA_HEIGHT - height, 3),
                width=round(slot - BAR_GAP, 3),
                height=round(height, 3),
                marked=not usable,
            )
        )
    return tuple(bars)


def _at(points: list[BlockGradNorms], step: int) -> BlockGradNorms:
    """The recorded point at `step`, or the nearest one before it (rows record the same
    updates, but a hand-made file need not)."""
    earlier = [point for point in points if point.step <= step]
    return max(earlier, key=lambda p: p.step) if earlier else min(points, key=lambda p: p.step)


def gradients_view(recording: Recording, lesson: Lesson) -> GradientsView | None:
    """Each row's per-block gradient norms at the first recorded update and at the last, as
    bars on one logarithmic scale shared by every bar (the norms span many orders of
    magnitude: a block that gets no gradient would vanish on a linear scale, and the decay
    from block to block is what the picture is for). None without rows."""
    rows = [
        (text, row)
        for text in lesson.rows
        if (row := recording.row(text.key)) is not None and row.block_grad_norms
    ]
    if not rows:
        return None
    first = min(point.step for _, row in rows for point in row.block_grad_norms)
    last = max(point.step for _, row in rows for point in row.block_grad_norms)
    steps = [first] if last == first else [first, last]
    picked = [[(text, _at(row.block_grad_norms, step)) for text, row in rows] for step in steps]
    values = [as_float(n) for chart in picked for _, point in chart for n in point.norms]
    logs = [math.log10(v) for v in values if math.isfinite(v) and v > 0]
    low, high = (min(logs), max(logs)) if logs else (0.0, 0.0)
    depth = recording.config.depth
    return GradientsView(
        depth=depth,
        low=norm_text(10**low) if logs else norm_text(0.0),
        high=norm_text(10**high) if logs else norm_text(0.0),
        width=BAR_AREA_WIDTH,
        height=BAR_AREA_HEIGHT,
        charts=tuple(
            GradientChart(
                step=step,
                first=step == first,
                rows=tuple(
                    GradientRow(
                        key=text.key,
                        label=text.label,
                        bars=_bars([as_float(n) for n in point.norms], low, high, depth),
                    )
                    for text, point in chart
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
            for text, row in rows
            for point in sorted(row.block_grad_norms, key=lambda p: p.step)
        ),
    )


def row_payload(recording: Recording, lesson: Lesson, key: str) -> dict[str, Any] | None:
    """What the chart draws for one row: every seed's held-out accuracy and loss by step
    (the page seed first), the chance level and the band edges. Non-finite values keep the
    recording's markers. None when the recording has no such row at its page seed."""
    text, known = lesson.row(key), row_key(key)
    if text is None or known is None or recording.row(known) is None:
        return None
    seeds = [recording.page_seed, *(s for s in recording.seeds if s != recording.page_seed)]
    series = []
    for seed in seeds:
        row = recording.row(known, seed)
        if row is None:
            continue
        series.append(
            {
                "seed": seed,
                "page": seed == recording.page_seed,
                "step": [point.step for point in row.curve],
                "accuracy": [point.heldout_accuracy for point in row.curve],
                "loss": [point.heldout_loss for point in row.curve],
            }
        )
    return {
        "ok": True,
        "key": key,
        "label": text.label,
        "seed": recording.page_seed,
        "steps": recording.config.steps,
        "chance_level": 1 / recording.config.vocab_size,
        "learns_min": float(lesson.bands.learns_min_accuracy),
        "chance_max": float(_chance_max(recording, lesson)),
        "series": series,
    }
