"""The instructor view's figures on "Re-run the ablation on this device": how many of the
pool's learners re-ran a row on their own device, how many finished a whole re-run (all four
rows), how many complete re-runs ranked the rows as the shipped recording does
(progress.rerun.ranking_matches), and each row's mean final accuracy over the complete
re-runs beside the recording's. One query over the pool's rerun_row_finished events, reading
only the learner, the re-run's number, the row and the final held-out accuracy of each
payload (never a row's curve).

The pool is a course's learners (an LTI context's key) or, with None, the learners who came
outside any LMS, as the rest of the view counts them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, Select, select

from normdive.lesson.content import Lesson
from normdive.progress.events import EventKind
from normdive.progress.facts import RecordingFacts
from normdive.progress.figures import percent
from normdive.progress.lab import figure
from normdive.progress.rerun import ranking_matches, row_keys
from normdive.store.tables import EventRecord
from normdive.web.views.instructor_lab import in_pool

Row = tuple[str, Any, Any, Any]  # learner, re-run number, row key, final held-out accuracy


@dataclass(frozen=True)
class RerunRowLine:
    """One row of the ablation: the devices' mean final held-out accuracy over the complete
    re-runs (None while there is none) and the recording's (None when it cannot be used);
    fractions 0..1, a diverged run counted as 0 as progress.rerun ranks it."""

    key: str
    label: str
    device: float | None
    recorded: float | None

    @property
    def device_shown(self) -> str:
        return "" if self.device is None else percent(self.device)

    @property
    def recorded_shown(self) -> str:
        return "" if self.recorded is None else percent(self.recorded)


@dataclass(frozen=True)
class RerunReport:
    learners: int  # learners who finished at least one row on their device
    whole_learners: int  # learners who finished all four rows of at least one re-run
    complete: int  # complete re-runs (a learner's set holding all four rows)
    matching: int | None  # complete re-runs ranked as the recording; None: it cannot be used
    rows: tuple[RerunRowLine, ...]  # in the lesson's order
    # Learners whose first complete re-run ranked as the recording (one learner's many
    # re-runs count once here); None: it cannot be used.
    first_matching: int | None = None

    @property
    def empty(self) -> bool:
        return self.learners == 0

    @property
    def recording_usable(self) -> bool:
        return self.matching is not None


def _query(context_key: str | None) -> Select[Any]:
    payload = EventRecord.payload
    # The number and the accuracy come back as stored JSON (an int; a float or a marker such
    # as "nan"), read in Python: a cast in SQL would fail on a payload of another shape.
    query = select(
        EventRecord.learner_id,
        payload["rerun"],
        payload["row"].as_string(),
        payload[("final", "heldout_accuracy")],
    ).where(EventRecord.kind == EventKind.RERUN_ROW_FINISHED.value)
    return in_pool(query, context_key).order_by(EventRecord.id)


def rerun_report(
    engine: Engine, lesson: Lesson, recording: RecordingFacts, context_key: str | None
) -> RerunReport:
    with engine.connect() as connection:
        rows: list[Row] = [tuple(row) for row in connection.execute(_query(context_key))]
    return tally(lesson, recording, rows)


def _counted(accuracy: float) -> float:
    """A final accuracy as the ranking counts it: a figure that is not a number is 0."""
    return accuracy if math.isfinite(accuracy) else 0.0


def recorded_finals(lesson: Lesson, recording: RecordingFacts) -> dict[str, float] | None:
    """The recording's final held-out accuracy of each of the lesson's rows, or None when the
    recording cannot be used or lacks one of them."""
    if recording.problem is not None:
        return None
    finals = {row.key: row.accuracy for row in recording.rows}
    if not set(row_keys(lesson)) <= finals.keys():
        return None
    return finals


def tally(lesson: Lesson, recording: RecordingFacts, rows: Iterable[Row]) -> RerunReport:
    """The report from (learner, re-run number, row key, final accuracy) rows, oldest first:
    the first finish of each row of each re-run counts, as progress.rerun keeps them; a row
    that is not one of the lesson's, or a number that is not a whole number, is passed over."""
    keys = row_keys(lesson)
    sets: dict[tuple[str, int], dict[str, float]] = {}
    for learner, number, key, accuracy in rows:
        if not isinstance(number, int) or isinstance(number, bool) or key not in keys:
            continue
        sets.setdefault((learner, number), {}).setdefault(key, _counted(figure(accuracy)))
    whole = {found: finals for found, finals in sets.items() if finals.keys() >= set(keys)}
    recorded = recorded_finals(lesson, recording)
    first: dict[str, dict[str, float]] = {}  # each learner's first complete re-run
    for (learner, _number), finals in sorted(whole.items(), key=lambda item: item[0][1]):
        first.setdefault(learner, finals)

    def matching(sets: Iterable[dict[str, float]]) -> int | None:
        """How many of `sets` ranked the rows as the recording; None when it cannot be used."""
        if recorded is None:
            return None
        level = lesson.rerun.level_points
        return sum(ranking_matches(finals, recorded, keys, level) for finals in sets)

    labels: dict[str, str] = {row.key: row.label for row in lesson.rows}
    lines = tuple(
        RerunRowLine(
            key,
            labels[key],
            _mean([finals[key] for finals in whole.values()]),
            None if recorded is None else _counted(recorded[key]),
        )
        for key in keys
    )
    return RerunReport(
        learners=len({learner for learner, _ in sets}),
        whole_learners=len({learner for learner, _ in whole}),
        complete=len(whole),
        matching=matching(whole.values()),
        rows=lines,
        first_matching=matching(first.values()),
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def rerun_aggregate(report: RerunReport) -> dict[str, Any]:
    """The report as the instructor view's aggregate JSON holds it: counts, and each row's
    figures as fractions 0..1 (null where there is none)."""
    rows = {
        line.key: {"device_mean_accuracy": line.device, "recorded_accuracy": line.recorded}
        for line in report.rows
    }
    return {
        "learners": report.learners,
        "learners_with_a_complete_rerun": report.whole_learners,
        "complete_reruns": report.complete,
        "complete_reruns_ranked_as_the_recording": report.matching,
        "learners_whose_first_complete_rerun_ranked_as_the_recording": report.first_matching,
        "rows": rows,
    }
