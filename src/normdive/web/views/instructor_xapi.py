"""The instructor view's "Learning records" section: how many of the pool's events went to the
institution's learning record store as xAPI statements, how many wait, and each the LRS
refused, in the instructor's language with the LRS's own words quoted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine

from normdive.lesson.content import Lesson
from normdive.lti.submission_review import timeline
from normdive.progress.events import Event, EventKind
from normdive.xapi import lrs as stores
from normdive.xapi.outbox import RowState, StatementStatus, attention, counts

# The most refused statements the view lists (`normdive xapi status` lists them all).
REFUSALS_LISTED = 50
WAITING = (StatementStatus.DUE, StatementStatus.FAILING, StatementStatus.NO_LRS)


@dataclass(frozen=True)
class Refusal:
    event: str  # the event, in words
    learner: str  # the learner's short id
    lrs: str
    status: int | None
    said: str  # the LRS's words


@dataclass(frozen=True)
class RecordsReport:
    delivered: int
    waiting: int
    refused: int
    refusals: tuple[Refusal, ...]

    @property
    def empty(self) -> bool:
        return self.delivered + self.waiting + self.refused == 0


def _in_words(row: RowState, lesson: Lesson) -> str:
    event = Event(row.event_id, row.learner_id, EventKind(row.kind), {}, datetime.now(UTC))
    return timeline([event], lesson)[0].text


def records_report(engine: Engine, lesson: Lesson, context_key: str | None) -> RecordsReport | None:
    """The pool's statements; None where no LRS is set and none was ever queued."""
    outside = context_key is None
    found = counts(engine, context_key, outside_lms=outside)
    if not stores.stored(engine) and not any(found.values()):
        return None
    refused = [
        row
        for row in attention(engine, context_key, REFUSALS_LISTED, outside_lms=outside)
        if row.status is StatementStatus.REFUSED
    ]
    return RecordsReport(
        delivered=found[StatementStatus.SENT],
        waiting=sum(found[status] for status in WAITING),
        refused=found[StatementStatus.REFUSED],
        refusals=tuple(
            Refusal(
                event=_in_words(row, lesson),
                learner=row.learner_id[:8],
                lrs=row.lrs or "",
                status=row.last_status,
                said=row.reason or "",
            )
            for row in refused
        ),
    )
