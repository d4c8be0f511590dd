"""One function per learner action: from the current LessonState, the Lesson and the raw input,
the event to append as (EventKind, payload), or Conflict (409) / Invalid (422) with a message
a learner can read. The caller appends the event, so a refused action changes nothing."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from normdive.i18n.catalogues import N_, gettext, listed, ngettext
from normdive.i18n.numbers import uses_decimal_comma
from normdive.lesson.content import Lesson
from normdive.numeric.answers import FormatError, ParsedAnswer, parse_answer
from normdive.numeric.targets import grade
from normdive.progress.events import EventKind
from normdive.progress.state import FieldState, LessonState

Action = tuple[EventKind, dict[str, Any]]

# Raw text is stored as typed (the parser refuses past 64), capped against a pasted essay.
MAX_STORED_RAW_CHARS = 200
# At most this much of an unknown row key or hint number is repeated back in a message.
MAX_ECHOED_CHARS = 40
# Line breaks and tabs are text; every other control character is refused in a takeaway.
ALLOWED_CONTROL_CHARACTERS = frozenset("\n\t")

ALREADY_COMMITTED = N_("Your prediction is already committed, and it stays as it is.")
NO_PREDICTION_CHOSEN = N_("Pick one of the two answers before committing.")
NO_NUMBER_TYPED = N_("Type a number in at least one field before checking.")
NOTHING_CHANGED = N_(
    "Nothing has changed since your last check: every answer you typed was already checked "
    "as it is. Change an answer, then check again."
)
NOTHING_CHANGED_BUT_BLANKED = N_(
    "Nothing has changed since your last check: every answer you typed was already checked "
    "as it is, and a field left blank is not checked: it keeps its last answer ({labels}). "
    "Type an answer there, or change another, then check again."
)
ALREADY_LANDED = N_(
    "Already landed: {labels}. A number that has landed stays landed; type an answer in a field "
    "that has not landed yet."
)
ALL_NUMBERS_LANDED = N_("All {count} numbers have landed already; there is nothing left to check.")
NO_READING_CHOSEN = N_("Pick one of the four readings before locking it in.")
READING_ALREADY_RIGHT = N_("The right reading is already locked in.")
SAME_READING_AGAIN = N_(
    "That reading is the one you locked in last, and its feedback stands. Pick a different "
    "reading to lock in."
)
UNKNOWN_FIELD = N_("There is no number field called {field!r} in this lesson.")
UNKNOWN_ROW = N_("There is no row called {row!r} in this lesson.")
ROW_ALREADY_PREDICTED = N_(
    "Your prediction for the {label} row is already committed, and it stays."
)
UNKNOWN_RUNG = N_("There is no hint number {rung!r}; the hints are numbered 1 to {count}.")
EARLIER_RUNG_FIRST = N_("Open hint {earlier} first: the hints open in order.")
ANSWER_BEFORE_PREDICTIONS = N_(
    "Hint {rung} tells what the rows did, so it opens once all {rows} row predictions are in. "
    "Predictions still to make: {missing}."
)
NO_TAKEAWAY_TEXT = N_(
    "That save carried no takeaway text (the form's text field was missing), so nothing was "
    "saved and your saved takeaway stays as it is."
)
CONTROL_CHARACTER = N_(
    "Your takeaway contains an invisible control character (such as one pasted from another "
    "program). Remove it and save again."
)


class ActionRefused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Conflict(ActionRefused):
    """The action does not fit the learner's progress (HTTP 409)."""


class Invalid(ActionRefused):
    """The input cannot be used as it is (HTTP 422)."""


def _require_prerequisite(state: LessonState, lesson: Lesson) -> None:
    if not state.prerequisite_done:
        raise Conflict(lesson.prerequisite.locked_text)


def _require_prediction(state: LessonState, lesson: Lesson) -> None:
    _require_prerequisite(state, lesson)
    if state.prediction is None:
        raise Conflict(lesson.predict.locked_note)


def _require_rows(state: LessonState, lesson: Lesson) -> None:
    _require_prediction(state, lesson)
    if not state.ablation.available:
        raise Conflict(state.ablation.problem or lesson.ablation.unavailable)


def unknown_row_message(key: str) -> str:
    """The one message for an unknown row key: the route's 404 and the action's 422."""
    return gettext(UNKNOWN_ROW).format(row=key[:MAX_ECHOED_CHARS])


def _known_row(state: LessonState, row: str) -> str:
    key = row.strip()
    if state.ablation.row(key) is None:
        raise Invalid(unknown_row_message(key))
    return key


def commit_prediction(state: LessonState, lesson: Lesson, choice: str) -> Action:
    _require_prerequisite(state, lesson)
    if state.prediction is not None:
        raise Conflict(gettext(ALREADY_COMMITTED))
    chosen = choice.strip()
    if chosen not in {option.id for option in lesson.predict.choices}:
        raise Invalid(gettext(NO_PREDICTION_CHOSEN))
    return EventKind.PREDICTION_COMMITTED, {"choice": chosen}


def _unchanged(field_state: FieldState, raw: str, now: ParsedAnswer | FormatError) -> bool:
    """Whether grading `raw` (`now` parsed) would repeat the last verdict: numbers compare by
    value ("2.5", "2.50", "5/2": a respelling costs no attempt), format errors by text."""
    if isinstance(now, ParsedAnswer):
        graded = field_state.last_graded_raw
        # A graded answer was a number where it was typed: "1,5" only in a decimal-comma locale.
        before = parse_answer(graded, decimal_comma=True) if graded is not None else None
        return isinstance(before, ParsedAnswer) and before.same_value(now)
    last = field_state.last_raw
    return (
        field_state.last_verdict == "format_error"
        and last is not None
        and last.strip() == raw[:MAX_STORED_RAW_CHARS].strip()
    )


def check_numbers(state: LessonState, lesson: Lesson, answers: Mapping[str, str]) -> Action:
    """Grade the fields not landed; blank and unchanged ones are skipped (no attempt)."""
    _require_prediction(state, lesson)
    unknown = sorted(set(answers) - {number_field.id for number_field in lesson.number_fields})
    if unknown:
        raise Invalid(gettext(UNKNOWN_FIELD).format(field=unknown[0][:MAX_ECHOED_CHARS]))
    open_fields = [f for f in lesson.number_fields if not state.fields[f.id].landed]
    if not open_fields:
        raise Conflict(gettext(ALL_NUMBERS_LANDED).format(count=len(lesson.number_fields)))
    typed = [(f, answers[f.id]) for f in open_fields if answers.get(f.id, "").strip()]
    # Emptying a field is nothing to check (a landed field, read-only, is still sent).
    blanked = [
        f.label
        for f in open_fields
        if not answers.get(f.id, "").strip() and state.fields[f.id].last_raw
    ]
    # In a locale that writes "1,5", a typed comma is its decimal point (i18n.numbers).
    comma = uses_decimal_comma()
    parsed_by_field = {f.id: parse_answer(raw, decimal_comma=comma) for f, raw in typed}
    changed = [
        (f, raw)
        for f, raw in typed
        if not _unchanged(state.fields[f.id], raw, parsed_by_field[f.id])
    ]
    if not changed and blanked:
        raise Conflict(gettext(NOTHING_CHANGED_BUT_BLANKED).format(labels=listed(blanked)))
    if not typed:
        landed_typed = [
            f.label
            for f in lesson.number_fields
            if f not in open_fields and answers.get(f.id, "").strip()
        ]
        if landed_typed:
            # A duplicate of a once-only fact (double click, two tabs): 409, not "type a number".
            raise Conflict(gettext(ALREADY_LANDED).format(labels=listed(landed_typed)))
        raise Invalid(gettext(NO_NUMBER_TYPED))
    if not changed:
        raise Conflict(gettext(NOTHING_CHANGED))
    entries: list[dict[str, Any]] = []
    for number_field, raw in changed:
        stored_raw = raw[:MAX_STORED_RAW_CHARS]
        parsed = parsed_by_field[number_field.id]
        if isinstance(parsed, FormatError):
            entries.append(
                {
                    "field": number_field.id,
                    "raw": stored_raw,
                    "parsed": None,
                    "verdict": "format_error",
                    "slip": None,
                    # Worded when drawn, in the page's language (numeric.answers.format_words).
                    "problem": {"code": str(parsed.code), "args": dict(parsed.args)},
                }
            )
            continue
        result = grade(
            parsed,
            lesson.hand_rows[number_field.row],
            lesson.eps,
            number_field.step,
            lesson.tolerance,
        )
        entries.append(
            {
                "field": number_field.id,
                "raw": stored_raw,
                "parsed": parsed.canonical,
                "verdict": "right" if result.right else "wrong",
                "slip": result.slip,
            }
        )
    return EventKind.NUMBERS_CHECKED, {"answers": entries}


def lock_reading(state: LessonState, lesson: Lesson, choice: str) -> Action:
    """Lock a reading: a right one is final; the last one locked again is refused."""
    _require_prediction(state, lesson)
    if state.reading.right:
        raise Conflict(gettext(READING_ALREADY_RIGHT))
    reading = lesson.reading_choice(choice.strip())
    if reading is None:
        raise Invalid(gettext(NO_READING_CHOSEN))
    if reading.id == state.reading.locked_choice:
        raise Conflict(gettext(SAME_READING_AGAIN))
    return EventKind.READING_LOCKED, {"choice": reading.id, "right": reading.correct}


def too_long_message(lesson: Lesson, length: int) -> str:
    """The lesson's too-long message, counts written as page.js fills the same template."""
    return lesson.takeaway.too_long.format(
        length=f"{length:,}", max=f"{lesson.takeaway.max_chars:,}"
    )


def _line_breaks(text: str) -> str:
    # Browsers send a textarea's (and a hidden field's) line breaks as CR LF.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def save_takeaway(
    state: LessonState, lesson: Lesson, text: str | None, base: str | None = None
) -> Action:
    """Save the takeaway; "" clears it, None (no field) is refused. `base`, the text the form
    was drawn from, keeps an old tab from replacing a newer save (None: the last save wins)."""
    _require_prerequisite(state, lesson)
    if text is None:
        raise Invalid(gettext(NO_TAKEAWAY_TEXT))
    normalised = _line_breaks(text)
    limit = lesson.takeaway.max_chars
    if len(normalised) > limit:
        raise Invalid(too_long_message(lesson, len(normalised)))
    if any(
        unicodedata.category(character) == "Cc" and character not in ALLOWED_CONTROL_CHARACTERS
        for character in normalised
    ):
        raise Invalid(gettext(CONTROL_CHARACTER))
    saved = state.takeaway
    if (
        base is not None
        and saved is not None
        and saved != _line_breaks(base)
        and saved != normalised
    ):
        raise Conflict(
            lesson.takeaway.stale.format(saved=saved) if saved else lesson.takeaway.stale_cleared
        )
    return EventKind.TAKEAWAY_SAVED, {"text": normalised}


def predict_row(state: LessonState, lesson: Lesson, row: str, outcome: str) -> Action:
    """Commit one row's predicted outcome, once and for good."""
    _require_rows(state, lesson)
    key = _known_row(state, row)
    chosen = lesson.outcome(outcome.strip())
    if chosen is None:
        raise Invalid(lesson.ablation.prediction_prompt)
    current = state.ablation.row(key)
    if current is not None and current.prediction is not None:
        raise Conflict(gettext(ROW_ALREADY_PREDICTED).format(label=current.label))
    return EventKind.ROW_PREDICTED, {"row": key, "outcome": chosen.id}


def play_row(state: LessonState, lesson: Lesson, row: str) -> Action:
    """Play (or replay) one row, once every row has its prediction."""
    _require_rows(state, lesson)
    key = _known_row(state, row)
    if not state.ablation.can_play:
        missing = state.ablation.predictions_total - state.ablation.predictions_recorded
        raise Conflict(
            state.ablation.play_locked_reason
            or lesson.ablation.play_locked.format(
                missing=missing, total=state.ablation.predictions_total
            )
        )
    return EventKind.ROW_PLAYED, {"row": key}


def open_hint(state: LessonState, lesson: Lesson, rung: int | str) -> Action | None:
    """Open a hint rung, in order, at its threshold; None when open already (nothing to add)."""
    _require_prediction(state, lesson)
    number = rung_number(rung, len(state.hints.rungs))
    current = state.hints.rung(number)
    assert current is not None  # rung_number checked the range
    if current.opened:
        return None
    for earlier in state.hints.rungs[: number - 1]:
        if not earlier.opened:
            raise Conflict(gettext(EARLIER_RUNG_FIRST).format(earlier=earlier.rung))
    if current.awaits_predictions and current.runs_needed == 0:
        raise Conflict(
            gettext(ANSWER_BEFORE_PREDICTIONS).format(
                rung=number, rows=len(lesson.rows), missing=current.predictions_missing
            )
        )
    if not current.available:
        raise Conflict(
            # Plural by {threshold}; {runs_text} is HintsState.runs_text, plural on its own.
            ngettext(
                "Hint {rung} opens after {threshold} evaluated run. {runs_text} Runs still "
                "needed: {more}.",
                "Hint {rung} opens after {threshold} evaluated runs. {runs_text} Runs still "
                "needed: {more}.",
                current.threshold,
            ).format(
                rung=number,
                threshold=current.threshold,
                runs_text=state.hints.runs_text,
                more=current.runs_needed,
            )
        )
    return EventKind.HINT_OPENED, {"rung": number}


def close_gate(
    state: LessonState, recording_digest: str | None, recording_file: str
) -> Action | None:
    """The gate_closed event if `state` (with this write) closes the gate and none records it."""
    if not state.gate.closed or state.gate.closed_on is not None or recording_digest is None:
        return None
    return EventKind.GATE_CLOSED, {
        "recording_digest": recording_digest,
        "recording_file": recording_file,
    }


def rung_number(rung: int | str, count: int) -> int:
    """`rung` as a hint number from 1 to `count`; Invalid (the route's 404 too) otherwise."""
    text = str(rung).strip()
    if (
        isinstance(rung, bool)
        or not text.isascii()
        or not text.isdigit()
        or len(text) > 3
        or not 1 <= int(text) <= count
    ):
        raise Invalid(gettext(UNKNOWN_RUNG).format(rung=text[:MAX_ECHOED_CHARS], count=count))
    return int(text)
