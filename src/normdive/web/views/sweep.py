"""The panel "Does it hold at other depths?" as the page shows it: one table per
initialisation (depth against row, each cell a final accuracy with its seed spread, coloured
as a heatmap), the sentences the sweep file says, and a picked cell in the player. Pure
functions of the sweep's runs and the Lesson (no I/O, no learner state).

The table is the heatmap: it works without JavaScript and reads as a table to a screen reader;
the colour (a class per tenth of accuracy, CSS in page.css) only repeats what the figures say.
A picked cell's curves are drawn in the same player as a recording row's.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from normdive.i18n.catalogues import pgettext
from normdive.lesson.content import Lesson
from normdive.progress import figures
from normdive.progress.sweep import init_label, listed, seed_words, sweep_sentences
from normdive.recording.format import InitScheme, RowKey, as_float
from normdive.recording.runs import AblationPlan, Run, Runs, SweepPlan
from normdive.recording.sweep import SWEEP_INITS
from normdive.recording.sweep_reader import Cell, cells
from normdive.web.views.kept import kept
from normdive.web.views.player import PlayerView, row_key, run_player

# Where the standalone page and the panel's fragment are served.
SWEEP_PAGE_URL = "/depths"
SWEEP_PANEL_URL = "/depths/panel"
# The query parameter naming the cell in the player.
CELL_PARAM = "cell"
# The heatmap's classes: heat-0 (chance or below) .. heat-10 (every token right).
HEAT_STEPS = 10
# The sentence on what the learner played, kept per recording (every page once the gate has
# closed says it); a few recordings deep.
PLAYED_INTROS_KEPT = 4


@dataclass(frozen=True)
class SweepCellView:
    cell: str  # "8-gpt2-residual_only": the cell's id in URLs
    label: str  # the row as the page names it
    mean: str  # "20.6 %"
    spread: str  # "13.1 % to 26.3 %"
    name_suffix: str  # ", play Residuals only at depth 8, GPT-2 initialisation"
    heat: int  # 0 .. HEAT_STEPS
    href: str
    selected: bool


@dataclass(frozen=True)
class SweepDepthRow:
    depth: int
    seeds: str  # "seeds 0, 1 and 2"
    cells: tuple[SweepCellView | None, ...]  # in the page's row order
    here: bool = False  # the depth and initialisation of the recording the learner played


@dataclass(frozen=True)
class SweepGrid:
    init: str
    caption: str
    columns: tuple[str, ...]  # the row labels, in the page's order
    depths: tuple[SweepDepthRow, ...]


@dataclass(frozen=True)
class SweepPanelView:
    """The panel's figures, or the sentence saying why there are none (`problem`)."""

    problem: str | None
    refused: bool = False  # the problem is a refusal (the gate has not closed): an alert
    intro: str = ""  # what the learner played (played_intro), "" when not known
    grids: tuple[SweepGrid, ...] = ()
    sentences: tuple[str, ...] = ()
    player: PlayerView | None = None
    player_heading: str = ""
    player_note: str = ""


def cell_id(depth: int, init: str, key: str) -> str:
    return f"{depth}-{init}-{key}"


def parse_cell(text: str) -> tuple[int, InitScheme, RowKey] | None:
    """(depth, init, row key) from a cell id, or None when it names no cell."""
    depth, _, rest = text.partition("-")
    init, _, key = rest.partition("-")
    known = row_key(key)
    if (
        not (depth.isascii() and depth.isdigit())
        or len(depth) > 3
        or init not in SWEEP_INITS
        or known is None
    ):
        return None
    chosen: InitScheme = "gpt2" if init == "gpt2" else "pytorch"
    return int(depth), chosen, known


def _row_label(lesson: Lesson, key: str) -> str:
    text = lesson.row(key)
    return text.label if text is not None else key


def unbroken(figure: str) -> str:
    """A percentage whose number and "%" never part at a line end ("25.2 %" in a narrow cell);
    a figure in words ("not a number") still wraps between its words."""
    return figure.replace(" %", "\u00a0%")


def heat(accuracy: float, chance: float) -> int:
    """The heatmap's class for an accuracy: 0 at chance or below, HEAT_STEPS at 100 %."""
    if not math.isfinite(accuracy) or accuracy <= chance:
        return 0
    share = (accuracy - chance) / (1 - chance)
    return max(0, min(HEAT_STEPS, round(share * HEAT_STEPS)))


def _spread(cell: Cell, lesson: Lesson) -> str:
    """How far apart the cell's seeds ended: "one seed", "same at every seed", "25.0 % to
    50.0 %"; with a seed that ended on no number, each seed's figure in seed order, since a
    range cannot hold it ("50.0 % and not a number")."""
    text = lesson.sweep
    shown = [figures.percent(value) for value in cell.accuracies]
    if len(shown) == 1:
        return text.cell_one_seed
    if not all(math.isfinite(value) for value in cell.accuracies):
        return listed([unbroken(figure) for figure in shown])
    if len(set(shown)) == 1:
        return text.cell_same
    return text.cell_spread.format(
        low=unbroken(figures.percent(cell.low)), high=unbroken(figures.percent(cell.high))
    )


def cell_view(cell: Cell, lesson: Lesson, chance: float, picked: str | None) -> SweepCellView:
    text = lesson.sweep
    row = lesson.row(cell.key)
    label = row.label if row is not None else cell.key
    ident = cell_id(cell.depth, cell.init, cell.key)
    return SweepCellView(
        cell=ident,
        label=label,
        mean=unbroken(figures.percent(cell.mean)),
        spread=_spread(cell, lesson),
        name_suffix=pgettext("between the items of a list", ", ")
        + text.cell_label.format(row=label, depth=cell.depth, init=init_label(lesson, cell.init)),
        heat=heat(cell.mean, chance),
        href=f"{SWEEP_PAGE_URL}?{CELL_PARAM}={ident}#sweep-player",
        selected=ident == picked,
    )


@dataclass(frozen=True)
class _PickedCell:
    """A cell a learner picked, as the sweep recorded it."""

    depth: int
    init: str
    key: str
    label: str  # the row as the page names it
    runs: tuple[Run, ...]  # every seed's run, in the plan's seed order (never empty)


def _picked_cell(sweep: Runs, lesson: Lesson, picked: str) -> _PickedCell | None:
    """The cell `picked` names with its runs; None when it names none the sweep has."""
    parsed = parse_cell(picked)
    if parsed is None:
        return None
    depth, init, key = parsed
    row_text = lesson.row(key)
    seeds = sweep.plan_as(SweepPlan).seeds_at(depth)
    runs = tuple(
        run
        for seed in seeds
        if (run := sweep.row(key, depth=depth, init=init, seed=seed)) is not None
    )
    if not runs or row_text is None:
        return None
    return _PickedCell(depth, init, key, row_text.label, runs)


def _player(sweep: Runs, lesson: Lesson, picked: str) -> tuple[PlayerView, str, str] | None:
    cell = _picked_cell(sweep, lesson, picked)
    if cell is None:
        return None
    run, other_runs = cell.runs[0], cell.runs[1:]  # the page's run: the first seed's
    alone = run_player(run, other_runs, cell.label, lesson)
    view = dataclasses.replace(
        alone, learns_min=unbroken(alone.learns_min), chance_max=unbroken(alone.chance_max)
    )
    text = lesson.sweep
    heading = text.player_heading.format(
        row=cell.label, depth=cell.depth, init=init_label(lesson, cell.init), seed=view.seed
    )
    steps = run.config.steps
    note = (
        text.player_note.format(
            steps=steps,
            others=listed(
                [
                    text.other_seed.format(
                        seed=found.config.seed,
                        accuracy=unbroken(figures.percent(as_float(found.final.heldout_accuracy))),
                    )
                    for found in other_runs
                ]
            ),
        )
        if other_runs
        else text.player_note_alone.format(steps=steps)
    )
    return view, heading, note


@kept(PLAYED_INTROS_KEPT)
def played_intro(lesson: Lesson, recording: Runs) -> str:
    """The sentence on what the learner played: the recording's depth, initialisation and
    seeds (the player draws every recorded seed)."""
    plan = recording.plan_as(AblationPlan)
    return lesson.sweep.intro_played.format(
        depth=plan.base.depth,
        init=init_label(lesson, plan.base.init),
        seeds=seed_words(plan.seeds),
    )


def sweep_panel_view(
    sweep: Runs, lesson: Lesson, picked: str | None = None, played: Runs | None = None
) -> SweepPanelView:
    """The panel's figures; `played`, the recording the learner played, is marked in the
    tables (its depth under its initialisation) and said in the intro."""
    plan = sweep.plan_as(SweepPlan)
    here = (played.plan.base.depth, played.plan.base.init) if played is not None else None
    chance = 1 / plan.base.vocab_size
    by_place = {(c.depth, c.init, c.key): c for c in cells(sweep)}
    grids = []
    for init in plan.inits:
        label = init_label(lesson, init)
        grids.append(
            SweepGrid(
                init=init,
                caption=lesson.sweep.grid_caption.format(init=label),
                columns=tuple(_row_label(lesson, key) for key in plan.rows),
                depths=tuple(
                    SweepDepthRow(
                        depth=entry.depth,
                        here=(entry.depth, init) == here,
                        seeds=lesson.sweep.depth_seeds.format(seeds=seed_words(entry.seeds)),
                        cells=tuple(
                            cell_view(found, lesson, chance, picked)
                            if (found := by_place.get((entry.depth, init, key))) is not None
                            else None
                            for key in plan.rows
                        ),
                    )
                    for entry in plan.depths
                ),
            )
        )
    player = _player(sweep, lesson, picked) if picked else None
    return SweepPanelView(
        problem=None,
        intro=played_intro(lesson, played) if played is not None else "",
        grids=tuple(grids),
        sentences=tuple(sweep_sentences(sweep, lesson)),
        player=player[0] if player else None,
        player_heading=player[1] if player else "",
        player_note=player[2] if player else "",
    )
