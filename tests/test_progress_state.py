"""derive and count_evaluated_runs on hand-built event lists: no database, no web."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lesson_answers import LESSON
from lesson_answers import RIGHT_READING_CHOICE as RIGHT_READING
from normdive.i18n.catalogues import activated
from normdive.progress.actions import close_gate
from normdive.progress.events import Event, EventKind
from normdive.progress.state import (
    ClosedOn,
    FieldState,
    LessonState,
    RecordingFacts,
    RowFacts,
    count_evaluated_runs,
    derive,
)

LEARNER = "0123456789abcdef0123456789abcdef"
NO_ROWS = RecordingFacts(problem="The ablation rows are not in the 8.5 recording yet.")
ROW_KEYS = ("both", "residual_only", "layernorm_only", "neither")
FOUR_ROWS = RecordingFacts(problem=None, row_keys=ROW_KEYS, best_row="both")
WRONG_READINGS = [c for c in LESSON.reading.choices if not c.correct]


def events(*specs: tuple[EventKind, dict[str, Any]]) -> list[Event]:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    return [Event(i, LEARNER, kind, payload, moment) for i, (kind, payload) in enumerate(specs, 1)]


def done() -> tuple[EventKind, dict[str, Any]]:
    return EventKind.PREREQUISITE_DONE, {"source": "operator"}


def predicted(choice: str = "residual") -> tuple[EventKind, dict[str, Any]]:
    return EventKind.PREDICTION_COMMITTED, {"choice": choice}


def entry(
    field: str,
    verdict: str,
    raw: str = "1",
    slip: str | None = None,
    problem: str | None = None,
) -> dict[str, Any]:
    """One answer of a numbers_checked event; a format error's `problem` is its code."""
    parsed = None if verdict == "format_error" else raw
    found = {"problem": {"code": problem, "args": {}}} if problem is not None else {}
    answer = {"field": field, "raw": raw, "parsed": parsed, "verdict": verdict, "slip": slip}
    return answer | found


def checked(*entries: dict[str, Any]) -> tuple[EventKind, dict[str, Any]]:
    return EventKind.NUMBERS_CHECKED, {"answers": list(entries)}


def locked(choice_id: str, right: bool) -> tuple[EventKind, dict[str, Any]]:
    return EventKind.READING_LOCKED, {"choice": choice_id, "right": right}


def saved(text: str) -> tuple[EventKind, dict[str, Any]]:
    return EventKind.TAKEAWAY_SAVED, {"text": text}


def row_predicted(row: str, outcome: str = "chance") -> tuple[EventKind, dict[str, Any]]:
    return EventKind.ROW_PREDICTED, {"row": row, "outcome": outcome}


def row_played(row: str) -> tuple[EventKind, dict[str, Any]]:
    return EventKind.ROW_PLAYED, {"row": row}


def hint_opened(rung: int) -> tuple[EventKind, dict[str, Any]]:
    return EventKind.HINT_OPENED, {"rung": rung}


def state(
    *specs: tuple[EventKind, dict[str, Any]],
    recording: RecordingFacts = NO_ROWS,
    dev: bool = False,
) -> LessonState:
    return derive(events(*specs), LESSON, recording=recording, dev_prerequisite_done=dev)


def test_a_learner_with_no_events() -> None:
    s = state()
    assert not s.prerequisite_done and not s.prerequisite_by_dev_setting
    assert s.prediction is None
    assert list(s.fields) == [f.id for f in LESSON.number_fields]
    assert all(
        f == FieldState(f.field_id, 0, False, None, None, None, None) for f in s.fields.values()
    )
    assert s.reading.locked_choice is None and not s.reading.right and s.reading.locks == 0
    assert s.takeaway is None
    assert s.evaluated_runs == 0
    assert s.gate.numbers_landed == 0 and s.gate.numbers_total == 6
    assert s.gate.cannot_close_reason == NO_ROWS.problem
    assert not s.gate.closed


@pytest.mark.parametrize(
    ("specs", "dev", "done_", "by_dev"),
    [
        ((), False, False, False),
        ((), True, True, True),
        ((done(),), False, True, False),
        ((done(),), True, True, False),
        ((done(), done()), False, True, False),
    ],
)
def test_the_prerequisite(
    specs: tuple[tuple[EventKind, dict[str, Any]], ...], dev: bool, done_: bool, by_dev: bool
) -> None:
    s = state(*specs, dev=dev)
    assert (s.prerequisite_done, s.prerequisite_by_dev_setting) == (done_, by_dev)


def test_the_first_committed_prediction_wins_a_race() -> None:
    assert state(done(), predicted("residual"), predicted("layer_norm")).prediction == "residual"
    assert state(done(), predicted("layer_norm")).prediction == "layer_norm"


SLIP_TEXT = LESSON.slip_feedback["mean_not_divided"]
NOT_A_NUMBER = "not_a_number"
FORMAT_TEXT = "That is not a number. Write a number such as 0.667, -1.5, 2/3 or 1e-3."


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        pytest.param(
            [entry("row1_mean", "format_error", "abc", problem=NOT_A_NUMBER)],
            (0, False, "abc", "format_error", FORMAT_TEXT),
            id="a format error costs no attempt",
        ),
        pytest.param(
            [entry("row1_mean", "wrong", "7")],
            (1, False, "7", "wrong", LESSON.wrong_feedback),
            id="wrong without a slip",
        ),
        pytest.param(
            [entry("row1_mean", "wrong", "6", slip="mean_not_divided")],
            (1, False, "6", "wrong", SLIP_TEXT),
            id="wrong with a slip gets the slip's text",
        ),
        pytest.param(
            [entry("row1_mean", "wrong", "6", slip="a_slip_no_longer_in_the_lesson")],
            (1, False, "6", "wrong", LESSON.wrong_feedback),
            id="an unknown slip falls back to the wrong text",
        ),
        pytest.param(
            [
                entry("row1_mean", "wrong", "6", slip="mean_not_divided"),
                entry("row1_mean", "format_error", "2,0", problem=NOT_A_NUMBER),
                entry("row1_mean", "wrong", "3"),
                entry("row1_mean", "right", "2"),
            ],
            (3, True, "2", "right", None),
            id="attempts count graded tries until it lands",
        ),
        pytest.param(
            [
                entry("row1_mean", "right", "2.001"),
                entry("row1_mean", "wrong", "9"),
                entry("row1_mean", "format_error", "x", problem=NOT_A_NUMBER),
                entry("row1_mean", "right", "2"),
            ],
            (1, True, "2.001", "right", None),
            id="landed sticks and later entries are ignored",
        ),
        pytest.param(
            [entry("row1_variance", "right", "2/3"), entry("no_such_field", "right")],
            (0, False, None, None, None),
            id="other fields and unknown fields leave it alone",
        ),
        pytest.param(
            [entry("row1_mean", "pending", "2")],
            (0, False, None, None, None),
            id="an unknown verdict is ignored",
        ),
    ],
)
def test_a_field_folds_its_entries(
    entries: list[dict[str, Any]],
    expected: tuple[int, bool, str | None, str | None, str | None],
) -> None:
    # One check per entry, and the same entries as a single check, fold alike.
    for specs in ([checked(e) for e in entries], [checked(*entries)]):
        f = state(done(), predicted(), *specs).fields["row1_mean"]
        assert (f.attempts, f.landed, f.last_raw, f.last_verdict, f.message) == expected


GERMAN_NOT_A_NUMBER = "Das ist keine Zahl. Schreiben Sie eine Zahl wie 0,667, -1,5, 2/3 oder 1e-3."


@pytest.mark.parametrize(
    ("answer", "locale", "said"),
    [
        pytest.param(
            entry("row1_mean", "format_error", "zwei", problem=NOT_A_NUMBER),
            "en",
            FORMAT_TEXT,
            id="a code, drawn in English",
        ),
        pytest.param(
            entry("row1_mean", "format_error", "zwei", problem=NOT_A_NUMBER),
            "de",
            GERMAN_NOT_A_NUMBER,
            id="the same code, drawn in German",
        ),
        pytest.param(
            entry("row1_mean", "format_error", "zwei") | {"message": GERMAN_NOT_A_NUMBER},
            "en",
            FORMAT_TEXT,
            id="an older sentence in German, drawn in English from the text typed",
        ),
        pytest.param(
            entry("row1_mean", "format_error", "1,5") | {"message": "Use a point …"},
            "de",
            "Schreiben Sie die Nachkommastellen mit einem Punkt, nicht mit einem Komma: 1.5.",
            id="an older refused decimal comma, drawn where a comma is a point",
        ),
        pytest.param(
            entry("row1_mean", "format_error", "2", problem="a_code_of_a_newer_version")
            | {"message": "Kept as it was."},
            "en",
            "Kept as it was.",
            id="nothing else to go by: the sentence kept",
        ),
    ],
)
def test_a_format_error_is_worded_when_drawn_in_the_pages_language(
    answer: dict[str, Any], locale: str, said: str
) -> None:
    with activated(locale):
        field_state = state(done(), predicted(), checked(answer)).fields["row1_mean"]
    assert (field_state.last_verdict, field_state.message) == ("format_error", said)


@pytest.mark.parametrize(
    ("specs", "runs"),
    [
        pytest.param((), 0, id="nothing"),
        pytest.param((done(), predicted(), saved("x")), 0, id="commits and saves are not runs"),
        pytest.param(
            (checked(entry("row1_mean", "format_error", "x", problem=NOT_A_NUMBER)),),
            0,
            id="a check of format errors only",
        ),
        pytest.param((checked(entry("row1_mean", "wrong")),), 1, id="one wrong number"),
        pytest.param(
            (
                checked(
                    entry("row1_mean", "right", "2"),
                    entry("row1_variance", "wrong"),
                    entry("row2_mean", "format_error", "x", problem=NOT_A_NUMBER),
                ),
            ),
            1,
            id="one check of several numbers is one run",
        ),
        pytest.param((checked(),), 0, id="an empty check"),
        pytest.param(
            (locked(WRONG_READINGS[0].id, False), locked(RIGHT_READING.id, True)),
            2,
            id="every reading lock",
        ),
        pytest.param(
            (
                checked(entry("row1_mean", "wrong")),
                checked(entry("row1_mean", "format_error", "x", problem=NOT_A_NUMBER)),
                locked(WRONG_READINGS[1].id, False),
                checked(entry("row1_mean", "right", "2")),
                saved("y"),
            ),
            3,
            id="mixed",
        ),
        pytest.param((row_played("both"),), 1, id="a row played"),
        pytest.param((row_played("both"), row_played("both")), 1, id="a replay is no run"),
        pytest.param(
            (row_played("both"), row_played("neither"), row_played("both")),
            2,
            id="each row's first play is a run",
        ),
        pytest.param(
            (row_predicted("both"), hint_opened(1), hint_opened(2)),
            0,
            id="row predictions and hints are not runs",
        ),
        pytest.param(
            (
                checked(entry("row1_mean", "wrong")),
                locked(RIGHT_READING.id, True),
                row_played("both"),
            ),
            3,
            id="one of each kind",
        ),
    ],
)
def test_evaluated_runs(specs: tuple[tuple[EventKind, dict[str, Any]], ...], runs: int) -> None:
    assert count_evaluated_runs(events(*specs)) == runs
    assert state(done(), *specs).evaluated_runs == runs


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        pytest.param((), (None, False, 0, None), id="none"),
        pytest.param(
            (locked(WRONG_READINGS[0].id, False),),
            (WRONG_READINGS[0].id, False, 1, WRONG_READINGS[0].feedback),
            id="one wrong",
        ),
        pytest.param(
            (locked(WRONG_READINGS[0].id, False), locked(WRONG_READINGS[2].id, False)),
            (WRONG_READINGS[2].id, False, 2, WRONG_READINGS[2].feedback),
            id="the latest of two wrong",
        ),
        pytest.param(
            (locked(WRONG_READINGS[1].id, False), locked(RIGHT_READING.id, True)),
            (RIGHT_READING.id, True, 2, RIGHT_READING.feedback),
            id="wrong then right",
        ),
        pytest.param(
            (locked(RIGHT_READING.id, True), locked(WRONG_READINGS[0].id, False)),
            (RIGHT_READING.id, True, 1, RIGHT_READING.feedback),
            id="right is final even after a racing lock",
        ),
        pytest.param(
            (locked("gone_from_the_lesson", False),),
            ("gone_from_the_lesson", False, 1, None),
            id="a choice the lesson no longer has",
        ),
    ],
)
def test_the_reading(
    specs: tuple[tuple[EventKind, dict[str, Any]], ...],
    expected: tuple[str | None, bool, int, str | None],
) -> None:
    r = state(done(), predicted(), *specs).reading
    assert (r.locked_choice, r.right, r.locks, r.feedback) == expected


@pytest.mark.parametrize(
    ("specs", "text"),
    [
        ((), None),
        ((saved("first"),), "first"),
        ((saved("first"), saved("second")), "second"),
        ((saved("first"), saved("")), ""),
    ],
)
def test_the_latest_takeaway(
    specs: tuple[tuple[EventKind, dict[str, Any]], ...], text: str | None
) -> None:
    assert state(done(), *specs).takeaway == text


ALL_SIX = checked(*(entry(f.id, "right") for f in LESSON.number_fields))


def test_the_gate_counts_its_parts_but_cannot_close_without_the_rows() -> None:
    s = state(done(), predicted(), ALL_SIX, locked(RIGHT_READING.id, True))
    g = s.gate
    assert (g.numbers_landed, g.numbers_total, g.reading_right) == (6, 6, True)
    assert (g.predictions_recorded, g.predictions_total) == (0, 0)
    assert g.predictions_before_play and not g.best_row_played
    assert g.cannot_close_reason == NO_ROWS.problem
    assert not g.closed


def test_with_the_rows_recorded_the_gate_waits_for_the_row_predictions_and_the_best_row() -> None:
    s = state(done(), predicted(), ALL_SIX, locked(RIGHT_READING.id, True), recording=FOUR_ROWS)
    g = s.gate
    assert g.cannot_close_reason is None
    assert (g.predictions_recorded, g.predictions_total) == (0, 4)
    assert not g.closed


@pytest.mark.parametrize(
    "specs",
    [
        (done(), predicted(), checked(entry("row1_mean", "right"))),
        (done(), predicted(), locked(RIGHT_READING.id, True)),
        (predicted(), ALL_SIX, locked(RIGHT_READING.id, True)),
    ],
)
def test_the_gate_stays_open_while_a_part_is_missing(
    specs: tuple[tuple[EventKind, dict[str, Any]], ...],
) -> None:
    assert not state(*specs, recording=FOUR_ROWS).gate.closed


def test_derive_is_pure() -> None:
    history = events(done(), predicted(), ALL_SIX, saved("kept"))
    first = derive(history, LESSON, recording=NO_ROWS, dev_prerequisite_done=False)
    second = derive(history, LESSON, recording=NO_ROWS, dev_prerequisite_done=False)
    assert first == second
    assert [e.payload for e in history][-1] == {"text": "kept"}


# --- the gate with the recorded rows --------------------------------------------------


def recorded(best: str = "both", **accuracy: float) -> RecordingFacts:
    figures = {"both": 1.0, "residual_only": 0.2, "layernorm_only": 0.06, "neither": 0.06}
    figures |= accuracy
    return RecordingFacts(
        problem=None,
        row_keys=ROW_KEYS,
        best_row=best,
        rows=tuple(RowFacts(k, figures[k], 1.0, 0.0, 600, None) for k in ROW_KEYS),
        vocab_size=16,
        depth=8,
        copy_length=16,
        seed=0,
        steps=600,
        init="gpt2",
    )


PREDICT_ALL = tuple(row_predicted(k) for k in ROW_KEYS)
DONE_BUT_ROWS = (done(), predicted(), ALL_SIX, locked(RIGHT_READING.id, True))


@pytest.mark.parametrize(
    ("specs", "best", "closed"),
    [
        pytest.param((*PREDICT_ALL, row_played("both")), "both", True, id="closes"),
        pytest.param(
            (*PREDICT_ALL, row_played("neither"), row_played("both")), "both", True, id="any order"
        ),
        pytest.param((*PREDICT_ALL, row_played("both")), "neither", False, id="not the best"),
        pytest.param(
            (*PREDICT_ALL, row_played("both"), row_played("neither")),
            "neither",
            True,
            id="the gate follows the file's best row",
        ),
        pytest.param(
            (*PREDICT_ALL[:3], row_played("both"), PREDICT_ALL[3], row_played("both")),
            "both",
            False,
            id="a play before the fourth prediction fails for good",
        ),
        pytest.param(PREDICT_ALL, "both", False, id="predicted, nothing played"),
    ],
)
def test_the_gate_with_the_rows(
    specs: tuple[tuple[EventKind, dict[str, Any]], ...], best: str, closed: bool
) -> None:
    g = state(*DONE_BUT_ROWS, *specs, recording=recorded(best)).gate
    assert (g.predictions_recorded, g.predictions_total) == (4, 4)
    assert g.cannot_close_reason is None
    assert g.closed is closed


def test_the_order_rule_shows_in_the_gate_for_good() -> None:
    early = (*PREDICT_ALL[:2], row_played("both"), *PREDICT_ALL[2:])
    g = state(*DONE_BUT_ROWS, *early, row_played("both"), recording=recorded()).gate
    assert not g.predictions_before_play and g.best_row_played and not g.closed
    assert state(*DONE_BUT_ROWS, *PREDICT_ALL, recording=recorded()).gate.predictions_before_play


def test_a_recording_with_a_problem_keeps_the_gate_open_and_says_why() -> None:
    problem = RecordingFacts(problem="The recording x.json is not valid JSON.")
    s = state(*DONE_BUT_ROWS, *PREDICT_ALL, row_played("both"), recording=problem)
    assert s.gate.cannot_close_reason == problem.problem
    assert not s.gate.closed and not s.gate.best_row_played
    assert s.gate.predictions_total == 0
    assert s.ablation.problem is not None and problem.problem in s.ablation.problem


def test_the_derived_state_holds_the_ablation_hints_and_compare() -> None:
    s = state(*DONE_BUT_ROWS, *PREDICT_ALL, row_played("both"), recording=recorded())
    assert s.ablation.predictions_recorded == 4 and s.ablation.play_order == ("both",)
    assert s.evaluated_runs == 3
    assert [r.available for r in s.hints.rungs] == [True, False]
    assert s.compare.opening_verdict == "waiting"
    assert s.takeaway_default == LESSON.takeaway.default_line


# --- the gate, once closed -----------------------------------------------------------------------

DIGEST = "ab" * 32
CLOSING = (EventKind.GATE_CLOSED, {"recording_digest": DIGEST, "recording_file": "r.json"})
CLOSED_HISTORY = (
    done(),
    predicted(),
    ALL_SIX,
    locked(RIGHT_READING.id, True),
    *(row_predicted(key) for key in ROW_KEYS),
    row_played("both"),
)


def test_the_write_that_closes_the_gate_records_the_recording_once() -> None:
    closing = state(*CLOSED_HISTORY, recording=FOUR_ROWS)
    assert closing.gate.closed and closing.gate.closed_on is None
    assert close_gate(closing, DIGEST, "r.json") == CLOSING
    recorded_state = state(*CLOSED_HISTORY, CLOSING, recording=FOUR_ROWS)
    assert recorded_state.gate.closed_on == ClosedOn(DIGEST, "r.json")
    assert close_gate(recorded_state, DIGEST, "r.json") is None  # once only
    assert close_gate(state(*CLOSED_HISTORY[:-1], recording=FOUR_ROWS), DIGEST, "r") is None
    assert close_gate(closing, None, "r.json") is None  # no usable recording to name


@pytest.mark.parametrize(
    "recording",
    [
        RecordingFacts(problem=None, row_keys=ROW_KEYS, best_row="neither"),
        RecordingFacts(problem="The recording x.json is not valid JSON."),
    ],
)
def test_a_recorded_closing_keeps_the_gate_closed_whatever_the_recording_says(
    recording: RecordingFacts,
) -> None:
    gate = state(*CLOSED_HISTORY, CLOSING, recording=recording).gate
    assert gate.closed and gate.closed_on == ClosedOn(DIGEST, "r.json")
    assert gate.cannot_close_reason is None
    assert not state(*CLOSED_HISTORY, recording=recording).gate.closed
