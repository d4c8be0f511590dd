"""The compare section's sentences and the takeaway's pre-filled line, through derive."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from normdive.lesson.content import load_lesson
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import RecordingFacts, RowFacts
from normdive.progress.state import LessonState, derive

LESSON = load_lesson()
KEYS = ("both", "residual_only", "layernorm_only", "neither")
Spec = tuple[EventKind, dict[str, Any]]
DONE: Spec = (EventKind.PREREQUISITE_DONE, {"source": "host"})


def facts(residual: float = 0.2, layer_norm: float = 0.06) -> RecordingFacts:
    accuracy = {
        "both": 1.0,
        "residual_only": residual,
        "layernorm_only": layer_norm,
        "neither": 0.0,
    }
    rows = tuple(RowFacts(k, accuracy[k], 2.0, 0.0, 600, None) for k in KEYS)
    return RecordingFacts(
        problem=None,
        row_keys=KEYS,
        best_row="both",
        rows=rows,
        vocab_size=16,
        depth=8,
        copy_length=16,
        seed=0,
        steps=600,
        init="gpt2",
    )


PROBLEM = RecordingFacts(problem="The recording x.json has no ablation rows at seed 0.")


def opening(choice: str) -> Spec:
    return EventKind.PREDICTION_COMMITTED, {"choice": choice}


def predicted(row: str, outcome: str) -> Spec:
    return EventKind.ROW_PREDICTED, {"row": row, "outcome": outcome}


def played(row: str) -> Spec:
    return EventKind.ROW_PLAYED, {"row": row}


def locked(choice: str, right: bool) -> Spec:
    return EventKind.READING_LOCKED, {"choice": choice, "right": right}


ALL_FOUR = (
    predicted("both", "learns"),
    predicted("residual_only", "partial"),
    predicted("layernorm_only", "partial"),
    predicted("neither", "chance"),
)
BOTH_SINGLES = (played("residual_only"), played("layernorm_only"))


def state(*specs: Spec, recording: RecordingFacts | None = None) -> LessonState:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    history = [Event(i, "a" * 32, k, p, moment) for i, (k, p) in enumerate((DONE, *specs), 1)]
    return derive(history, LESSON, recording=recording or facts(), dev_prerequisite_done=False)


@pytest.mark.parametrize(
    ("specs", "recording", "verdict", "sentence"),
    [
        pytest.param((), None, "none", None, id="nothing committed"),
        pytest.param(
            (opening("residual"),),
            None,
            "waiting",
            "You predicted that putting back the residual connections recovers more. Play the "
            "“Layer norm only” and “Residuals only” rows to see what the recording says.",
            id="waiting for the two rows",
        ),
        pytest.param(
            (opening("residual"), *ALL_FOUR, played("residual_only")),
            None,
            "waiting",
            "You predicted that putting back the residual connections recovers more. Play the "
            "“Layer norm only” row too to see what the recording says.",
            id="one of the two rows is not enough: the one left is named",
        ),
        pytest.param(
            (opening("layer_norm"), *ALL_FOUR, played("layernorm_only"), played("both")),
            None,
            "waiting",
            "You predicted that putting back layer norm recovers more. Play the "
            "“Residuals only” row too to see what the recording says.",
            id="the other one left",
        ),
        pytest.param(
            (opening("residual"), *ALL_FOUR, *BOTH_SINGLES),
            None,
            "agrees",
            "You predicted the residual connections, and the recording agrees: putting back the "
            "residual connections recovers more (“Residuals only” ends at 20.0 %, “Layer norm "
            "only” at 6.0 %).",
            id="agrees",
        ),
        pytest.param(
            (opening("layer_norm"), *ALL_FOUR, *BOTH_SINGLES),
            None,
            "differs",
            "You predicted layer norm, but in the recording putting back the residual "
            "connections recovers more (“Residuals only” ends at 20.0 %, “Layer norm only” at "
            "6.0 %).",
            id="differs",
        ),
        pytest.param(
            (opening("layer_norm"), *ALL_FOUR, *BOTH_SINGLES),
            facts(residual=0.1, layer_norm=0.5),
            "agrees",
            None,
            id="a recording where layer norm recovers more",
        ),
        pytest.param(
            (opening("residual"), *ALL_FOUR, *BOTH_SINGLES),
            facts(residual=0.1, layer_norm=0.1),
            "tie",
            "You predicted the residual connections; in the recording neither recovers more: "
            "“Layer norm only” and “Residuals only” both end at 10.0 %, with the same loss.",
            id="a tie",
        ),
        pytest.param(
            (opening("residual"),),
            PROBLEM,
            "unavailable",
            "You predicted the residual connections; the recording cannot say which recovers "
            f"more today: {PROBLEM.problem}",
            id="no usable recording",
        ),
    ],
)
def test_the_opening_prediction_against_the_recording(
    specs: tuple[Spec, ...],
    recording: RecordingFacts | None,
    verdict: str,
    sentence: str | None,
) -> None:
    c = state(*specs, recording=recording).compare
    assert c.opening_verdict == verdict
    if sentence is not None or verdict == "none":
        assert c.opening == sentence


def test_each_row_against_its_band() -> None:
    c = state(
        opening("residual"),
        *ALL_FOUR[:3],
        played("never_mind"),  # junk rows are ignored
        ALL_FOUR[3],
        played("both"),
        played("layernorm_only"),
    ).compare
    assert [(r.key, r.verdict) for r in c.rows] == [
        ("both", "agrees"),
        ("residual_only", "waiting"),
        ("layernorm_only", "differs"),
        ("neither", "waiting"),
    ]
    both, residual, layer_norm, _ = (r.sentence for r in c.rows)
    assert both == (
        "Both: you predicted it would learn the copy, and it learned the copy, ending at "
        "100.0 % held-out per-token accuracy after 600 steps."
    )
    assert residual == (
        "Residuals only: you predicted it would get part of the way; play the row to see what "
        "it did."
    )
    assert layer_norm == (
        "Layer norm only: you predicted it would get part of the way, but it stayed at chance, "
        "ending at 6.0 % held-out per-token accuracy after 600 steps."
    )
    assert not c.complete


def test_rows_without_a_prediction_say_so() -> None:
    c = state(opening("residual"), ALL_FOUR[0]).compare
    assert [r.verdict for r in c.rows] == ["waiting", "unpredicted", "unpredicted", "unpredicted"]
    assert c.rows[1].sentence == "Residuals only: no prediction yet."


def test_complete_once_every_row_has_played() -> None:
    plays = (played(k) for k in KEYS)
    c = state(opening("residual"), *ALL_FOUR, *plays).compare
    assert c.complete and c.revealed
    assert all(r.verdict in ("agrees", "differs") for r in c.rows)


@pytest.mark.parametrize(
    ("specs", "verdict", "sentence"),
    [
        ((), "none", LESSON.compare.reading_none),
        ((locked("smoothing", False),), "wrong", LESSON.compare.reading_wrong),
        ((locked("keeps_finite", True),), "right", LESSON.compare.reading_right_first),
        (
            (
                locked("smoothing", False),
                locked("regulariser", False),
                locked("keeps_finite", True),
            ),
            "right",
            "You locked in the right reading of the epsilon; it took 3 locks.",
        ),
    ],
)
def test_the_reading(specs: tuple[Spec, ...], verdict: str, sentence: str) -> None:
    c = state(opening("residual"), *specs).compare
    assert (c.reading_verdict, c.reading) == (verdict, sentence)


def test_no_pre_filled_takeaway_gives_the_reading_away() -> None:
    # The box is filled before the reading is locked: it must not hold the right reading.
    right = next(choice for choice in LESSON.reading.choices if choice.correct)
    lines = (
        LESSON.takeaway.default_line,
        LESSON.takeaway.composed_line,
        LESSON.takeaway.composed_line_tie,
    )
    assert all("finite" in right.label and "finite" not in line for line in lines)


def test_the_takeaway_line_is_composed_once_the_answer_has_been_shown() -> None:
    assert state(opening("residual")).takeaway_default == LESSON.takeaway.default_line
    before = state(opening("residual"), *ALL_FOUR, played("residual_only"))
    assert before.takeaway_default == LESSON.takeaway.default_line
    after = state(opening("residual"), *ALL_FOUR, *BOTH_SINGLES)
    assert after.takeaway_default == (
        "Layer norm subtracts a row's mean and divides by its spread; in these runs at depth 8, "
        "putting back the residual connections recovered more (20.0 % against 6.0 %)."
    )
    other = state(opening("residual"), *ALL_FOUR, *BOTH_SINGLES, recording=facts(0.1, 0.5))
    assert "putting back layer norm recovered more (50.0 % against 10.0 %)" in (
        other.takeaway_default
    )
    tie = state(opening("residual"), *ALL_FOUR, *BOTH_SINGLES, recording=facts(0.1, 0.1))
    assert "ended level (10.0 % each)" in tie.takeaway_default
    broken = state(opening("residual"), recording=PROBLEM)
    assert broken.takeaway_default == LESSON.takeaway.default_line


def test_a_composed_line_over_the_limit_falls_back_to_the_default() -> None:
    limit = len(LESSON.takeaway.default_line)
    short = LESSON.model_copy(
        update={"takeaway": LESSON.takeaway.model_copy(update={"max_chars": limit})}
    )
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    specs = (DONE, opening("residual"), *ALL_FOUR, *BOTH_SINGLES)
    history = [Event(i, "a" * 32, k, p, moment) for i, (k, p) in enumerate(specs, 1)]
    full = derive(history, LESSON, recording=facts(), dev_prerequisite_done=False)
    assert len(full.takeaway_default) > limit
    s = derive(history, short, recording=facts(), dev_prerequisite_done=False)
    assert s.takeaway_default == LESSON.takeaway.default_line
