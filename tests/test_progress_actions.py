"""The learner's actions on hand-built states: what each returns to append, and every refusal
with its message. No database: a refusal appends nothing because nothing is returned."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lesson_answers import LESSON
from lesson_answers import OTHER_WRONG_READING_CHOICE as OTHER_WRONG_READING
from lesson_answers import RIGHT_READING_CHOICE as RIGHT_READING
from lesson_answers import WRONG_READING_CHOICE as WRONG_READING
from normdive.i18n.catalogues import activated
from normdive.i18n.locales import LOCALES
from normdive.i18n.numbers import decimal_symbol
from normdive.progress.actions import (
    MAX_STORED_RAW_CHARS,
    SAME_READING_AGAIN,
    ActionRefused,
    Conflict,
    Invalid,
    check_numbers,
    commit_prediction,
    lock_reading,
    open_hint,
    play_row,
    predict_row,
    save_takeaway,
)
from normdive.progress.events import Event, EventKind
from normdive.progress.state import LessonState, RecordingFacts, RowFacts, derive

NO_ROWS = RecordingFacts(problem="The ablation rows are not in the 8.5 recording yet.")
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


def state(*specs: Spec, recording: RecordingFacts = NO_ROWS) -> LessonState:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    history = [Event(i, "a" * 32, k, p, moment) for i, (k, p) in enumerate(specs, 1)]
    return derive(history, LESSON, recording=recording, dev_prerequisite_done=False)


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
    assert all(e["slip"] is None and "problem" not in e for e in entries)


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
        ("row2_mean", "\u22123", "wrong", "-3", "mean_sign_flipped"),
        ("row2_mean", "\u22122", "wrong", "-2", None),
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
    }


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("abc", {"code": "not_a_number", "args": {}}),
        ("2,5", {"code": "decimal_comma", "args": {"number": "2.5"}}),
        ("nan", {"code": "nan", "args": {}}),
        ("1/0", {"code": "divides_by_zero", "args": {}}),
        ("9" * 65, {"code": "too_long", "args": {"limit": 64, "length": 65}}),
    ],
)
def test_a_format_error_is_recorded_as_the_parsers_code_not_a_sentence(
    raw: str, problem: dict[str, Any]
) -> None:
    # Stored in German or Arabic, it holds the same facts as in English: no sentence of any
    # ("2,5" is a number in German).
    for locale in ("en", "ar") if raw == "2,5" else ("en", "de", "ar"):
        with activated(locale):
            (graded,) = _graded({"row1_mean": raw})
        assert graded["verdict"] == "format_error"
        assert graded["parsed"] is None and graded["slip"] is None
        assert graded["raw"] == raw
        assert graded["problem"] == problem and "message" not in graded


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
            Conflict,
            "Already landed: ",
        ),
        ((DONE, PREDICTED, landed(*SIX_RIGHT)), SIX_RIGHT, Conflict, "All 6 numbers have landed"),
    ],
)
def test_check_numbers_refusals(
    specs: tuple[Spec, ...], answers: dict[str, str], exc: type[ActionRefused], message: str
) -> None:
    refused(exc, message, lambda: check_numbers(state(*specs), LESSON, answers))


def wrong(field_id: str, raw: str, verdict: str = "wrong") -> Spec:
    entry = {"field": field_id, "raw": raw, "parsed": None, "verdict": verdict}
    return EventKind.NUMBERS_CHECKED, {"answers": [{**entry, "slip": None, "message": "m"}]}


@pytest.mark.parametrize("resent", ["2.5", " 2.5 ", "2.50", "5/2", "25e-1"])
def test_an_unchanged_wrong_answer_is_not_graded_again(resent: str) -> None:
    # "2.5" for the mean of [1, 2, 3] was marked wrong; the learner now checks the variance
    # with the untouched (or merely respelled) "2.5" still in the mean's field.
    history = (DONE, PREDICTED, wrong("row1_mean", "2.5"))
    entries = _graded({"row1_mean": resent, "row1_variance": "2/3"}, wrong("row1_mean", "2.5"))
    assert [e["field"] for e in entries] == ["row1_variance"]
    kind, payload = check_numbers(
        state(*history), LESSON, {"row1_mean": resent, "row1_variance": "2/3"}
    )
    after = state(*history, (kind, payload))
    assert after.fields["row1_mean"].attempts == 1
    assert after.fields["row1_mean"].last_raw == "2.5"


def test_a_format_error_in_between_does_not_make_the_last_graded_answer_new() -> None:
    # "2.5" (wrong), then "abc" (a format error, never graded), then "2.5" again: the last
    # graded answer is still "2.5", so nothing has changed.
    history = (
        DONE,
        PREDICTED,
        wrong("row1_mean", "2.5"),
        wrong("row1_mean", "abc", "format_error"),
    )
    refused(
        Conflict,
        "Nothing has changed",
        lambda: check_numbers(state(*history), LESSON, {"row1_mean": "2.5"}),
    )
    assert state(*history).fields["row1_mean"].attempts == 1


def test_a_changed_answer_is_graded_and_costs_an_attempt() -> None:
    history = (DONE, PREDICTED, wrong("row1_mean", "2.5"))
    kind, payload = check_numbers(state(*history), LESSON, {"row1_mean": "2.4"})
    assert [(e["field"], e["verdict"]) for e in payload["answers"]] == [("row1_mean", "wrong")]
    after = state(*history, (kind, payload))
    assert after.fields["row1_mean"].attempts == 2
    assert after.evaluated_runs == 2


@pytest.mark.parametrize(
    "specs",
    [
        (wrong("row1_mean", "2.5"),),
        (wrong("row1_mean", "two", "format_error"),),
        (wrong("row1_mean", "2.5"), wrong("row1_variance", "1")),
    ],
)
def test_a_check_where_nothing_changed_is_refused_and_is_not_a_run(
    specs: tuple[Spec, ...],
) -> None:
    s = state(DONE, PREDICTED, *specs)
    answers = {"row1_mean": s.fields["row1_mean"].last_raw or "", "row2_mean": ""}
    if s.fields["row1_variance"].last_raw:
        answers["row1_variance"] = "1.0"
    refused(
        Conflict,
        "Nothing has changed since your last check",
        lambda: check_numbers(s, LESSON, answers),
    )


VARIANCE_LABEL = next(f.label for f in LESSON.number_fields if f.id == "row1_variance")


@pytest.mark.parametrize(
    ("answers", "said"),
    [
        # The variance emptied, the mean as it was: the message says the blank is not checked.
        (
            {"row1_mean": "2.5", "row1_variance": ""},
            f"it keeps its last answer ({VARIANCE_LABEL}).",
        ),
        (
            {"row1_mean": "2.5", "row1_variance": " "},
            f"it keeps its last answer ({VARIANCE_LABEL}).",
        ),
        # A field never answered, left blank, is nothing to mention.
        ({"row1_mean": "2.5", "row1_variance": "1", "row2_mean": ""}, "Change an answer"),
    ],
)
def test_nothing_changed_says_a_blank_field_is_not_checked(
    answers: dict[str, str], said: str
) -> None:
    s = state(DONE, PREDICTED, wrong("row1_mean", "2.5"), wrong("row1_variance", "1"))
    with pytest.raises(Conflict) as refusal:
        check_numbers(s, LESSON, answers)
    assert refusal.value.message.startswith("Nothing has changed since your last check")
    assert said in refusal.value.message


def test_a_field_emptied_beside_a_landed_one_is_named_not_the_landed_one() -> None:
    # The landed mean is still sent (read-only); the variance, answered before, is sent blank.
    s = state(DONE, PREDICTED, landed("row1_mean"), wrong("row1_variance", "1"))
    with pytest.raises(Conflict) as refusal:
        check_numbers(s, LESSON, {"row1_mean": "x", "row1_variance": ""})
    assert refusal.value.message.startswith("Nothing has changed since your last check")
    assert f"it keeps its last answer ({VARIANCE_LABEL})." in refusal.value.message


def test_a_format_error_retyped_differently_is_checked_again() -> None:
    s = state(DONE, PREDICTED, wrong("row1_mean", "two", "format_error"))
    (entry,) = check_numbers(s, LESSON, {"row1_mean": "tw0"})[1]["answers"]
    assert entry["verdict"] == "format_error" and entry["raw"] == "tw0"


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
        ((locked(WRONG_READING.id, False),), OTHER_WRONG_READING.id, False),
        ((locked(OTHER_WRONG_READING.id, False),), WRONG_READING.id, False),
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
        (
            (DONE, PREDICTED, locked(WRONG_READING.id, False)),
            f" {WRONG_READING.id}",
            Conflict,
            SAME_READING_AGAIN,
        ),
        (
            (
                DONE,
                PREDICTED,
                locked(WRONG_READING.id, False),
                locked(OTHER_WRONG_READING.id, False),
            ),
            OTHER_WRONG_READING.id,
            Conflict,
            SAME_READING_AGAIN,
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
        (
            (DONE,),
            "x" * (LIMIT + 1),
            "Too long to save: 2,001 characters, and the limit is 2,000. Shorten it",
        ),
        ((DONE,), "bell\x07", "control character"),
        ((DONE,), "nul\x00", "control character"),
        ((DONE,), "escape\x1b[31m", "control character"),
    ],
)
def test_save_takeaway_refusals(specs: tuple[Spec, ...], text: str, message: str) -> None:
    exc = Conflict if not specs else Invalid
    refused(exc, message, lambda: save_takeaway(state(*specs), LESSON, text))


def saved(text: str) -> Spec:
    return EventKind.TAKEAWAY_SAVED, {"text": text}


STALE = LESSON.takeaway.stale


@pytest.mark.parametrize(
    ("specs", "text", "base"),
    [
        ((DONE,), "First.", ""),  # nothing saved: nothing to lose
        ((DONE, saved("Old.")), "New.", "Old."),  # drawn from the latest
        ((DONE, saved("Old."), saved("Newer.")), "Newer.", "Old."),  # the same text again
        ((DONE, saved("Old.")), "Old.", "Old."),
        ((DONE, saved("a\nb")), "c", "a\r\nb"),  # the browser's CR LF is the same text
        ((DONE, saved("Old."), saved("Newer.")), "Mine.", None),  # no base: last save wins
        ((DONE, saved("A."), saved("B."), saved("A.")), "C.", "A."),  # A again: nothing lost
        ((DONE, saved("")), "Typed.", ""),  # cleared, and drawn cleared
    ],
)
def test_save_takeaway_over_its_base(specs: tuple[Spec, ...], text: str, base: str | None) -> None:
    assert save_takeaway(state(*specs), LESSON, text, base) == (
        EventKind.TAKEAWAY_SAVED,
        {"text": text},
    )


@pytest.mark.parametrize(
    ("specs", "text", "base", "message"),
    [
        ((DONE, saved("Tab two's.")), "Tab one's.", "", STALE.format(saved="Tab two's.")),
        (
            (DONE, saved("Old."), saved("Tab two's.")),
            "Tab one's.",
            "Old.",
            STALE.format(saved="Tab two's."),
        ),
        ((DONE, saved("Old."), saved("")), "Tab one's.", "Old.", LESSON.takeaway.stale_cleared),
        # Emptying the box over a newer text would lose it as surely.
        ((DONE, saved("Old."), saved("Tab two's.")), "", "Old.", STALE.format(saved="Tab two's.")),
    ],
)
def test_save_takeaway_refuses_a_save_over_a_newer_one(
    specs: tuple[Spec, ...], text: str, base: str, message: str
) -> None:
    refused(Conflict, message, lambda: save_takeaway(state(*specs), LESSON, text, base))


def test_the_stale_message_shows_the_newer_text_and_what_to_do() -> None:
    with pytest.raises(Conflict) as caught:
        save_takeaway(state(DONE, saved("Tab two's words.")), LESSON, "Tab one's.", "")
    message = caught.value.message
    assert "Another tab or device saved a newer takeaway" in message
    assert "nothing is lost" in message and "still in the box" in message
    assert "\u201cTab two's words.\u201d" in message and "save again" in message


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


# --- the ablation: row predictions, plays, hints ---------------------------------------------

KEYS = ("both", "residual_only", "layernorm_only", "neither")
ROWS = RecordingFacts(
    problem=None,
    row_keys=KEYS,
    best_row="both",
    rows=tuple(
        RowFacts(key, accuracy, 1.0, 0.0, 600, None)
        for key, accuracy in zip(KEYS, (1.0, 0.2, 0.06, 0.06), strict=True)
    ),
    vocab_size=16,
    depth=8,
    copy_length=16,
    seed=0,
    steps=600,
    init="gpt2",
)


def row_predicted(row: str, outcome: str = "chance") -> Spec:
    return EventKind.ROW_PREDICTED, {"row": row, "outcome": outcome}


def row_played(row: str) -> Spec:
    return EventKind.ROW_PLAYED, {"row": row}


def hint(rung: int) -> Spec:
    return EventKind.HINT_OPENED, {"rung": rung}


ALL_PREDICTED = tuple(row_predicted(key) for key in KEYS)


def rows_state(*specs: Spec) -> LessonState:
    return state(*specs, recording=ROWS)


@pytest.mark.parametrize(
    ("row", "outcome", "payload"),
    [
        ("both", "learns", {"row": "both", "outcome": "learns"}),
        (" neither\n", " chance ", {"row": "neither", "outcome": "chance"}),
        ("residual_only", "partial", {"row": "residual_only", "outcome": "partial"}),
    ],
)
def test_predict_row(row: str, outcome: str, payload: dict[str, str]) -> None:
    s = rows_state(DONE, PREDICTED, row_predicted("layernorm_only"))
    assert predict_row(s, LESSON, row, outcome) == (EventKind.ROW_PREDICTED, payload)


@pytest.mark.parametrize(
    ("specs", "recording", "row", "outcome", "exc", "message"),
    [
        ((), ROWS, "both", "learns", Conflict, LOCKED_TEXT),
        ((DONE,), ROWS, "both", "learns", Conflict, COMMIT_FIRST),
        ((DONE, PREDICTED), NO_ROWS, "both", "learns", Conflict, NO_ROWS.problem or ""),
        (
            (DONE, PREDICTED),
            ROWS,
            "all",
            "learns",
            Invalid,
            "There is no row called 'all' in this lesson.",
        ),
        ((DONE, PREDICTED), ROWS, "both", "", Invalid, LESSON.ablation.prediction_prompt),
        ((DONE, PREDICTED), ROWS, "both", "wins", Invalid, LESSON.ablation.prediction_prompt),
        (
            (DONE, PREDICTED, row_predicted("both", "partial")),
            ROWS,
            "both",
            "learns",
            Conflict,
            "Your prediction for the Both row is already committed",
        ),
    ],
)
def test_predict_row_refusals(
    specs: tuple[Spec, ...],
    recording: RecordingFacts,
    row: str,
    outcome: str,
    exc: type[ActionRefused],
    message: str,
) -> None:
    s = state(*specs, recording=recording)
    refused(exc, message, lambda: predict_row(s, LESSON, row, outcome))


def test_a_refused_prediction_leaves_the_committed_one_as_it_was() -> None:
    history = (DONE, PREDICTED, row_predicted("both", "partial"))
    with pytest.raises(Conflict):
        predict_row(rows_state(*history), LESSON, "both", "learns")
    row = rows_state(*history).ablation.row("both")
    assert row is not None and row.prediction == "partial"


@pytest.mark.parametrize(
    ("specs", "row"),
    [
        ((), "both"),
        ((row_played("both"),), "both"),  # a replay
        ((row_played("both"), row_played("both")), "neither"),
    ],
)
def test_play_row(specs: tuple[Spec, ...], row: str) -> None:
    s = rows_state(DONE, PREDICTED, *ALL_PREDICTED, *specs)
    assert play_row(s, LESSON, f" {row} ") == (EventKind.ROW_PLAYED, {"row": row})


@pytest.mark.parametrize(
    ("specs", "recording", "row", "exc", "message"),
    [
        ((), ROWS, "both", Conflict, LOCKED_TEXT),
        ((DONE,), ROWS, "both", Conflict, COMMIT_FIRST),
        ((DONE, PREDICTED, *ALL_PREDICTED), NO_ROWS, "both", Conflict, NO_ROWS.problem or ""),
        ((DONE, PREDICTED), ROWS, "both", Conflict, "Rows still without one: 4 of 4."),
        ((DONE, PREDICTED, *ALL_PREDICTED[:3]), ROWS, "neither", Conflict, "1 of 4."),
        ((DONE, PREDICTED, *ALL_PREDICTED), ROWS, "everything", Invalid, "no row called"),
    ],
)
def test_play_row_refusals(
    specs: tuple[Spec, ...],
    recording: RecordingFacts,
    row: str,
    exc: type[ActionRefused],
    message: str,
) -> None:
    s = state(*specs, recording=recording)
    refused(exc, message, lambda: play_row(s, LESSON, row))


def test_the_play_refusal_is_the_reason_the_page_shows() -> None:
    s = rows_state(DONE, PREDICTED, *ALL_PREDICTED[:2])
    with pytest.raises(Conflict) as caught:
        play_row(s, LESSON, "both")
    assert caught.value.message == s.ablation.play_locked_reason


# Runs that need no numbers: a wrong reading lock each.
def runs(n: int) -> tuple[Spec, ...]:
    return tuple(locked(WRONG_READING.id, False) for _ in range(n))


@pytest.mark.parametrize(
    ("specs", "rung", "result"),
    [
        ((*runs(3),), 1, (EventKind.HINT_OPENED, {"rung": 1})),
        ((*ALL_PREDICTED, *runs(5), hint(1)), 2, (EventKind.HINT_OPENED, {"rung": 2})),
        ((*ALL_PREDICTED, *runs(5), hint(1)), " 2 ", (EventKind.HINT_OPENED, {"rung": 2})),
        ((*runs(3), hint(1)), 1, None),  # already open: nothing to append
        ((*ALL_PREDICTED, *runs(5), hint(1), hint(2)), "2", None),
    ],
)
def test_open_hint(specs: tuple[Spec, ...], rung: int | str, result: Spec | None) -> None:
    assert open_hint(rows_state(DONE, PREDICTED, *specs), LESSON, rung) == result


def test_first_plays_count_as_runs_for_the_hints_and_replays_do_not() -> None:
    replays = (row_played("both"), row_played("both"), row_played("both"))
    specs = (DONE, PREDICTED, *ALL_PREDICTED, *replays, row_played("neither"))
    assert open_hint(rows_state(*specs, locked(WRONG_READING.id, False)), LESSON, 1) == (
        EventKind.HINT_OPENED,
        {"rung": 1},
    )
    refused(
        Conflict,
        "You have run it 2 times. Runs still needed: 1.",
        lambda: open_hint(rows_state(*specs), LESSON, 1),
    )


@pytest.mark.parametrize(
    ("specs", "rung", "exc", "message"),
    [
        ((), 1, Conflict, LOCKED_TEXT),
        ((DONE,), 1, Conflict, COMMIT_FIRST),
        (
            (DONE, PREDICTED, *runs(2)),
            1,
            Conflict,
            "Hint 1 opens after 3 evaluated runs. You have run it 2 times. Runs still needed: 1.",
        ),
        ((DONE, PREDICTED, *runs(5)), 2, Conflict, "Open hint 1 first"),
        (
            (DONE, PREDICTED, *runs(4), hint(1)),
            2,
            Conflict,
            "Hint 2 opens after 5 evaluated runs. You have run it 4 times. Runs still needed: 1.",
        ),
        (
            (DONE, PREDICTED, *ALL_PREDICTED[:3], *runs(5), hint(1)),
            2,
            Conflict,
            "Hint 2 tells what the rows did, so it opens once all 4 row predictions are in. "
            "Predictions still to make: 1.",
        ),
        ((DONE, PREDICTED, *runs(5)), 0, Invalid, "no hint number '0'"),
        ((DONE, PREDICTED, *runs(5)), 3, Invalid, "numbered 1 to 2"),
        ((DONE, PREDICTED, *runs(5)), "one", Invalid, "no hint number 'one'"),
        ((DONE, PREDICTED, *runs(5)), "", Invalid, "no hint number"),
        ((DONE, PREDICTED, *runs(5)), "١", Invalid, "no hint number"),  # an Arabic-Indic one
        (
            (DONE, PREDICTED, *runs(1)),
            1,
            Conflict,
            "Hint 1 opens after 3 evaluated runs. You have run it 1 time. Runs still needed: 2.",
        ),
    ],
)
def test_open_hint_refusals(
    specs: tuple[Spec, ...], rung: int | str, exc: type[ActionRefused], message: str
) -> None:
    refused(exc, message, lambda: open_hint(rows_state(*specs), LESSON, rung))


def test_opening_a_hint_is_free() -> None:
    before = rows_state(DONE, PREDICTED, *runs(3))
    after = rows_state(DONE, PREDICTED, *runs(3), hint(1))
    assert before.evaluated_runs == after.evaluated_runs == 3


def test_a_whole_session_closes_the_gate_through_actions_only() -> None:
    history: list[Spec] = [DONE]

    def act(result: Spec | None) -> LessonState:
        if result is not None:
            history.append(result)
        return rows_state(*history)

    s = act(commit_prediction(rows_state(*history), LESSON, "layer_norm"))
    s = act(check_numbers(s, LESSON, SIX_RIGHT))
    s = act(lock_reading(s, LESSON, RIGHT_READING.id))
    for key, outcome in zip(KEYS, ("learns", "partial", "chance", "chance"), strict=True):
        s = act(predict_row(s, LESSON, key, outcome))
    assert s.gate.predictions_recorded == 4 and not s.gate.closed
    s = act(play_row(s, LESSON, "neither"))
    s = act(open_hint(s, LESSON, 1))
    assert s.evaluated_runs == 3 and s.hints.rungs[0].text is not None
    s = act(play_row(s, LESSON, "layernorm_only"))
    s = act(play_row(s, LESSON, "residual_only"))
    s = act(open_hint(s, LESSON, 2))
    s = act(open_hint(s, LESSON, 2))  # idempotent
    assert history.count(hint(2)) == 1
    assert s.compare.opening_verdict == "differs" and not s.gate.closed
    s = act(play_row(s, LESSON, "both"))
    s = act(play_row(s, LESSON, "both"))  # a replay changes nothing in the gate, nor in the runs
    assert s.evaluated_runs == 6
    assert s.gate.closed and s.gate.predictions_before_play and s.gate.best_row_played


# --- the same grading in every locale ---------------------------------------------------------

# (field, the answer written with a point, its verdict and slip): right, wrong, each slip, the
# tolerance's edges, fractions and format errors, graded alike whatever the page's language.
GRADED_ALIKE = [
    ("row1_mean", "2", "right", None),
    ("row1_mean", "+2.001", "right", None),
    ("row1_mean", "1.999", "right", None),
    ("row1_mean", "2.0011", "wrong", None),
    ("row1_mean", "1.9989", "wrong", None),
    ("row1_mean", "6", "wrong", "mean_not_divided"),
    ("row1_variance", "2/3", "right", None),
    ("row1_variance", "0.6667", "right", None),
    ("row1_variance", "1", "wrong", "variance_n_minus_1"),
    ("row1_denominator", "0.666677", "wrong", "denominator_no_sqrt"),
    ("row2_denominator", "1.732", "right", None),
    ("row2_denominator", "-1.732", "wrong", "denominator_negative"),
    ("row2_mean", "\u22123", "wrong", "mean_sign_flipped"),
    ("row2_denominator", "17.32e-1", "right", None),
    ("row2_denominator", "3.464/2", "right", None),
    ("row1_mean", "abc", "format_error", None),
    ("row1_mean", "1/0", "format_error", None),
    ("row1_mean", "nan", "format_error", None),
    ("row1_mean", "1.2.3", "format_error", None),
]


def written_in(locale: str, text: str) -> str:
    """`text` as a learner in `locale` writes it: its decimal symbol for the point."""
    return text.replace(".", decimal_symbol(locale))


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize(("field", "text", "verdict", "slip"), GRADED_ALIKE)
def test_every_locale_grades_the_same_value_alike(
    locale: str, field: str, text: str, verdict: str, slip: str | None
) -> None:
    with activated(locale):
        for raw in {text, written_in(locale, text)}:  # the locale's writing and a point
            (graded,) = _graded({field: raw})
            assert (graded["verdict"], graded["slip"]) == (verdict, slip), (locale, raw)
            assert ("problem" in graded) == (verdict == "format_error")


def test_a_decimal_comma_is_read_only_where_the_locale_writes_one() -> None:
    with activated("en"):
        (graded,) = _graded({"row2_denominator": "1,732"})
    assert graded["verdict"] == "format_error"
    assert graded["problem"] == {"code": "decimal_comma", "args": {"number": "1.732"}}
    with activated("de"):
        (graded,) = _graded({"row2_denominator": "1,732"})
    assert (graded["verdict"], graded["parsed"], graded["raw"]) == ("right", "1.732", "1,732")


def test_a_comma_answer_graded_in_german_is_unchanged_when_sent_again_in_english() -> None:
    with activated("de"):
        (graded,) = _graded({"row2_denominator": "1,8"})
    assert graded["verdict"] == "wrong"
    entry = {"field": "row2_denominator", "raw": "1,8", "parsed": "1.8", "verdict": "wrong"}
    tried = state(
        DONE, PREDICTED, (EventKind.NUMBERS_CHECKED, {"answers": [{**entry, "slip": None}]})
    )
    with activated("en"), pytest.raises(Conflict):
        check_numbers(tried, LESSON, {"row2_denominator": "1.8"})


def test_a_refusal_speaks_the_learners_language() -> None:
    with activated("de"), pytest.raises(Invalid) as refused:
        check_numbers(state(DONE, PREDICTED), LESSON, {"row1_mean": " "})
    assert str(refused.value) == "Geben Sie vor dem Prüfen in mindestens ein Feld eine Zahl ein."
    with activated("ar"), pytest.raises(Conflict) as again:
        check_numbers(state(DONE, PREDICTED, landed(*SIX_RIGHT)), LESSON, {"row1_mean": "2"})
    assert str(again.value) == "أصبت الأعداد كلها (6) من قبل؛ لم يبق شيء للتحقق منه."


@pytest.mark.parametrize(
    ("locale", "opening"),
    [
        ("de", "Hinweis 1 öffnet sich nach 3 bewerteten Durchläufen."),
        ("ar", "يُفتح التلميح 1 بعد 3 مرات تشغيل مقيَّمة."),
    ],
)
def test_a_hint_not_open_yet_is_refused_in_the_languages_plural_form(
    locale: str, opening: str
) -> None:
    with activated(locale), pytest.raises(Conflict) as raised:
        open_hint(rows_state(DONE, PREDICTED, *runs(2)), LESSON, 1)
    assert str(raised.value).startswith(opening)
