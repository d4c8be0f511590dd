"""A learner's events folded into what the derived state and the instructor view need, bounded
by the lesson (but for the reading's locks), so deriving costs the same at any number of events.
Extending a History gives the History of the longer list, so a server keeps one per learner
and the store keeps it as a snapshot (to_json, from_json)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

from normdive.lesson.content import Lesson
from normdive.progress.events import Event, EventKind

GRADED_VERDICTS: frozenset[str] = frozenset({"right", "wrong"})  # format errors cost no try
COUNTED_VERDICTS: frozenset[str] = GRADED_VERDICTS | {"format_error"}
# Not counted by the attempts limit: no learner's request writes them.
NOT_LEARNER_WRITES = frozenset({EventKind.PREREQUISITE_DONE, EventKind.GATE_CLOSED})


# Bumped when the fold or to_json's or summary_record's layout changes: kept ones fold again.
SNAPSHOT_FORMAT = 2


@dataclass(frozen=True)
class FieldTally:
    attempts: int = 0  # graded tries up to and including the landing one; later ones ignored
    landed: bool = False
    last: Mapping[str, Any] | None = None  # the latest counted entry
    last_graded_raw: str | None = None
    slips: Mapping[str, int] = dataclasses.field(default_factory=dict)  # of wrong tries
    format_errors: int = 0


@dataclass(frozen=True)
class RowTally:
    prediction: str | None = None  # the first outcome id the lesson knows; later ones ignored
    predicted_at: int | None = None  # position: 1 for the first folded event of a known kind
    plays: int = 0
    first_played_at: int | None = None
    first_played_time: datetime | None = None


@dataclass(frozen=True)
class ClosedOn:
    """The first gate_closed event's payload: the gate stays closed on it for good."""

    recording_digest: str
    recording_file: str

    @property
    def short_digest(self) -> str:
        return self.recording_digest[:SHORT_DIGEST_CHARS]


# How many hex characters of a recording's digest the page shows (as git shows a commit).
SHORT_DIGEST_CHARS = 12


@dataclass(frozen=True)
class History:
    lesson_fields: tuple[str, ...]
    lesson_rows: tuple[str, ...]
    lesson_outcomes: frozenset[str]
    last_event_id: int = 0  # of any kind, known or not (0: none)
    position: int = 0  # events of known kinds folded so far
    prerequisite_done: bool = False
    prediction_made: bool = False  # the first prediction_committed wins
    prediction: str | None = None
    fields: Mapping[str, FieldTally] = dataclasses.field(default_factory=dict)
    reading_right: bool = False
    takeaway: str | None = None
    closed_on: ClosedOn | None = None
    opened_rungs: frozenset[int] = frozenset()
    evaluated_runs: int = 0
    rows: Mapping[str, RowTally] = dataclasses.field(default_factory=dict)
    first_play_at: int | None = None
    learner_writes: int = 0  # below the attempts limit, no query is needed
    # The instructor view's: when each step was first reached (server time; None: not yet).
    first_event_at: datetime | None = None
    predicted_time: datetime | None = None
    numbers_landed_time: datetime | None = None
    reading_right_time: datetime | None = None
    rows_before_play_time: datetime | None = None
    gate_closed_time: datetime | None = None
    takeaway_time: datetime | None = None
    reading_picks: tuple[str, ...] = ()  # each lock's choice until the right one
    runs_before_gate: int | None = None

    @property
    def reading_choice(self) -> str | None:
        return self.reading_picks[-1] if self.reading_picks else None

    @property
    def reading_locks(self) -> int:
        return len(self.reading_picks)

    @property
    def lesson_key(self) -> str:
        return lesson_key(self.lesson_fields, self.lesson_rows, self.lesson_outcomes)

    def to_json(self) -> dict[str, Any]:
        """Everything folded but the lesson's shape (`lesson_key` names it), as JSON values."""
        return {
            "last_event_id": self.last_event_id,
            "position": self.position,
            "prerequisite_done": self.prerequisite_done,
            "prediction_made": self.prediction_made,
            "prediction": self.prediction,
            "fields": {
                key: [t.attempts, t.landed, t.last, t.last_graded_raw, t.slips, t.format_errors]
                for key, t in self.fields.items()
            },
            "reading_right": self.reading_right,
            "reading_picks": list(self.reading_picks),
            "takeaway": self.takeaway,
            "closed_on": (
                [self.closed_on.recording_digest, self.closed_on.recording_file]
                if self.closed_on is not None
                else None
            ),
            "opened_rungs": sorted(self.opened_rungs),
            "evaluated_runs": self.evaluated_runs,
            "rows": {
                key: [
                    r.prediction,
                    r.predicted_at,
                    r.plays,
                    r.first_played_at,
                    microseconds(r.first_played_time),
                ]
                for key, r in self.rows.items()
            },
            "first_play_at": self.first_play_at,
            "learner_writes": self.learner_writes,
            "times": [microseconds(getattr(self, name)) for name in _TIME_NAMES],
            "runs_before_gate": self.runs_before_gate,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], start: History) -> History:
        """On `start`'s lesson shape: the caller checks the `lesson_key` it was kept under."""
        fields = {
            key: FieldTally(attempts, landed, last, raw, slips, format_errors)
            for key, (attempts, landed, last, raw, slips, format_errors) in data["fields"].items()
        }
        rows = {
            key: RowTally(
                prediction, predicted_at, plays, first_played_at, from_microseconds(played)
            )
            for key, (prediction, predicted_at, plays, first_played_at, played) in data[
                "rows"
            ].items()
        }
        closed = data["closed_on"]
        times: dict[str, Any] = dict(
            zip(_TIME_NAMES, (from_microseconds(value) for value in data["times"]), strict=True)
        )
        return dataclasses.replace(
            start,
            last_event_id=data["last_event_id"],
            position=data["position"],
            prerequisite_done=data["prerequisite_done"],
            prediction_made=data["prediction_made"],
            prediction=data["prediction"],
            fields=MappingProxyType(fields),
            reading_right=data["reading_right"],
            reading_picks=tuple(data["reading_picks"]),
            takeaway=data["takeaway"],
            closed_on=ClosedOn(*closed) if closed is not None else None,
            opened_rungs=frozenset(data["opened_rungs"]),
            evaluated_runs=data["evaluated_runs"],
            rows=MappingProxyType(rows),
            first_play_at=data["first_play_at"],
            learner_writes=data["learner_writes"],
            runs_before_gate=data["runs_before_gate"],
            **times,
        )

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
        ordered = list(events)
        last = ordered[-1].id if ordered else 0
        return cls.start(lesson).extended(ordered, last)

    def extended(self, events: Sequence[Event], last_event_id: int) -> History:
        """Newer `events` folded in; `last_event_id`: the newest one read, of any kind."""
        if not events:
            if last_event_id <= self.last_event_id:
                return self
            return dataclasses.replace(self, last_event_id=last_event_id)
        fold = _Fold.of(self)
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


@dataclass(slots=True)
class _Fold:
    start: History
    fields: dict[str, FieldTally]
    rows: dict[str, RowTally]
    opened: set[int]
    position: int
    prerequisite_done: bool
    prediction_made: bool
    prediction: str | None
    reading_right: bool
    reading_picks: tuple[str, ...]
    takeaway: str | None
    closed_on: ClosedOn | None
    evaluated_runs: int
    first_play_at: int | None
    learner_writes: int
    runs_before_gate: int | None
    first_event_at: datetime | None
    predicted_time: datetime | None
    numbers_landed_time: datetime | None
    reading_right_time: datetime | None
    rows_before_play_time: datetime | None
    gate_closed_time: datetime | None
    takeaway_time: datetime | None

    @classmethod
    def of(cls, start: History) -> _Fold:
        return cls(
            start=start,
            fields=dict(start.fields),
            rows=dict(start.rows),
            opened=set(start.opened_rungs),
            **{name: getattr(start, name) for name in _CARRIED},
        )

    def add(self, event: Event) -> None:
        kind, payload, at = event.kind, event.payload, event.created_at
        self.position += 1
        position = self.position
        if self.first_event_at is None or at < self.first_event_at:
            self.first_event_at = at
        if kind not in NOT_LEARNER_WRITES:
            self.learner_writes += 1
        if kind is EventKind.PREREQUISITE_DONE:
            self.prerequisite_done = True
        elif kind is EventKind.PREDICTION_COMMITTED:
            if not self.prediction_made:
                choice = payload.get("choice")
                self.prediction_made = True
                self.prediction = str(choice) if choice is not None else None
                self.predicted_time = at
        elif kind is EventKind.NUMBERS_CHECKED:
            self._numbers(payload, at)
        elif kind is EventKind.READING_LOCKED:
            self.evaluated_runs += 1
            if not self.reading_right:
                self.reading_picks = (*self.reading_picks, str(payload.get("choice")))
                if payload.get("right") is True:
                    self.reading_right = True
                    self.reading_right_time = at
        elif kind is EventKind.TAKEAWAY_SAVED:
            self.takeaway = str(payload.get("text", ""))
            self.takeaway_time = at
        elif kind is EventKind.ROW_PREDICTED:
            row_key = _text(payload, "row")
            outcome = _text(payload, "outcome")
            row = self.rows.get(row_key) if row_key is not None else None
            if row is not None and row.prediction is None and outcome in self.start.lesson_outcomes:
                self.rows[row_key] = dataclasses.replace(  # type: ignore[index]
                    row, prediction=outcome, predicted_at=position
                )
                every_row = all(tally.prediction is not None for tally in self.rows.values())
                if every_row and self.first_play_at is None:
                    self.rows_before_play_time = at
        elif kind is EventKind.ROW_PLAYED:
            if self.first_play_at is None:
                self.first_play_at = position
            row_key = _text(payload, "row")
            row = self.rows.get(row_key) if row_key is not None else None
            if row is not None:
                # A replay is watching, not effort that opens a hint: not a run.
                if row.first_played_at is None:
                    self.evaluated_runs += 1
                first = row.first_played_at if row.first_played_at is not None else position
                first_time = row.first_played_time if row.first_played_time is not None else at
                self.rows[row_key] = dataclasses.replace(  # type: ignore[index]
                    row, plays=row.plays + 1, first_played_at=first, first_played_time=first_time
                )
        elif kind is EventKind.HINT_OPENED:
            rung = payload.get("rung")
            if type(rung) is int:
                self.opened.add(rung)
        elif kind is EventKind.GATE_CLOSED and self.closed_on is None:
            self.closed_on = ClosedOn(
                recording_digest=str(payload.get("recording_digest", "")),
                recording_file=str(payload.get("recording_file", "")),
            )
            self.gate_closed_time = at
            self.runs_before_gate = self.evaluated_runs

    def _numbers(self, payload: Mapping[str, Any], at: datetime) -> None:
        graded = False
        for entry in _answers(payload):
            verdict = _text(entry, "verdict")  # a malformed list here could not be looked up
            graded = graded or verdict in GRADED_VERDICTS
            field_id = str(entry.get("field"))
            tally = self.fields.get(field_id)
            if tally is None or tally.landed or verdict not in COUNTED_VERDICTS:
                continue
            raw = entry.get("raw")
            is_graded = verdict in GRADED_VERDICTS
            slips = tally.slips
            slip = entry.get("slip")
            if verdict == "wrong" and isinstance(slip, str) and slip:
                slips = {**slips, slip: slips.get(slip, 0) + 1}
            self.fields[field_id] = FieldTally(
                attempts=tally.attempts + is_graded,
                landed=verdict == "right",
                last=entry,
                last_graded_raw=(
                    str(raw) if is_graded and raw is not None else tally.last_graded_raw
                ),
                slips=slips,
                format_errors=tally.format_errors + (not is_graded),
            )
        self.evaluated_runs += graded
        if self.numbers_landed_time is None and all(tally.landed for tally in self.fields.values()):
            self.numbers_landed_time = at

    def result(self, last_event_id: int) -> History:
        return dataclasses.replace(
            self.start,
            last_event_id=last_event_id,
            fields=MappingProxyType(self.fields),
            rows=MappingProxyType(self.rows),
            opened_rungs=frozenset(self.opened),
            **{name: getattr(self, name) for name in _CARRIED},
        )


# The fields a fold carries as they are (the mapping and set parts it copies).
_CARRIED = tuple(
    f.name for f in dataclasses.fields(_Fold) if f.name not in ("start", "fields", "rows", "opened")
)


_TIME_NAMES = (
    "first_event_at",
    "predicted_time",
    "numbers_landed_time",
    "reading_right_time",
    "rows_before_play_time",
    "gate_closed_time",
    "takeaway_time",
)


def lesson_key(fields: Sequence[str], rows: Sequence[str], outcomes: Iterable[str]) -> str:
    """The lesson's shape, SNAPSHOT_FORMAT and the kinds folded: a worker that skipped an
    unknown kind must not keep a History that one knowing it would trust."""
    shape = "\x1f".join(
        [
            str(SNAPSHOT_FORMAT),
            ",".join(fields),
            ",".join(rows),
            ",".join(sorted(outcomes)),
            ",".join(sorted(kind.value for kind in EventKind)),
        ]
    )
    return hashlib.sha256(shape.encode()).hexdigest()[:16]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def microseconds(moment: datetime | None) -> int | None:
    """Microseconds since the epoch: exact, where a float's seconds would round."""
    return (moment - _EPOCH) // _MICROSECOND if moment is not None else None


def from_microseconds(count: int | None) -> datetime | None:
    return _EPOCH + timedelta(0, 0, count) if count is not None else None  # days, s, µs
