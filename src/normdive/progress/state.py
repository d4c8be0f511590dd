"""The learner's state as the page renders it, derived from their History and the recording
(pure: no database, web or clock); ids and texts come from the Lesson, none names an answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from normdive.i18n.catalogues import current_locale
from normdive.i18n.locales import DEFAULT_LOCALE
from normdive.lesson.content import Lesson
from normdive.lesson.translations import localized
from normdive.like_named import like_named
from normdive.numeric.answers import FormatError, format_words, parse_answer
from normdive.progress.ablation import AblationState, ablation_state
from normdive.progress.compare import CompareState, compare, revealed, takeaway_line
from normdive.progress.events import Event
from normdive.progress.facts import RecordingFacts, RowFacts
from normdive.progress.hints import HintsState, hints_state
from normdive.progress.history import (
    COUNTED_VERDICTS,
    GRADED_VERDICTS,
    ClosedOn,
    History,
    RowTally,
)
from normdive.recording.format import ROW_KEYS

__all__ = [
    "COUNTED_VERDICTS",
    "GRADED_VERDICTS",
    "AblationState",
    "ClosedOn",
    "CompareState",
    "FieldState",
    "GateState",
    "HintsState",
    "History",
    "LessonState",
    "ReadingState",
    "RecordingFacts",
    "RowFacts",
    "Verdict",
    "count_evaluated_runs",
    "derive",
]

Verdict = Literal["right", "wrong", "format_error"]


@dataclass(frozen=True)
class FieldState:
    field_id: str
    attempts: int  # graded tries (right or wrong); format errors never count
    landed: bool  # stays True once right
    last_raw: str | None
    last_verdict: Verdict | None
    last_graded_raw: str | None  # an answer equal to it is not graded again
    message: str | None  # slip text, wrong text or format message


@dataclass(frozen=True)
class ReadingState:
    locked_choice: str | None
    right: bool  # final once True
    locks: int
    feedback: str | None


@dataclass(frozen=True)
class GateState:
    numbers_landed: int
    numbers_total: int
    reading_right: bool
    predictions_recorded: int
    predictions_total: int  # the recording's rows, 0 when none
    predictions_before_play: bool  # False for good once a row played before all were predicted
    best_row_played: bool
    cannot_close_reason: str | None
    closed: bool
    closed_on: ClosedOn | None = None  # None until a gate_closed event records it


@dataclass(frozen=True)
class LessonState:
    prerequisite_done: bool
    prerequisite_by_dev_setting: bool
    prediction: str | None
    fields: dict[str, FieldState]  # in the lesson's order
    reading: ReadingState
    takeaway: str | None  # "" cleared, None never saved (the default line shows)
    evaluated_runs: int
    gate: GateState
    ablation: AblationState
    hints: HintsState
    compare: CompareState
    takeaway_default: str
    locale: str = DEFAULT_LOCALE  # its sentences' language: derived again for another


def count_evaluated_runs(events: Sequence[Event]) -> int:
    """Graded checks, reading locks and rows' first plays: the hints' and the page's count."""
    rows_only = History(
        lesson_fields=(),
        lesson_rows=ROW_KEYS,
        lesson_outcomes=frozenset(),
        rows=MappingProxyType({key: RowTally() for key in ROW_KEYS}),
    )
    return rows_only.extended(list(events), 0).evaluated_runs


def derive(
    events: Sequence[Event] | History,
    lesson: Lesson,
    *,
    recording: RecordingFacts,
    dev_prerequisite_done: bool,
) -> LessonState:
    """The learner's state from their events, oldest first, or their kept History."""
    lesson = localized(lesson)
    history = events if isinstance(events, History) else History.of(events, lesson)
    by_event = history.prerequisite_done
    prerequisite_done = by_event or dev_prerequisite_done
    fields = _fields(history, lesson)
    reading = _reading(history, lesson)
    numbers_landed = sum(state.landed for state in fields.values())
    ablation = ablation_state(history, lesson, recording)
    prediction = history.prediction
    runs = history.evaluated_runs
    gate = _gate(
        lesson,
        recording,
        ablation,
        closed_on=history.closed_on,
        prerequisite_done=prerequisite_done,
        numbers_landed=numbers_landed,
        reading_right=reading.right,
    )
    return LessonState(
        locale=current_locale(),
        prerequisite_done=prerequisite_done,
        prerequisite_by_dev_setting=dev_prerequisite_done and not by_event,
        prediction=prediction,
        fields=fields,
        reading=reading,
        takeaway=history.takeaway,
        evaluated_runs=runs,
        gate=gate,
        ablation=ablation,
        hints=hints_state(history, lesson, recording),
        compare=compare(
            lesson,
            recording,
            prediction=prediction,
            ablation=ablation,
            reading_locks=reading.locks,
            reading_right=reading.right,
        ),
        takeaway_default=takeaway_line(lesson, recording, revealed=revealed(ablation)),
    )


def _format_message(entry: Mapping[str, Any]) -> str | None:
    """A format error in the current locale's words. An older entry's sentence ("message",
    maybe in another language) is a last resort after parsing its raw text again."""
    problem = entry.get("problem")
    if isinstance(problem, Mapping):
        args = problem.get("args")
        try:
            worded = format_words(
                str(problem.get("code")), args if isinstance(args, Mapping) else {}
            )
        except (KeyError, TypeError, ValueError):
            worded = None  # arguments this version cannot read
        if worded:
            return worded
    raw = entry.get("raw")
    if isinstance(raw, str):
        for decimal_comma in (True, False):
            parsed = parse_answer(raw, decimal_comma=decimal_comma)
            if isinstance(parsed, FormatError):
                return parsed.message
    message = entry.get("message")
    return str(message) if message else None


def _message(entry: Mapping[str, Any], lesson: Lesson) -> str | None:
    verdict = entry.get("verdict")
    if verdict == "format_error":
        return _format_message(entry)
    if verdict == "wrong":
        slip = entry.get("slip")
        if isinstance(slip, str) and slip in lesson.slip_feedback:
            return lesson.slip_feedback[slip]
        return lesson.wrong_feedback
    return None


def _fields(history: History, lesson: Lesson) -> dict[str, FieldState]:
    states = {}
    for number_field in lesson.number_fields:
        field_id = number_field.id
        tally = history.fields.get(field_id)
        latest = tally.last if tally is not None else None
        if tally is None or latest is None:
            states[field_id] = FieldState(field_id, 0, False, None, None, None, None)
            continue
        raw = latest.get("raw")
        states[field_id] = FieldState(
            field_id=field_id,
            attempts=tally.attempts,
            landed=tally.landed,
            last_raw=str(raw) if raw is not None else None,
            last_verdict=latest.get("verdict"),
            message=_message(latest, lesson),
            last_graded_raw=tally.last_graded_raw,
        )
    return states


def _reading(history: History, lesson: Lesson) -> ReadingState:
    if history.reading_locks == 0:
        return ReadingState(locked_choice=None, right=False, locks=0, feedback=None)
    choice = lesson.reading_choice(history.reading_choice or "")
    return ReadingState(
        locked_choice=history.reading_choice,
        right=history.reading_right,
        locks=history.reading_locks,
        feedback=choice.feedback if choice is not None else None,
    )


def _gate(
    lesson: Lesson,
    recording: RecordingFacts,
    ablation: AblationState,
    *,
    closed_on: ClosedOn | None,
    prerequisite_done: bool,
    numbers_landed: int,
    reading_right: bool,
) -> GateState:
    numbers_total = len(lesson.number_fields)
    predictions_total = len(recording.row_keys)
    closed = closed_on is not None or (
        prerequisite_done
        and recording.problem is None
        and recording.best_row is not None
        and numbers_landed == numbers_total
        and reading_right
        and predictions_total > 0
        and ablation.predictions_recorded == predictions_total
        and ablation.predictions_before_play
        and ablation.best_row_played
    )
    return GateState(
        numbers_landed=numbers_landed,
        numbers_total=numbers_total,
        reading_right=reading_right,
        predictions_total=predictions_total,
        **like_named(
            ablation, "predictions_recorded", "predictions_before_play", "best_row_played"
        ),
        cannot_close_reason=None if closed_on is not None else recording.problem,
        closed=closed,
        closed_on=closed_on,
    )
