"""The instructor view's figures on "Train one yourself": how many of the pool's learners
trained a row of their own, the configurations they chose, and what they predicted against
what their runs did. One query over the pool's lab events, reading only the figures the
tables need from each payload (never a run's curve).

The pool is a course's learners (an LTI context's key) or, with None, the learners who came
outside any LMS, as the rest of the view counts them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Select, select

from normdive.lesson.content import Lesson
from normdive.progress.events import EventKind
from normdive.progress.lab import LabChoice, config_name
from normdive.store.tables import EventRecord, LtiContextMember, LtiLearner

LAB_KINDS = (EventKind.LAB_COMMITTED.value, EventKind.LAB_FINISHED.value)
# Configurations listed, most chosen first: the offered grid has about two hundred.
CONFIGS_SHOWN = 20


@dataclass(frozen=True)
class ConfigLine:
    name: str
    committed: int
    trained: int
    predicted_right: int


@dataclass(frozen=True)
class LabReport:
    committed_learners: int  # learners who committed at least one lab run
    trained_learners: int  # learners with at least one finished run
    configs: tuple[ConfigLine, ...]  # most chosen first, CONFIGS_SHOWN at most
    outcomes: tuple[tuple[str, str], ...]  # (id, label), in the lesson's order
    matrix: tuple[tuple[str, tuple[int, ...]], ...]  # predicted label, counts per actual

    @property
    def empty(self) -> bool:
        return self.committed_learners == 0


Row = tuple[str, str, Any, Any, Any]  # learner, kind, run, outcome, config


def _query(context_key: str | None) -> Any:
    payload = EventRecord.payload
    query = select(
        EventRecord.learner_id,
        EventRecord.kind,
        payload["run"].as_integer(),
        payload["outcome"].as_string(),
        payload["config"],
    ).where(EventRecord.kind.in_(LAB_KINDS))
    return in_pool(query, context_key).order_by(EventRecord.id)


def in_pool(query: Select[Any], context_key: str | None) -> Select[Any]:
    """`query` over events kept to the pool's learners: a course's (an LTI context's key), or
    with None those who came outside any LMS."""
    if context_key is None:
        return query.where(EventRecord.learner_id.not_in(select(LtiLearner.learner_id)))
    members = select(LtiContextMember.learner_id).where(LtiContextMember.context_key == context_key)
    return query.where(EventRecord.learner_id.in_(members))


def lab_report(engine: Engine, lesson: Lesson, context_key: str | None) -> LabReport:
    with engine.connect() as connection:
        rows: list[Row] = [tuple(row) for row in connection.execute(_query(context_key))]
    return tally(lesson, rows)


def tally(lesson: Lesson, rows: Iterable[Row]) -> LabReport:
    """The report from (learner, kind, run, outcome, config) rows, oldest first: the first
    commit and the first finish of each run count, as progress.lab keeps them."""
    commits: dict[tuple[str, int], tuple[str, str]] = {}  # -> (config name, predicted)
    finished: dict[tuple[str, int], str] = {}  # -> actual outcome
    for learner, kind, run, outcome, config in rows:
        if not isinstance(run, int):
            continue
        key = (learner, run)
        if kind == EventKind.LAB_COMMITTED.value and key not in commits:
            choice = LabChoice.from_json(config) if isinstance(config, dict) else None
            if choice is not None:
                commits[key] = (config_name(lesson, choice), str(outcome))
        elif kind == EventKind.LAB_FINISHED.value and key in commits and key not in finished:
            finished[key] = str(outcome)
    chosen: Counter[str] = Counter()
    trained: Counter[str] = Counter()
    right: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for key, (name, predicted) in commits.items():
        chosen[name] += 1
        if key in finished:
            trained[name] += 1
            right[name] += finished[key] == predicted
            pairs[(predicted, finished[key])] += 1
    outcomes = tuple((o.id, o.label) for o in lesson.outcomes)
    matrix = tuple(
        (label, tuple(pairs[(predicted, actual)] for actual, _ in outcomes))
        for predicted, label in outcomes
    )
    configs = tuple(
        ConfigLine(name, count, trained[name], right[name])
        for name, count in sorted(chosen.items(), key=lambda item: (-item[1], item[0]))
    )[:CONFIGS_SHOWN]
    return LabReport(
        committed_learners=len({learner for learner, _ in commits}),
        trained_learners=len({learner for learner, _ in finished}),
        configs=configs,
        outcomes=outcomes,
        matrix=matrix,
    )
