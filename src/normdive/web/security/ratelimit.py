"""How often one learner may write: at most `Settings.attempts_per_minute` writes in any 60
seconds, so nobody can hammer the checker (or the row player) to run up evaluated runs and
open the hints, or flood the progress store.

What counts is what was written: the learner's own events whose `created_at` (the database's
clock) lies within the last WINDOW_S seconds, of every kind a learner's request appends
(numbers checked, readings locked, predictions, row predictions and plays, hint opens,
takeaway saves; not the host platform's prerequisite report). The count lives in the events
table, so every worker of a deployment sees the same one; no process keeps state.

A check whose every field is a format error still appends its numbers_checked event (with the
verdicts "format_error"; it costs no attempt on the page), so format errors count here too. A
request refused before anything is written (409, 422, or this 429) writes nothing and so adds
nothing, but once the limit is reached every write is refused until the oldest counted event
is older than the window; Retry-After says how many seconds that is.

The check reads, then the action appends: requests of one learner that arrive at the same
moment may each see the count below the limit, so a burst can pass it by at most the number of
requests in flight. The limit is a brake on scripts, not an exact quota.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, func, select

from normdive.progress.events import EventKind
from normdive.store.tables import EventRecord

# The window the limit counts over: "per minute".
WINDOW_S = 60
# Every kind a learner's own request writes; the host platform's report is not theirs.
COUNTED_KINDS = tuple(kind.value for kind in EventKind if kind is not EventKind.PREREQUISITE_DONE)

TOO_MANY = (
    "That is {limit} answers within a minute, the most this lesson takes from one learner. "
    "Wait {seconds} seconds, then try again; nothing was saved this time."
)


@dataclass(frozen=True)
class Throttled:
    """The learner reached the limit: refuse with 429 and Retry-After."""

    limit: int
    retry_after_s: int  # whole seconds until one more write is accepted (at least 1)

    @property
    def message(self) -> str:
        return TOO_MANY.format(limit=self.limit, seconds=self.retry_after_s)


def _utc(moment: datetime) -> datetime:
    # SQLite hands back CURRENT_TIMESTAMP as naive text, which is UTC by definition.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def throttled(engine: Engine, learner_id: str, limit: int) -> Throttled | None:
    """Throttled when the learner already wrote `limit` events in the last WINDOW_S seconds,
    else None. One indexed query (events by learner, newest first) reading at most `limit`
    rows, with the database's own clock beside them."""
    query = (
        select(EventRecord.created_at, func.now().label("now"))
        .where(EventRecord.learner_id == learner_id, EventRecord.kind.in_(COUNTED_KINDS))
        .order_by(EventRecord.id.desc())
        .limit(limit)
    )
    with engine.connect() as connection:
        rows = connection.execute(query).all()
    if len(rows) < limit:
        return None
    # The limit-th newest write: one more is accepted once it leaves the window.
    oldest, now = _utc(rows[-1].created_at), _utc(rows[-1].now)
    age_s = (now - oldest).total_seconds()
    if age_s >= WINDOW_S:
        return None
    return Throttled(limit=limit, retry_after_s=max(1, math.ceil(WINDOW_S - age_s)))
