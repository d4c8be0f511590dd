"""The instructor view's lab table: each learner counted once per configuration with their
runs beside them, and a run whose final figure is more than the lesson's agreement points
from its recorded cell set apart, counted as neither right nor wrong."""

from __future__ import annotations

from typing import Any

import pytest

from lesson_answers import LESSON
from normdive.progress.events import EventKind
from normdive.progress.lab import LabChoice
from normdive.web.views.instructor_lab import Row, differs, tally
from normdive.web.views.lab_grid import GridCell, LabGridView

NEITHER = LabChoice(depth=4, layernorm=False, residual=False, eps=None, init="gpt2", seed=0)
BOTH = LabChoice(depth=2, layernorm=True, residual=True, eps=1e-5, init="gpt2", seed=0)
UNRECORDED = LabChoice(depth=3, layernorm=True, residual=True, eps=1e-5, init="gpt2", seed=1)
# The recording: Neither at chance, Both copies.
GRID = LabGridView(
    base={"steps": 40, "vocab_size": 4},
    cells=(GridCell(NEITHER, (), 0.25), GridCell(BOTH, (), 1.0)),
    left_out=0,
    offered_runs=2,
)


def _run(learner: str, run: int, choice: LabChoice, predicted: str, accuracy: Any) -> list[Row]:
    outcome = "learns" if isinstance(accuracy, float) and accuracy > 0.9 else "chance"
    return [
        (learner, EventKind.LAB_COMMITTED.value, run, predicted, choice.to_json(), None),
        (learner, EventKind.LAB_FINISHED.value, run, outcome, None, accuracy),
    ]


def test_one_learner_many_runs_counts_once() -> None:
    rows = [r for run in range(1, 62) for r in _run("ann", run, BOTH, "learns", 1.0)]
    rows += _run("bob", 1, BOTH, "chance", 1.0)
    [line] = tally(LESSON, rows, GRID).configs
    assert (line.learners, line.runs, line.trained, line.predicted_right, line.differs) == (
        2,
        62,
        2,
        1,
        0,
    )


def test_a_forged_run_differs_and_is_no_right_prediction() -> None:
    # Neither is recorded at chance; a browser posting 100 % predicted "learns".
    rows = _run("eve", 1, NEITHER, "learns", 1.0) + _run("amy", 1, NEITHER, "chance", 0.25)
    report = tally(LESSON, rows, GRID)
    [line] = report.configs
    assert (line.learners, line.trained, line.predicted_right, line.differs) == (2, 2, 1, 1)
    assert report.any_differs
    learns = dict(report.matrix)[next(o.label for o in LESSON.outcomes if o.id == "learns")]
    assert sum(learns) == 0  # eve's forged run is in no cell of the matrix


def test_a_run_is_held_to_the_recording_only_where_there_is_one() -> None:
    rows = _run("ann", 1, UNRECORDED, "learns", 1.0) + _run("bob", 1, NEITHER, "learns", 1.0)
    assert [line.differs for line in tally(LESSON, rows, GRID).configs] == [0, 1]
    assert [line.differs for line in tally(LESSON, rows, None).configs] == [0, 0]


@pytest.mark.parametrize(
    ("final", "recorded", "apart"),
    [
        (0.25, 0.25, False),
        (0.27, 0.25, False),  # 2 points: within
        (0.2701, 0.25, True),
        (0.0, 0.25, True),
        ("nan", 0.25, True),  # diverged where the recording did not
        ("nan", float("nan"), False),  # both diverged
        (0.25, float("nan"), True),
    ],
)
def test_differs(final: Any, recorded: float, apart: bool) -> None:
    assert differs(final, recorded, 2.0) is apart
