"""The learner's state, derived from their events (and what the recording says).

Pure functions only: no database, no web, no clock. The page, the gate, the run counter and
the hint rungs are all computed here from the same list of events.

The dataclasses below are what the web renders; `derive` builds them. Field ids, choice ids
and texts come from the Lesson; nothing here names an answer.

How events fold into state (each rule is tested in tests/test_progress_state.py):
- 8.5 is done when a prerequisite_done event exists, or when the development setting says so.
- The first prediction_committed wins; a later one (two tabs racing) is ignored.
- A field's attempts count its graded tries (right or wrong) up to and including the one that
  lands it; format errors never count; once landed it stays landed and later entries for it
  are ignored. Its last_raw, last_verdict and message come from its latest counted entry; the
  message text is looked up in the lesson now (slip feedback, the generic wrong text, the
  parser's format message, or nothing for a right answer).
- The reading: every lock counts; once a right lock exists it is final.
- The takeaway is the latest saved text ("" is a cleared takeaway, None never saved).
- Evaluated runs: see count_evaluated_runs.
- The gate closes only when every part holds and the recording has no problem; once a
  gate_closed event records that, it stays closed whatever the recording says now
  (GateState.closed_on names the recording it closed on).

The ablation's parts, each folded in its own module and referenced from LessonState:
    LessonState.ablation: AblationState    (progress/ablation.py) row predictions, plays,
                                           the order rule, results of played rows, bands
    LessonState.hints: HintsState          (progress/hints.py) rungs by evaluated runs
    LessonState.compare: CompareState      (progress/compare.py) the compare sentences
    LessonState.takeaway_default: str      the pre-filled line: the lesson's default line,
                                           composed from the recording once its answer has
                                           been shown
GateState's row parts come from AblationState: predictions_recorded counts the rows with a
prediction, predictions_before_play is the order rule, best_row_played follows the reader's
best row (RecordingFacts.best_row), whichever row that is.
RecordingFacts and RowFacts live in progress/facts.py and are re-exported here.
"""

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
    last_raw: str | None  # what the learner last typed here (shown back in the input)
    last_verdict: Verdict | None
    # The last answer that was graded (right or wrong), as typed: an answer equal to it is not
    # graded again. None before the first graded try.
    last_graded_raw: str | None
    message: str | None  # feedback for the last try: slip text, wrong text or format message


@dataclass(frozen=True)
class ReadingState:
    locked_choice: str | None  # the latest locked choice
    right: bool  # the right reading has been locked (final)
    locks: int  # how many times a reading was locked
    feedback: str | None  # the feedback text of the latest lock


@dataclass(frozen=True)
class GateState:
    numbers_landed: int
    numbers_total: int  # 6
    reading_right: bool
    predictions_recorded: int  # rows with a committed prediction
    predictions_total: int  # the number of rows in the recording (4), 0 when none
    # No row was played before every row was predicted: True until that happens, then False
    # for good (and True while nothing has been played).
    predictions_before_play: bool
    best_row_played: bool
    cannot_close_reason: str | None  # from RecordingFacts.problem: the gate cannot close today
    closed: bool
    # The recording the gate closed on (a gate_closed event), for good; None until recorded.
    closed_on: ClosedOn | None = None


@dataclass(frozen=True)
class LessonState:
    prerequisite_done: bool
    prerequisite_by_dev_setting: bool  # shown discreetly on the page
    prediction: str | None  # the committed opening prediction's choice id
    fields: dict[str, FieldState]  # by field id, in the lesson's order
    reading: ReadingState
    takeaway: str | None  # the saved text; None means never saved (show the default line)
    evaluated_runs: int  # checks with >= 1 graded number, reading locks, rows played
    gate: GateState
    ablation: AblationState
    hints: HintsState
    compare: CompareState
    takeaway_default: str  # the takeaway's pre-filled line, shown while nothing is saved
    # The locale its sentences are in (i18n): derived again for a request in another.
    locale: str = DEFAULT_LOCALE


def count_evaluated_runs(events: Sequence[Event]) -> int:
    """Server-evaluated actions by the learner: a numbers check with at least one graded number
    (a check of format errors only is not a run), every locked reading, and each row's first
    play (a replay is not a run). Predictions, hints and takeaways are not runs. The hint rungs
    and the page's counter share this one definition: History's fold, which needs only the
    row keys of the lesson for it."""
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
    """The learner's state from their events, oldest first (or their History: the same fold,
    kept), the lesson and the recording. Its cost does not grow with the events: everything
    is read from the History."""
    # Its sentences in the current locale: the lesson's text in it (lesson.translations).
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
    """A format error in the current locale's words, from its code and arguments. An entry of
    an older shape holds the sentence it was worded in then ("message"), maybe in another
    language: its text as typed says again what was wrong (the parser is deterministic), read
    as a decimal-comma locale reads it and, if that makes it a number, as the others do; the
    old sentence only when neither finds a problem."""
    problem = entry.get("problem")
    if isinstance(problem, Mapping):
        args = problem.get("args")
        try:
            worded = format_words(
                str(problem.get("code")), args if isinstance(args, Mapping) else {}
            )
        except (KeyError, TypeError, ValueError):
            worded = None  # arguments this version cannot read: worded from the text below
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
    """Each field's tries until it landed, and its last counted answer (History's tallies),
    with its message looked up in the lesson now."""
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
