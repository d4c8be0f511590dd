"""The instructor view's data for one pool: one row per learner, read in one streamed query
(Snapshots.pool: each learner's summary record, kept beside their History), each learner
summed up (progress.report.summary_from_record) and the summaries added up
(PoolReportBuilder), which each worker keeps per pool and brings up to date with the
summaries that changed (PoolReports). The page and the CSV read the same summaries."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from normdive.i18n.catalogues import gettext, ngettext
from normdive.lesson.content import Lesson
from normdive.lti.roster import Roster, RosterEntry
from normdive.progress.facts import RecordingFacts, recording_facts
from normdive.progress.report import (
    TIE,
    LearnerSummary,
    PoolReport,
    summary_from_record,
)
from normdive.progress.report_export import columns, headers, record, spreadsheet_safe
from normdive.store.snapshots import Snapshots
from normdive.web.infrastructure.instructor_access import Pool
from normdive.web.infrastructure.services import Services

# Learners per chunk of the streamed CSV: a chunk is about 300 bytes a learner.
CSV_ROWS_PER_CHUNK = 500
# The columns a course with a roster (LTI Names and Role Provisioning Services) adds, last.
ROSTER_COLUMNS = ("roster_member", "roster_status", "roster_roles", "name", "email")


def pool_recording(svc: Services) -> RecordingFacts:
    return recording_facts(svc.recording())


def learner_summaries(
    snapshots: Snapshots, recording: RecordingFacts, context_key: str | None
) -> Iterator[LearnerSummary]:
    """Each learner of the pool summed up, one at a time, by learner id."""
    best_row = recording.best_row
    for member in snapshots.pool(context_key):
        yield summary_from_record(member.learner_id, member.record, best_row, member.launched_at)


def pool_report(svc: Services, pool: Pool) -> PoolReport:
    return svc.pool_reports.report(svc.snapshots, pool_recording(svc), pool.context_key)


def roster_cells(member: RosterEntry | None) -> dict[str, str]:
    """The roster's columns of one row (empty for a learner not on the roster)."""
    if member is None:
        return dict.fromkeys(ROSTER_COLUMNS, "")
    return {
        "roster_member": member.short_id,
        "roster_status": member.status,
        "roster_roles": ";".join(member.roles),
        "name": member.name or "",
        "email": member.email or "",
    }


def csv_chunks(
    summaries: Iterable[LearnerSummary],
    lesson: Lesson,
    rows_per_chunk: int = CSV_ROWS_PER_CHUNK,
    roster: Roster | None = None,
) -> Iterator[str]:
    """The CSV text (header first), `rows_per_chunk` learners at a time. With the course's
    roster, each row gains the roster's columns, and each member who never launched from the
    course gets a row of their own after the learners (empty learner and steps)."""
    names = columns(lesson) + (list(ROSTER_COLUMNS) if roster is not None else [])
    on_roster = roster.by_learner() if roster is not None else {}
    buffer = io.StringIO()
    # Every cell quoted: a reader splitting on ";" or a tab keeps a cell holding one whole.
    writer = csv.DictWriter(buffer, fieldnames=names, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    # The header in the instructor's language (report_export.headers); the cells as ever.
    writer.writerow(dict(zip(names, headers(names, lesson), strict=True)))
    pending = 0

    def rows() -> Iterator[dict[str, str]]:
        for summary in summaries:
            row = record(summary, lesson)
            if roster is not None:
                row.update(roster_cells(on_roster.get(summary.learner_id)))
            yield row
        for member in roster.members if roster is not None else ():
            if member.learner_id is None:
                yield {**dict.fromkeys(names, ""), **roster_cells(member)}

    for row in rows():
        writer.writerow({name: spreadsheet_safe(value) for name, value in row.items()})
        pending += 1
        if pending == rows_per_chunk:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
            pending = 0
    yield buffer.getvalue()


Bars = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class InstructorCharts:
    """The report's figures as (label, count) bars, worded from the lesson."""

    funnel: Bars
    attempts: Mapping[str, Bars]  # field id -> "N tries" bars
    slips: Mapping[str, Bars]  # field id -> slip bars, most frequent first
    reading: Bars
    opening: Bars
    opening_answer: str
    outcome_labels: Mapping[str | None, str]


def _tries(count: int) -> str:
    return ngettext("%(num)d try", "%(num)d tries", count) % {"num": count}


def instructor_charts(lesson: Lesson, report: PoolReport) -> InstructorCharts:
    reading_labels = {choice.id: choice.label for choice in lesson.reading.choices}
    right = {choice.id for choice in lesson.reading.choices if choice.correct}
    opening_labels = {choice.id: choice.label for choice in lesson.predict.choices}
    verdicts = {True: gettext("right"), False: gettext("wrong")}
    if report.opening_answer is None:
        answer = gettext("The recording cannot be read, so what it shows is unknown.")
    elif report.opening_answer == TIE:
        answer = gettext("The recording shows a tie: neither component alone recovers more.")
    else:
        named = lesson.components.get(report.opening_answer, report.opening_answer)
        answer = gettext("The recording shows that putting back %(named)s alone recovers more.") % {
            "named": named
        }
    return InstructorCharts(
        funnel=tuple((gettext(step.label), step.reached) for step in report.funnel),
        attempts={
            number.field_id: tuple(
                (_tries(tries), learners) for tries, learners in number.attempts_to_land.items()
            )
            for number in report.fields
        },
        slips={
            number.field_id: tuple(
                (slip.replace("_", " "), count) for slip, count in number.slips.items()
            )
            for number in report.fields
        },
        reading=tuple(
            (f"{reading_labels.get(choice, choice)} ({verdicts[choice in right]})", count)
            for choice, count in report.reading_choices.items()
        ),
        opening=tuple(
            (opening_labels.get(choice, choice), count) for choice, count in report.opening.items()
        ),
        opening_answer=answer,
        outcome_labels={outcome.id: outcome.label for outcome in lesson.outcomes},
    )
