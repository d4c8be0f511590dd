"""The lab grid as the page uses it: read through normdive.lab.grid's reader, kept per file
(a change noticed by its stat), and reduced to what the panels draw: the base configuration,
each recorded cell's curve and final figures, and how much of what it offers the recording
left out.

The grid lives beside the recording: `<recording stem>-lab.json` (normdive.lab.grid.lab_path_for).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from normdive.lab.grid import LabGridProblem, lab_path_for, offered_points, parse_lab_grid
from normdive.lesson.content import Lesson
from normdive.progress.lab import LabChoice, figure
from normdive.recording.kept import KeptByStat
from normdive.recording.reader import MAX_RECORDING_BYTES
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
    base: dict[str, Any]  # the base LabConfig's fields, as JSON
    cells: tuple[GridCell, ...]
    # How many of the runs the grid offers (lab.grid.offered_points) have no recorded cell, of
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


def _view(raw: bytes, name: str) -> LabGridView:
    grid = parse_lab_grid(raw, name)
    plain = json.loads(grid.model_dump_json())
    cells = []
    for cell in plain["cells"]:
        choice = LabChoice.from_json(cell)
        if choice is not None:
            final = figure(cell["final"]["heldout_accuracy"])
            cells.append(GridCell(choice, tuple(cell["curve"]), final))
    offered = offered_points(grid.offered)
    left_out = sum(grid.cell(*point) is None for point in offered)
    return LabGridView(plain["base"], tuple(cells), left_out, len(offered))


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
