"""The learner's actions on hand-built states: what each returns to append, and every refusal
with its message. No database: a refusal appends nothing because nothing is returned."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from normdive.lesson.content import load_lesson
from normdive.progress.actions import (
    MAX_STORED_RAW_CHARS,
    ActionRefused,
    Conflict,
    Invalid,
    check_numbers,
    commit_prediction,
    lock_reading,
    save_takeaway,
)
from normdive.progress.events import Event, EventKind
from normdive.progress.state import LessonState, RecordingFacts, derive

LESSON = load_lesson()
NO_ROWS = RecordingFacts(problem="The ablation rows are not in the 8.5 recording yet.")
RIGHT_READING = next(c for c in LESSON.reading.choices if c.correct)
WRONG_READING = next(c for c in LESSON.reading.choices if not c.correct)
LOCKED_TEXT = LESSON.prerequisite.locked_text
COMMIT_FIRST = LESSON.predict.locked_note
# The exact steps of [1, 2, 3] and [2, 2, 2, 6] at eps 1e-5, to six decimals (from the seed).
SIX_RIGHT = {
    "row1_mean": "2.000000",
    "row1_variance": "0.666667",
    "row1_denominator": "0.816503",
    "row2_mean": "3.000000",
    "row2_variance": "3.000000",
    "row2_denominator": "1.732054",
}

Spec = tuple[EventKind, dict[str, Any]]
DONE: Spec = (EventKind.PREREQUISITE_DONE, {"source": "host"})
PREDICTED: Spec = (EventKind.PREDICTION_COMMITTED, {"choice": "layer_norm"})


def landed(*field_ids: str) -> Spec:
    answers = [
        {"field": f, "raw": "x", "parsed": "x", "verdict": "right", "slip": None, "message": None}
        for f in field_ids
    ]
    return EventKind.NUMBERS_CHECKED, {"answers": answers}


def locked(choice_id: str, right: bool) -> Spec:
    return EventKind.READING_LOCKED, {"choice": choice_id, "right": right}


def state(*specs: Spec) -> LessonState:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    history = [Event(i, "a" * 32, k, p, moment) for i, (k, p) in enumerate(specs, 1)]
    return derive(history, LESSON, recording=NO_ROWS, dev_prerequisite_done=False)


def refused(exc: type[ActionRefused], message: str, run: Any) -> None:
    with pytest.raises(exc) as caught:
        run()
    assert message in caught.value.message
    assert str(caught.value) == caught.value.message


# --- the opening prediction ---------------------------------------------------------------


@pytest.mark.parametrize("choice", ["layer_norm", "residual", "  residual\n"])
def test_commit_prediction(choice: str) -> None:
    assert commit_prediction(state(DONE), LESSON, choice) == (
        EventKind.PREDICTION_COMMITTED,
        {"choice": choice.strip()},
    )


@pytest.mark.parametrize(
    ("specs", "choice", "exc", "message"),
    [
        ((), "residual", Conflict, LOCKED_TEXT),
        ((DONE,), "", Invalid, "Pick one of the two"),
        ((DONE,), "   ", Invalid, "Pick one of the two"),
        ((DONE,), "attention", Invalid, "Pick one of the two"),
        ((DONE, PREDICTED), "residual", Conflict, "already committed"),
        ((DONE, PREDICTED), "layer_norm", Conflict, "already committed"),
        ((DONE, PREDICTED), "", Conflict, "already committed"),
    ],
)
def test_commit_prediction_refusals(
    specs: tuple[Spec, ...], choice: str, exc: type[ActionRefused], message: str
) -> None:
    refused(exc, message, lambda: commit_prediction(state(*specs), LESSON, choice))


# --- the six numbers ----------------------------------------------------------------------


def _graded(answers: dict[str, str], *specs: Spec) -> list[dict[str, Any]]:
    kind, payload = check_numbers(state(DONE, PREDICTED, *specs), LESSON, answers)
    assert kind is EventKind.NUMBERS_CHECKED
    return list(payload["answers"])


def test_the_six_numbers_of_the_seed_all_land() -> None:
    entries = _graded(SIX_RIGHT)
    assert [e["field"] for e in entries] == [f.id for f in LESSON.number_fields]
    assert {e["verdict"] for e in entries} == {"right"}
    assert all(e["slip"] is None and e["message"] is None for e in entries)


@pytest.mark.parametrize(
    ("field", "raw", "verdict", "parsed", "slip"),
    [
        ("row1_mean", "2", "right", "2", None),
        ("row1_mean", " +2.001 ", "right", "2.001", None),  # inclusive boundary
        ("row1_mean", "1.999", "right", "1.999", None),
        ("row1_mean", "2.0011", "wrong", "2.0011", None),
        ("row1_mean", "6", "wrong", "6", "mean_not_divided"),
        ("row1_variance", "2/3", "right", "2/3", None),
        ("row1_variance", "1", "wrong", "1", "variance_n_minus_1"),
        ("row1_denominator", "0.666677", "wrong", "0.666677", "denominator_no_sqrt"),
        ("row2_variance", "4", "wrong", "4", "variance_n_minus_1"),
        ("row2_denominator", "1.732", "right", "1.732", None),
        ("row2_mean", "\u22123", "wrong", "-3", None),
    ],
)
def test_one_number_is_graded_at_the_lessons_eps_and_tolerance(
    field: str, raw: str, verdict: str, parsed: str, slip: str | None
) -> None:
    (graded,) = _graded({field: raw})
    assert graded == {
        "field": field,
        "raw": raw,
        "parsed": parsed,
        "verdict": verdict,
        "slip": slip,
        "message": None,
    }


@pytest.mark.parametrize("raw", ["abc", "2,5", "nan", "1/0", "9" * 65])
def test_a_format_error_is_recorded_with_the_parsers_message(raw: str) -> None:
    (graded,) = _graded({"row1_mean": raw})
    assert graded["verdict"] == "format_error"
    assert graded["parsed"] is None and graded["slip"] is None
    assert graded["raw"] == raw
    assert isinstance(graded["message"], str) and graded["message"]


def test_raw_text_is_capped_before_storing() -> None:
    (graded,) = _graded({"row1_mean": "7" * 5000})
    assert graded["verdict"] == "format_error"
    assert graded["raw"] == "7" * MAX_STORED_RAW_CHARS


def test_blank_fields_are_skipped_when_another_has_text() -> None:
    entries = _graded({"row1_mean": "", "row1_variance": "  ", "row2_mean": "3"})
    assert [e["field"] for e in entries] == ["row2_mean"]


def test_landed_fields_are_ignored() -> None:
    entries = _graded({"row1_mean": "999", "row1_variance": "2/3"}, landed("row1_mean"))
    assert [(e["field"], e["verdict"]) for e in entries] == [("row1_variance", "right")]


@pytest.mark.parametrize(
    ("specs", "answers", "exc", "message"),
    [
        ((), SIX_RIGHT, Conflict, LOCKED_TEXT),
        ((DONE,), SIX_RIGHT, Conflict, COMMIT_FIRST),
        ((DONE, PREDICTED), {"row9_mean": "2"}, Invalid, "no number field called 'row9_mean'"),
        ((DONE, PREDICTED), {}, Invalid, "Type a number in at least one field"),
        ((DONE, PREDICTED), dict.fromkeys(SIX_RIGHT, " "), Invalid, "Type a number"),
        (
            (DONE, PREDICTED, landed("row1_mean")),
            {"row1_mean": "2", "row1_variance": ""},
            Invalid,
            "Type a number",
        ),
        ((DONE, PREDICTED, landed(*SIX_RIGHT)), SIX_RIGHT, Conflict, "All 6 numbers have landed"),
    ],
)
def test_check_numbers_refusals(
    specs: tuple[Spec, ...], answers: dict[str, str], exc: type[ActionRefused], message: str
) -> None:
    refused(exc, message, lambda: check_numbers(state(*specs), LESSON, answers))


def test_the_commit_first_message_says_nothing_runs_before_it() -> None:
    assert "Commit your prediction first" in COMMIT_FIRST
    assert "nothing in Try it runs before that" in COMMIT_FIRST


# --- the reading --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("specs", "choice", "right"),
    [
        ((), WRONG_READING.id, False),
        ((), RIGHT_READING.id, True),
        ((locked(WRONG_READING.id, False),), RIGHT_READING.id, True),
        ((locked(WRONG_READING.id, False),), WRONG_READING.id, False),
        ((), f" {RIGHT_READING.id} ", True),
    ],
)
def test_lock_reading(specs: tuple[Spec, ...], choice: str, right: bool) -> None:
    assert lock_reading(state(DONE, PREDICTED, *specs), LESSON, choice) == (
        EventKind.READING_LOCKED,
        {"choice": choice.strip(), "right": right},
    )


@pytest.mark.parametrize(
    ("specs", "choice", "exc", "message"),
    [
        ((), RIGHT_READING.id, Conflict, LOCKED_TEXT),
        ((DONE,), RIGHT_READING.id, Conflict, COMMIT_FIRST),
        ((DONE, PREDICTED), "", Invalid, "Pick one of the four readings"),
        ((DONE, PREDICTED), "made_up", Invalid, "Pick one of the four readings"),
        (
            (DONE, PREDICTED, locked(RIGHT_READING.id, True)),
            WRONG_READING.id,
            Conflict,
            "already locked in",
        ),
    ],
)
def test_lock_reading_refusals(
    specs: tuple[Spec, ...], choice: str, exc: type[ActionRefused], message: str
) -> None:
    refused(exc, message, lambda: lock_reading(state(*specs), LESSON, choice))


# --- the takeaway -------------------------------------------------------------------------

LIMIT = LESSON.takeaway.max_chars


@pytest.mark.parametrize(
    ("text", "stored"),
    [
        ("My own words.", "My own words."),
        ("", ""),
        ("line one\r\nline two\rthree\tand a tab", "line one\nline two\nthree\tand a tab"),
        ("<b>not html</b> & é ∑ 🙂", "<b>not html</b> & é ∑ 🙂"),
        ("x" * LIMIT, "x" * LIMIT),
        ("x" * (LIMIT - 1) + "\r\n", "x" * (LIMIT - 1) + "\n"),
    ],
)
def test_save_takeaway(text: str, stored: str) -> None:
    # Saving needs 8.5 only: a learner may write before committing anything.
    assert save_takeaway(state(DONE), LESSON, text) == (EventKind.TAKEAWAY_SAVED, {"text": stored})


@pytest.mark.parametrize(
    ("specs", "text", "message"),
    [
        ((), "fine", LOCKED_TEXT),
        ((DONE,), "x" * (LIMIT + 1), "is 2,001 characters long; the limit is 2,000"),
        ((DONE,), "bell\x07", "control character"),
        ((DONE,), "nul\x00", "control character"),
        ((DONE,), "escape\x1b[31m", "control character"),
    ],
)
def test_save_takeaway_refusals(specs: tuple[Spec, ...], text: str, message: str) -> None:
    exc = Conflict if not specs else Invalid
    refused(exc, message, lambda: save_takeaway(state(*specs), LESSON, text))


# --- a whole session, through actions and derive only -------------------------------------


def test_a_session_from_commit_to_every_part_that_does_not_need_the_rows() -> None:
    history: list[Spec] = [DONE]

    def act(result: tuple[EventKind, dict[str, Any]]) -> LessonState:
        history.append(result)
        return state(*history)

    s = act(commit_prediction(state(*history), LESSON, "residual"))
    s = act(check_numbers(s, LESSON, {"row1_mean": "two"}))  # format error: no attempt
    assert s.fields["row1_mean"].attempts == 0 and s.evaluated_runs == 0
    s = act(check_numbers(s, LESSON, {"row1_mean": "6"}))  # the classic slip
    assert s.fields["row1_mean"].message == LESSON.slip_feedback["mean_not_divided"]
    s = act(check_numbers(s, LESSON, SIX_RIGHT))
    assert s.fields["row1_mean"].attempts == 2
    assert s.gate.numbers_landed == 6 and s.evaluated_runs == 2
    s = act(lock_reading(s, LESSON, WRONG_READING.id))
    assert "[4, 4, 4, 4]" in (s.reading.feedback or "")
    s = act(lock_reading(s, LESSON, RIGHT_READING.id))
    s = act(save_takeaway(s, LESSON, "Mine."))
    assert (s.prediction, s.reading.right, s.reading.locks) == ("residual", True, 2)
    assert (s.takeaway, s.evaluated_runs) == ("Mine.", 4)
    assert not s.gate.closed and s.gate.cannot_close_reason == NO_ROWS.problem
