"""The lab grid as the page uses it: read through normdive.recording.lab_grid's reader, kept per
file (a change noticed by its stat), and reduced to what the panels draw: the base
configuration, each recorded cell's curve and final figures, and how much of what it offers
the recording left out.

The grid lives beside the recording: `<recording stem>-lab.json` (recording.lab_grid.lab_path_for).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from normdive.lesson.content import Lesson
from normdive.progress.lab import CURVE_FIELDS, LabChoice, figure
from normdive.recording.kept import KeptByStat
from normdive.recording.lab_grid import LabGridProblem, lab_path_for, parse_lab_grid
from normdive.recording.reader import MAX_RECORDING_BYTES
from normdive.recording.runs import LabPlan
from normdive.recording.selection import Setting, select_one

logger = logging.getLogger(__name__)

GridProblem = Literal["missing", "unusable"]
CellKey = tuple[int, bool, bool, float | None, str, int]


@dataclass(frozen=True)
class PanelView:
    """What each training panel (the lab's, the re-run's) shows first: the lesson, why the
    panel cannot be used (a refusal when `refused`), and a write's refusal beside its
    controls."""

    lesson: Lesson
    problem: str | None = None
    refused: bool = False
    message: str | None = None


@dataclass(frozen=True)
class GridCell:
    choice: LabChoice
    curve: tuple[dict[str, Any], ...]  # points as JSON (markers for non-finite figures)
    final_accuracy: float


@dataclass(frozen=True)
class LabGridView:
    base: dict[str, Any]  # the grid's shared settings (a LabConfig's but its choices), as JSON
    cells: tuple[GridCell, ...]
    # How many of the runs the grid offers (LabPlan.planned) have no recorded cell, of
    # how many: counted, so that the page says it in its own language (the grid's `trimmed`
    # sentence is the recorder's, in English, for authors).
    left_out: int
    offered_runs: int

    @property
    def steps(self) -> int:
        return int(self.base["steps"])

    @property
    def chance_level(self) -> float:
        return 1 / int(self.base["vocab_size"])

    def cell(self, choice: LabChoice) -> GridCell | None:
        """The recorded cell of exactly this configuration and seed, if any (eps within
        recording.selection.EPS_MATCH)."""
        return select_one(self.cells, _cell_settings, **_choice_settings(choice))

    def config(self, choice: LabChoice) -> dict[str, Any]:
        """The whole LabConfig the browser trains, as the worker takes it."""
        return {**self.base, **{k: v for k, v in choice.to_json().items() if k != "seed"}}


def _choice_settings(choice: LabChoice) -> dict[str, Setting]:
    return asdict(choice)


def _cell_settings(cell: GridCell) -> dict[str, Setting]:
    return _choice_settings(cell.choice)


# What the browser trains is the base and a choice: the choice's settings are not the base's.
CHOICE_SETTINGS = frozenset({"depth", "init"})


def _view(raw: bytes, name: str) -> LabGridView:
    grid = parse_lab_grid(raw, name)
    plan = grid.plan_as(LabPlan)
    plain = json.loads(grid.model_dump_json())
    cells = []
    for run in plain["runs"]:
        choice = LabChoice.from_json(run["config"])
        if choice is not None:
            final = figure(run["final"]["heldout_accuracy"])
            curve = tuple({k: point[k] for k in CURVE_FIELDS} for point in run["curve"])
            cells.append(GridCell(choice, curve, final))
    offered = len(plan.planned())
    base = {k: v for k, v in plain["plan"]["base"].items() if k not in CHOICE_SETTINGS}
    return LabGridView(base, tuple(cells), offered - len(plain["runs"]), offered)


def _grid_or_problem(path: Path) -> LabGridView | GridProblem:
    try:
        return _view(path.read_bytes()[: MAX_RECORDING_BYTES + 1], path.name)
    except (LabGridProblem, OSError) as problem:
        logger.warning("the lab grid %s cannot be used: %s", path, problem)
        return "unusable"


_grids: KeptByStat[LabGridView | GridProblem] = KeptByStat(_grid_or_problem)


def grid_or_sentence(recording_path: Path, lesson: Lesson) -> LabGridView | str:
    """The grid beside the recording at `recording_path`, or the lesson's sentence for one
    missing or unusable."""
    grid = lab_grid(lab_path_for(recording_path))
    if grid == "missing":
        return lesson.lab.missing
    if grid == "unusable":
        return lesson.lab.unusable
    return grid


def lab_grid(path: Path) -> LabGridView | GridProblem:
    """The grid at `path`, or why it cannot be used (logged once per file state: it is read
    again only when its stat changes, recording.kept)."""
    try:
        return _grids.get(path)
    except FileNotFoundError:
        return "missing"
    except OSError:
        return "unusable"
