"""Hint rungs: available by evaluated runs (exactly 3 and 5), opened in order, free, and
rung 2's answer composed from the recording."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from normdive.i18n.catalogues import activated
from normdive.lesson.content import load_lesson
from normdive.lesson.translations import localized
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import RecordingFacts, RowFacts
from normdive.progress.hints import answer_text, fold_hints
from normdive.progress.state import count_evaluated_runs, derive
from normdive.recording.format import ROW_KEYS

LESSON = load_lesson()
KEYS = ("both", "residual_only", "layernorm_only", "neither")
Spec = tuple[EventKind, dict[str, Any]]


def facts(residual: float = 0.2, layer_norm: float = 0.06, loss: float = 2.0) -> RecordingFacts:
    accuracy = {
        "both": 1.0,
        "residual_only": residual,
        "layernorm_only": layer_norm,
        "neither": 0.0,
    }
    rows = tuple(RowFacts(k, accuracy[k], loss, 0.0, 600, None) for k in KEYS)
    return RecordingFacts(
        problem=None, row_keys=KEYS, best_row="both", rows=rows, vocab_size=16, depth=8, seed=0
    )


def events(*specs: Spec) -> list[Event]:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    return [Event(i, "a" * 32, k, p, moment) for i, (k, p) in enumerate(specs, 1)]


def opened(rung: object) -> Spec:
    return EventKind.HINT_OPENED, {"rung": rung}


PLAY: Spec = (EventKind.ROW_PLAYED, {"row": "both"})
WRONG_LOCK: Spec = (EventKind.READING_LOCKED, {"choice": "smoothing", "right": False})
FREE: tuple[Spec, ...] = (
    (EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"}),
    opened(1),
    (EventKind.TAKEAWAY_SAVED, {"text": "x"}),
    (EventKind.NUMBERS_CHECKED, {"answers": [{"field": "row1_mean", "verdict": "format_error"}]}),
)


def play(row: str) -> Spec:
    return EventKind.ROW_PLAYED, {"row": row}


# A prediction for every row: none is a run, and plays need them.
PREDICTED: tuple[Spec, ...] = tuple(
    (EventKind.ROW_PREDICTED, {"row": key, "outcome": "learns"}) for key in ROW_KEYS
)


def runs_of(n: int) -> tuple[Spec, ...]:
    # Every row predicted, then the two kinds of run that need no numbers, in turn: a wrong
    # reading lock and a row's first play.
    return PREDICTED + tuple(WRONG_LOCK if i % 2 else play(ROW_KEYS[i // 2]) for i in range(n))


@pytest.mark.parametrize(
    ("runs", "first", "second"),
    [
        (0, False, False),
        (1, False, False),
        (2, False, False),
        (3, True, False),
        (4, True, False),
        (5, True, True),
    ],
)
def test_rungs_become_available_at_exactly_3_and_5_runs(
    runs: int, first: bool, second: bool
) -> None:
    history = events(*runs_of(runs))
    assert count_evaluated_runs(history) == runs
    hints = fold_hints(history, LESSON, facts(), runs)
    assert [r.available for r in hints.rungs] == [first, second]
    assert [r.threshold for r in hints.rungs] == [3, 5]
    assert [r.runs_needed for r in hints.rungs] == [max(0, 3 - runs), max(0, 5 - runs)]
    # One run is written in the singular.
    assert hints.runs_text == f"You have run it {runs} {'time' if runs == 1 else 'times'}."
    assert not any(r.opened or r.text for r in hints.rungs)


def test_predictions_hints_takeaways_and_format_errors_are_not_runs() -> None:
    assert count_evaluated_runs(events(*FREE)) == 0
    # A row's first play is a run; playing it again is not.
    assert count_evaluated_runs(events(*FREE, PLAY, PLAY)) == 1
    assert count_evaluated_runs(events(*FREE, PLAY, play("neither"), PLAY)) == 2


def test_the_status_line_says_how_many_runs_are_still_needed() -> None:
    hints = fold_hints(events(*PREDICTED), LESSON, facts(), 1)
    first, second = hints.rungs
    assert first.status == "Opens after 3 evaluated runs. Runs still needed: 2."
    assert second.status == "Opens after 5 evaluated runs. Runs still needed: 4."
    ready = fold_hints([], LESSON, facts(), 3).rungs[0]
    assert ready.status == LESSON.hints.rung_ready and ready.can_open


def test_a_rung_behind_a_shut_one_says_so_instead_of_ready() -> None:
    second = fold_hints(events(*runs_of(5)), LESSON, facts(), 5).rungs[1]
    assert second.available and not second.can_open
    assert second.status == "Ready once hint 1 is open: the hints open in order."


# Five runs from the numbers and the reading alone: no row predicted yet.
WITHOUT_ROW_PREDICTIONS = (WRONG_LOCK,) * 5


def test_the_answer_waits_for_every_row_prediction() -> None:
    # It tells what the rows did: opened before they are all predicted, it would give away
    # what the learner is about to predict.
    for predicted in range(len(ROW_KEYS)):
        history = events(*PREDICTED[:predicted], *WITHOUT_ROW_PREDICTIONS, opened(1))
        answer = fold_hints(history, LESSON, facts(), 5).rungs[1]
        assert (answer.available, answer.can_open, answer.awaits_predictions) == (
            False,
            False,
            True,
        )
        assert answer.runs_needed == 0
        assert answer.status == (
            "Opens once all 4 row predictions are in, since it tells what the rows did."
        )
    history = events(*PREDICTED, *WITHOUT_ROW_PREDICTIONS, opened(1))
    answer = fold_hints(history, LESSON, facts(), 5).rungs[1]
    assert (answer.available, answer.can_open, answer.awaits_predictions) == (True, True, False)
    assert answer.status == LESSON.hints.rung_ready


def test_short_of_runs_and_predictions_the_answer_says_both() -> None:
    answer = fold_hints(events(WRONG_LOCK), LESSON, facts(), 1).rungs[1]
    assert answer.status == (
        "Opens after 5 evaluated runs. Runs still needed: 4. It also waits for all 4 row "
        "predictions, since it tells what the rows did."
    )
    # The question tells nothing the rows did: it waits for runs alone.
    assert not fold_hints(events(WRONG_LOCK), LESSON, facts(), 3).rungs[0].awaits_predictions


def test_rungs_open_in_order() -> None:
    at_five = runs_of(5)
    none_open = fold_hints(events(*at_five), LESSON, facts(), 5)
    assert [r.can_open for r in none_open.rungs] == [True, False]
    first_open = fold_hints(events(*at_five, opened(1)), LESSON, facts(), 5)
    assert [r.opened for r in first_open.rungs] == [True, False]
    assert [r.can_open for r in first_open.rungs] == [False, True]
    assert first_open.rungs[0].text == LESSON.hints.rungs[0].text
    assert first_open.rungs[1].text is None
    both_open = fold_hints(events(*at_five, opened(1), opened(2), opened(2)), LESSON, facts(), 5)
    assert [r.opened for r in both_open.rungs] == [True, True]
    assert not any(r.can_open for r in both_open.rungs)


@pytest.mark.parametrize("junk", ["1", True, None, 1.0, 3])
def test_a_hint_event_must_name_a_rung_by_its_number(junk: object) -> None:
    hints = fold_hints(events(opened(junk)), LESSON, facts(), 5)
    assert not any(r.opened for r in hints.rungs)


def test_rung_1_asks_without_answering() -> None:
    question = LESSON.hints.rungs[0].text
    assert question.endswith("?")
    for name in LESSON.components.values():
        assert f"putting back {name}" not in question


@pytest.mark.parametrize(
    ("residual", "layer_norm", "winner", "loser"),
    [
        (0.2, 0.06, "the residual connections", "layer norm"),
        (0.06, 0.2, "layer norm", "the residual connections"),
    ],
)
def test_rung_2_names_what_the_recording_shows(
    residual: float, layer_norm: float, winner: str, loser: str
) -> None:
    text = answer_text(LESSON, facts(residual, layer_norm))
    assert f"putting back {winner} recovers more" in text
    assert f"putting back {loser}" not in text
    assert "20.0 %" in text and "6.0 %" in text
    history = events(*runs_of(5), opened(1), opened(2))
    s = derive(history, LESSON, recording=facts(residual, layer_norm), dev_prerequisite_done=True)
    assert s.hints.rungs[1].text == text


def test_rung_2_says_so_when_the_two_rows_tie() -> None:
    text = answer_text(LESSON, facts(0.1, 0.1))
    assert text == LESSON.hints.answer_tie.format(
        component="layer norm",
        row="Layer norm only",
        accuracy="10.0 %",
        loss="2.000",
        other_component="the residual connections",
        other_row="Residuals only",
        other_accuracy="10.0 %",
        other_loss="2.000",
    )
    assert "recovers more:" in text and "neither" in text


def test_rung_2_without_a_usable_recording_says_why_in_the_learners_language() -> None:
    problem = RecordingFacts(problem="The recording x.json does not exist.")
    assert answer_text(LESSON, problem) == (
        f"{LESSON.hints.answer_unavailable} it cannot be read just now."
    )
    no_rows = replace(facts(), rows=())
    assert answer_text(LESSON, no_rows) == (
        f"{LESSON.hints.answer_unavailable} it lacks one of the two rows with a single component."
    )
    german = localized(LESSON, "de")
    with activated("de"):
        said = answer_text(german, problem)
    assert said.startswith(german.hints.answer_unavailable) and "x.json" not in said
    assert said.endswith("sie kann gerade nicht gelesen werden.")
