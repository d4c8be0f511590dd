"""The instructor view's figures on "Train one yourself": how many of the pool's learners
trained a row of their own, the configurations they chose, and what they predicted against
what their runs did, each learner counted once and a run that differs from its recorded cell
set apart. One query over the pool's lab events, reading only the figures the tables need
from each payload (never a run's curve).

The pool is a course's learners (an LTI context's key) or, with None, the learners who came
outside any LMS, as the rest of the view counts them.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Select, select

from normdive.lesson.content import Lesson
from normdive.progress.ablation import BAND_EDGE_SLACK
from normdive.progress.events import EventKind
from normdive.progress.lab import LabChoice, config_name, figure
from normdive.store.tables import EventRecord, LtiLearner, course_learners
from normdive.web.views.lab_grid import LabGridView

LAB_KINDS = (EventKind.LAB_COMMITTED.value, EventKind.LAB_FINISHED.value)
# Configurations listed, most chosen first: the offered grid has about two hundred.
CONFIGS_SHOWN = 20


@dataclass(frozen=True)
class ConfigLine:
    name: str
    learners: int  # learners who committed a run of it
    runs: int  # runs of it committed, by all of them
    trained: int  # learners who trained one to the end
    # Learners whose first run of it that agrees with the recording was predicted right.
    predicted_right: int
    # Runs whose final held-out accuracy is more than the lesson's agreement points from the
    # recorded cell of the same configuration (trained in the learner's browser, a run's
    # figures are the learner's word): neither right nor wrong.
    differs: int


@dataclass(frozen=True)
class LabReport:
    committed_learners: int  # learners who committed at least one lab run
    trained_learners: int  # learners with at least one finished run
    configs: tuple[ConfigLine, ...]  # most learners first, CONFIGS_SHOWN at most
    outcomes: tuple[tuple[str, str], ...]  # (id, label), in the lesson's order
    # Predicted label, learners per actual outcome: each learner's first run of each
    # configuration that agrees with the recording.
    matrix: tuple[tuple[str, tuple[int, ...]], ...]

    @property
    def empty(self) -> bool:
        return self.committed_learners == 0

    @property
    def any_differs(self) -> bool:
        return any(line.differs for line in self.configs)


Row = tuple[str, str, Any, Any, Any, Any]  # learner, kind, run, outcome, config, final accuracy


def _query(context_key: str | None) -> Any:
    payload = EventRecord.payload
    # The accuracy comes back as stored JSON (a float, or a marker such as "nan").
    query = select(
        EventRecord.learner_id,
        EventRecord.kind,
        payload["run"].as_integer(),
        payload["outcome"].as_string(),
        payload["config"],
        payload["final"]["heldout_accuracy"],
    ).where(EventRecord.kind.in_(LAB_KINDS))
    return in_pool(query, context_key).order_by(EventRecord.id)


def in_pool(query: Select[Any], context_key: str | None) -> Select[Any]:
    """`query` over events kept to the pool's learners: a course's (an LTI context's key), or
    with None those who came outside any LMS."""
    if context_key is None:
        return query.where(EventRecord.learner_id.not_in(select(LtiLearner.learner_id)))
    return query.where(EventRecord.learner_id.in_(course_learners(context_key)))


def lab_report(
    engine: Engine, lesson: Lesson, grid: LabGridView | None, context_key: str | None
) -> LabReport:
    with engine.connect() as connection:
        rows: list[Row] = [tuple(row) for row in connection.execute(_query(context_key))]
    return tally(lesson, rows, grid)


def differs(final: Any, recorded: float, points: float) -> bool:
    """Whether a run's final held-out accuracy (as stored) is more than `points` from the
    recorded cell's; a run and a cell that both diverged agree, one alone does not."""
    mine = figure(final)
    if math.isnan(mine) or math.isnan(recorded):
        return math.isnan(mine) != math.isnan(recorded)
    return abs(mine - recorded) * 100 > points + BAND_EDGE_SLACK * 100


def tally(lesson: Lesson, rows: Iterable[Row], grid: LabGridView | None) -> LabReport:
    """The report from (learner, kind, run, outcome, config, final accuracy) rows, oldest
    first: the first commit and the first finish of each run count, as progress.lab keeps
    them; each learner counts once per configuration, their runs beside them. Without the
    grid no run can be held to the recording, and none is said to differ."""
    points = float(lesson.lab.agreement_points)
    commits: dict[tuple[str, int], tuple[LabChoice, str]] = {}  # -> (configuration, predicted)
    finished: dict[tuple[str, int], tuple[str, bool]] = {}  # -> (actual outcome, differs)
    for learner, kind, run, outcome, config, final in rows:
        if not isinstance(run, int):
            continue
        key = (learner, run)
        if kind == EventKind.LAB_COMMITTED.value and key not in commits:
            choice = LabChoice.from_json(config) if isinstance(config, dict) else None
            if choice is not None:
                commits[key] = (choice, str(outcome))
        elif kind == EventKind.LAB_FINISHED.value and key in commits and key not in finished:
            cell = grid.cell(commits[key][0]) if grid is not None else None
            far = cell is not None and differs(final, cell.final_accuracy, points)
            finished[key] = (str(outcome), far)
    learners: dict[str, set[str]] = defaultdict(set)
    runs: Counter[str] = Counter()
    trained: dict[str, set[str]] = defaultdict(set)
    apart: Counter[str] = Counter()
    # Each learner's first run of each configuration that agrees with the recording.
    judged: dict[tuple[str, str], tuple[str, str]] = {}  # -> (predicted, actual)
    for (learner, run), (choice, predicted) in commits.items():
        name = config_name(lesson, choice)
        learners[name].add(learner)
        runs[name] += 1
        if (learner, run) not in finished:
            continue
        actual, run_differs = finished[(learner, run)]
        trained[name].add(learner)
        if run_differs:
            apart[name] += 1
        else:
            judged.setdefault((name, learner), (predicted, actual))
    right: Counter[str] = Counter(
        name for (name, _), (predicted, actual) in judged.items() if predicted == actual
    )
    pairs: Counter[tuple[str, str]] = Counter(judged.values())
    outcomes = tuple((o.id, o.label) for o in lesson.outcomes)
    matrix = tuple(
        (label, tuple(pairs[(predicted, actual)] for actual, _ in outcomes))
        for predicted, label in outcomes
    )
    configs = tuple(
        ConfigLine(name, len(who), runs[name], len(trained[name]), right[name], apart[name])
        for name, who in sorted(learners.items(), key=lambda item: (-len(item[1]), item[0]))
    )[:CONFIGS_SHOWN]
    return LabReport(
        committed_learners=len({learner for learner, _ in commits}),
        trained_learners=len({learner for learner, _ in finished}),
        configs=configs,
        outcomes=outcomes,
        matrix=matrix,
    )
