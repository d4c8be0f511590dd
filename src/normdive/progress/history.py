"""A learner's events folded into what the derived state needs, so that deriving costs the same
at ten events as at ten thousand.

    History.start(lesson) -> History                     no events yet
    history.extended(events, last_event_id) -> History   the same fold, with newer events
    History.of(events, lesson) -> History                 the fold of a whole history

`derive` (progress/state.py) reads a History, never the event list: its size is bounded by the
lesson (six fields, four rows, two rungs), whatever the number of events. Extending a History
by new events gives exactly the History of the longer list (a Hypothesis property in
tests/test_progress_history.py), so a server may keep one per learner and read only the events
appended since (web.services.Services.history). Nothing here depends on the recording: rows
and plays are kept for every row the lesson names, and the recording's rows are picked out
when deriving.

What is kept, each rule as progress/state.py states it:
- fields: per lesson field, graded tries until it landed, the latest counted entry and the
  latest graded answer;
- the first opening prediction; the reading's latest lock, how many, and whether a right one
  came; the latest takeaway; the first gate_closed; the rungs opened; evaluated runs;
- rows: per lesson row, the first prediction whose outcome the lesson knows, with the position
  of that event in the history, and the plays, with the position of the first; plus the
  position of the first play of any row, which decides the order rule (predictions only
  accumulate, so if every row was predicted before the first play, it was before every play);
- the number of writes a learner's own requests made (the attempts limit needs no query
  while they are fewer than the limit).
Positions are ordinals among the folded events of known kinds (1 for the first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from normdive.lesson.content import Lesson
from normdive.progress.events import Event, EventKind

# What counts as a graded try of one number (format errors do not).
GRADED_VERDICTS: frozenset[str] = frozenset({"right", "wrong"})
# Verdicts that count in a field's state: graded tries and format errors.
COUNTED_VERDICTS: frozenset[str] = GRADED_VERDICTS | {"format_error"}
# Kinds a learner's own request never writes (the attempts limit does not count them).
NOT_LEARNER_WRITES = frozenset({EventKind.PREREQUISITE_DONE, EventKind.GATE_CLOSED})


@dataclass(frozen=True)
class FieldTally:
    attempts: int = 0  # graded tries up to and including the landing one
    landed: bool = False
    last: Mapping[str, Any] | None = None  # the latest counted entry (graded or format error)
    last_graded_raw: str | None = None  # the latest graded answer, as typed


@dataclass(frozen=True)
class RowTally:
    prediction: str | None = None  # the first prediction's outcome id (one the lesson knows)
    predicted_at: int | None = None  # its position in the history
    plays: int = 0  # every play, replays too
    first_played_at: int | None = None


@dataclass(frozen=True)
class ClosedOnRecord:
    """The first gate_closed event's payload, as stored."""

    recording_digest: str
    recording_file: str


@dataclass(frozen=True)
class History:
    lesson_fields: tuple[str, ...]  # the lesson's field ids: only these are tallied
    lesson_rows: tuple[str, ...]  # the lesson's row keys
    lesson_outcomes: frozenset[str]  # outcome ids a row prediction may name
    last_event_id: int = 0  # the last event of any kind, known or not (0: none)
    position: int = 0  # events of known kinds folded so far
    prerequisite_done: bool = False
    prediction_made: bool = False  # a prediction_committed exists (the first one wins)
    prediction: str | None = None
    fields: Mapping[str, FieldTally] = dataclasses.field(default_factory=dict)
    reading_choice: str | None = None  # the latest lock's choice, until a right one
    reading_right: bool = False
    reading_locks: int = 0
    takeaway: str | None = None
    closed_on: ClosedOnRecord | None = None
    opened_rungs: frozenset[int] = frozenset()
    evaluated_runs: int = 0
    rows: Mapping[str, RowTally] = dataclasses.field(default_factory=dict)
    first_play_at: int | None = None  # the first play of any row
    learner_writes: int = 0  # events a learner's own request appended

    @classmethod
    def start(cls, lesson: Lesson) -> History:
        return cls(
            lesson_fields=tuple(field.id for field in lesson.number_fields),
            lesson_rows=tuple(row.key for row in lesson.rows),
            lesson_outcomes=frozenset(outcome.id for outcome in lesson.outcomes),
            fields=MappingProxyType({field.id: FieldTally() for field in lesson.number_fields}),
            rows=MappingProxyType({row.key: RowTally() for row in lesson.rows}),
        )

    @classmethod
    def of(cls, events: Iterable[Event], lesson: Lesson) -> History:
        """The fold of a whole history, oldest first."""
        ordered = list(events)
        last = ordered[-1].id if ordered else 0
        return cls.start(lesson).extended(ordered, last)

    def extended(self, events: Sequence[Event], last_event_id: int) -> History:
        """This History with `events` (newer than any folded, oldest first) folded in;
        `last_event_id` is the id of the newest event read, of any kind."""
        if not events:
            if last_event_id <= self.last_event_id:
                return self
            return dataclasses.replace(self, last_event_id=last_event_id)
        fold = _Fold(self)
        for event in events:
            fold.add(event)
        return fold.result(max(last_event_id, self.last_event_id))


def _answers(payload: Mapping[str, Any]) -> list[dict[str, Any]]:
    answers = payload.get("answers", [])
    if not isinstance(answers, list):
        return []
    return [entry for entry in answers if isinstance(entry, dict)]


def _text(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return value if isinstance(value, str) else None


class _Fold:
    """One extension's working copy: the mutable parts copied once, then frozen again."""

    def __init__(self, start: History) -> None:
        self.start = start
        self.values: dict[str, Any] = {}
        self.fields = dict(start.fields)
        self.rows = dict(start.rows)
        self.opened = set(start.opened_rungs)
        self.state = {
            name: getattr(start, name)
            for name in (
                "position",
                "prerequisite_done",
                "prediction_made",
                "prediction",
                "reading_choice",
                "reading_right",
                "reading_locks",
                "takeaway",
                "closed_on",
                "evaluated_runs",
                "first_play_at",
                "learner_writes",
            )
        }

    def add(self, event: Event) -> None:
        state, kind, payload = self.state, event.kind, event.payload
        state["position"] += 1
        position = state["position"]
        if kind not in NOT_LEARNER_WRITES:
            state["learner_writes"] += 1
        if kind is EventKind.PREREQUISITE_DONE:
            state["prerequisite_done"] = True
        elif kind is EventKind.PREDICTION_COMMITTED:
            if not state["prediction_made"]:
                choice = payload.get("choice")
                state["prediction_made"] = True
                state["prediction"] = str(choice) if choice is not None else None
        elif kind is EventKind.NUMBERS_CHECKED:
            self._numbers(payload)
        elif kind is EventKind.READING_LOCKED:
            state["evaluated_runs"] += 1
            if not state["reading_right"]:
                state["reading_choice"] = str(payload.get("choice"))
                state["reading_right"] = payload.get("right") is True
                state["reading_locks"] += 1
        elif kind is EventKind.TAKEAWAY_SAVED:
            state["takeaway"] = str(payload.get("text", ""))
        elif kind is EventKind.ROW_PREDICTED:
            row_key = _text(payload, "row")
            outcome = _text(payload, "outcome")
            row = self.rows.get(row_key) if row_key is not None else None
            if row is not None and row.prediction is None and outcome in self.start.lesson_outcomes:
                self.rows[row_key] = dataclasses.replace(  # type: ignore[index]
                    row, prediction=outcome, predicted_at=position
                )
        elif kind is EventKind.ROW_PLAYED:
            state["evaluated_runs"] += 1
            if state["first_play_at"] is None:
                state["first_play_at"] = position
            row_key = _text(payload, "row")
            row = self.rows.get(row_key) if row_key is not None else None
            if row is not None:
                first = row.first_played_at if row.first_played_at is not None else position
                self.rows[row_key] = dataclasses.replace(  # type: ignore[index]
                    row, plays=row.plays + 1, first_played_at=first
                )
        elif kind is EventKind.HINT_OPENED:
            rung = payload.get("rung")
            if type(rung) is int:
                self.opened.add(rung)
        elif kind is EventKind.GATE_CLOSED and state["closed_on"] is None:
            state["closed_on"] = ClosedOnRecord(
                recording_digest=str(payload.get("recording_digest", "")),
                recording_file=str(payload.get("recording_file", "")),
            )

    def _numbers(self, payload: Mapping[str, Any]) -> None:
        graded = False
        for entry in _answers(payload):
            verdict = entry.get("verdict")
            graded = graded or verdict in GRADED_VERDICTS
            field_id = str(entry.get("field"))
            tally = self.fields.get(field_id)
            if tally is None or tally.landed or verdict not in COUNTED_VERDICTS:
                continue
            raw = entry.get("raw")
            is_graded = verdict in GRADED_VERDICTS
            self.fields[field_id] = FieldTally(
                attempts=tally.attempts + is_graded,
                landed=verdict == "right",
                last=entry,
                last_graded_raw=(
                    str(raw) if is_graded and raw is not None else tally.last_graded_raw
                ),
            )
        self.state["evaluated_runs"] += graded

    def result(self, last_event_id: int) -> History:
        return dataclasses.replace(
            self.start,
            last_event_id=last_event_id,
            fields=MappingProxyType(self.fields),
            rows=MappingProxyType(self.rows),
            opened_rungs=frozenset(self.opened),
            **self.state,
        )
