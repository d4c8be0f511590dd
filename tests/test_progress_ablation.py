"""Bands, which single component recovers more, and the fold of row predictions and plays,
on hand-built recording facts and events."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from normdive.lesson.content import load_lesson
from normdive.progress.ablation import (
    band_texts,
    best_row,
    fold_ablation,
    row_band,
    which_recovers_more,
)
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import RecordingFacts, RowFacts

LESSON = load_lesson()
KEYS = ("both", "residual_only", "layernorm_only", "neither")
# One step of held-out accuracy: 256 sequences x 16 copied tokens.
TOKEN = 1 / 4096
FLOAT32_NINETY = 0.8999999761581421  # 0.9 as float32 hands it back


def facts(
    accuracy: dict[str, float] | None = None,
    loss: dict[str, float] | None = None,
    best: str = "both",
    **settings: Any,
) -> RecordingFacts:
    accuracy = {"both": 1.0, "residual_only": 0.2, "layernorm_only": 0.06, "neither": 0.06} | (
        accuracy or {}
    )
    loss = {"both": 0.01, "residual_only": 1.9, "layernorm_only": 2.7, "neither": 2.8} | (
        loss or {}
    )
    rows = tuple(
        RowFacts(key, accuracy[key], loss[key], float(accuracy[key] == 1.0), 600, None)
        for key in KEYS
    )
    base = RecordingFacts(
        problem=None,
        row_keys=KEYS,
        best_row=best,
        rows=rows,
        vocab_size=16,
        depth=8,
        copy_length=16,
        seed=0,
        steps=600,
        init="gpt2",
    )
    return replace(base, **settings)


PROBLEM = RecordingFacts(problem="The recording x.json does not exist.")


def events(*specs: tuple[EventKind, dict[str, Any]]) -> list[Event]:
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    return [Event(i, "a" * 32, k, p, moment) for i, (k, p) in enumerate(specs, 1)]


def predicted(row: str, outcome: str) -> tuple[EventKind, dict[str, Any]]:
    return EventKind.ROW_PREDICTED, {"row": row, "outcome": outcome}


def played(row: str) -> tuple[EventKind, dict[str, Any]]:
    return EventKind.ROW_PLAYED, {"row": row}


ALL_FOUR = tuple(
    predicted(k, o) for k, o in zip(KEYS, ("learns", "partial", "chance", "chance"), strict=True)
)


# --- bands ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accuracy", "vocab", "band"),
    [
        pytest.param(1.0, 16, "learns", id="full"),
        pytest.param(0.9, 16, "learns", id="exactly 90 %"),
        pytest.param(FLOAT32_NINETY, 16, "learns", id="90 % through float32"),
        pytest.param(0.9 - TOKEN, 16, "partial", id="one token under 90 %"),
        pytest.param(0.125 + TOKEN, 16, "partial", id="one token over twice chance"),
        pytest.param(0.125, 16, "chance", id="exactly twice chance (1/16)"),
        pytest.param(0.0625, 16, "chance", id="chance itself"),
        pytest.param(0.0, 16, "chance", id="zero"),
        pytest.param(math.nan, 16, "chance", id="not a number is no learning"),
        pytest.param(math.inf, 16, "chance", id="infinity is no learning"),
        pytest.param(-math.inf, 16, "chance", id="minus infinity is no learning"),
        pytest.param(0.1, 32, "partial", id="a larger vocabulary lowers the chance band"),
        pytest.param(0.0625, 32, "chance", id="twice 1/32"),
        pytest.param(0.95, 2, "learns", id="learns is checked before a wide chance band"),
    ],
)
def test_a_row_band_at_its_edges(accuracy: float, vocab: int, band: str) -> None:
    assert row_band(accuracy, LESSON, 1 / vocab) == band


def test_the_bands_are_stated_for_the_recordings_vocabulary() -> None:
    texts = band_texts(LESSON, facts())
    assert "90 %" in texts["learns"]
    assert "12.5 %" in texts["partial"] and "90 %" in texts["partial"]
    assert "12.5 %" in texts["chance"] and "6.25 %" in texts["chance"] and "16" in texts["chance"]
    ten = band_texts(LESSON, facts(vocab_size=10))
    assert "20 %" in ten["chance"] and "10 %" in ten["chance"]
    assert band_texts(LESSON, PROBLEM) == {}


# --- which single component recovers more ---------------------------------------------------


@pytest.mark.parametrize(
    ("accuracy", "loss", "component", "tie"),
    [
        pytest.param({}, {}, "residual", False, id="residuals end higher"),
        pytest.param(
            {"layernorm_only": 0.5, "residual_only": 0.1}, {}, "layer_norm", False, id="layer norm"
        ),
        pytest.param(
            {"layernorm_only": 0.3, "residual_only": 0.3},
            {"layernorm_only": 1.0, "residual_only": 1.5},
            "layer_norm",
            False,
            id="equal accuracy goes to the lower loss",
        ),
        pytest.param(
            {"layernorm_only": 0.3, "residual_only": 0.3},
            {"layernorm_only": math.nan, "residual_only": 5.0},
            "residual",
            False,
            id="a loss that is not a number ranks last",
        ),
        pytest.param(
            {"layernorm_only": 0.0625, "residual_only": 0.0625},
            {"layernorm_only": 2.7, "residual_only": 2.7},
            "layer_norm",
            True,
            id="equal on both is a tie",
        ),
    ],
)
def test_which_recovers_more(
    accuracy: dict[str, float], loss: dict[str, float], component: str, tie: bool
) -> None:
    recovery = which_recovers_more(facts(accuracy, loss))
    assert recovery is not None
    assert (recovery.component, recovery.tie) == (component, tie)
    assert {recovery.component, recovery.other} == {"layer_norm", "residual"}
    rows = {"layer_norm": "layernorm_only", "residual": "residual_only"}
    assert (recovery.row.key, recovery.other_row.key) == (
        rows[recovery.component],
        rows[recovery.other],
    )


def test_no_answer_without_usable_rows() -> None:
    assert which_recovers_more(PROBLEM) is None
    only_two = facts(rows=facts().rows[:2])
    assert which_recovers_more(only_two) is None


@pytest.mark.parametrize("best", KEYS)
def test_the_best_row_is_the_readers(best: str) -> None:
    assert best_row(facts(best=best)) == best
    assert best_row(replace(facts(best=best), problem="gone")) is None


# --- predictions and plays -------------------------------------------------------------------


def test_nothing_done_yet() -> None:
    a = fold_ablation([], LESSON, facts())
    assert a.available and a.problem is None
    assert [r.key for r in a.rows] == list(KEYS)
    assert [r.label for r in a.rows] == ["Both", "Residuals only", "Layer norm only", "Neither"]
    assert all(r.prediction is None and r.plays == 0 and r.result is None for r in a.rows)
    assert (a.predictions_recorded, a.predictions_total) == (0, 4)
    assert not a.can_play and a.play_locked_reason is not None
    assert "4 of 4" in a.play_locked_reason
    assert a.predictions_before_play and not a.best_row_played and not a.all_played
    assert [o.id for o in a.outcomes] == ["learns", "partial", "chance"]
    assert all(o.band_text for o in a.outcomes)


def test_the_first_prediction_per_row_wins_and_junk_is_ignored() -> None:
    a = fold_ablation(
        events(
            predicted("both", "learns"),
            predicted("both", "chance"),
            predicted("no_such_row", "learns"),
            predicted("neither", "maybe"),
            (EventKind.ROW_PREDICTED, {"row": 3, "outcome": "learns"}),
        ),
        LESSON,
        facts(),
    )
    assert [r.prediction for r in a.rows] == ["learns", None, None, None]
    both = a.row("both")
    assert both is not None and both.prediction_label == "Learns the copy"
    assert a.predictions_recorded == 1
    assert a.play_locked_reason is not None and "3 of 4" in a.play_locked_reason


def test_plays_count_every_replay_and_keep_the_order_of_first_plays() -> None:
    a = fold_ablation(
        events(
            *ALL_FOUR,
            played("layernorm_only"),
            played("both"),
            played("layernorm_only"),
            played("residual_only"),
        ),
        LESSON,
        facts(),
    )
    assert a.can_play and a.play_locked_reason is None
    assert [(r.key, r.plays, r.first_played) for r in a.rows] == [
        ("both", 1, 2),
        ("residual_only", 1, 3),
        ("layernorm_only", 2, 1),
        ("neither", 0, None),
    ]
    assert a.play_order == ("layernorm_only", "both", "residual_only")
    assert a.plays == 4 and not a.all_played
    assert a.predictions_before_play and a.best_row_played


def test_a_result_is_revealed_only_once_its_row_has_played() -> None:
    a = fold_ablation(events(*ALL_FOUR, played("residual_only")), LESSON, facts())
    played_row, waiting = a.row("residual_only"), a.row("both")
    assert waiting is not None and waiting.result is None
    assert played_row is not None and played_row.result is not None
    result = played_row.result
    assert (result.band, result.band_label) == ("partial", "Gets part of the way")
    assert (result.accuracy_text, result.loss_text, result.step) == ("20.0 %", "1.900", 600)


@pytest.mark.parametrize(
    ("specs", "before_play"),
    [
        pytest.param((*ALL_FOUR, played("both")), True, id="all four then play"),
        pytest.param(
            (*ALL_FOUR[:3], played("both"), ALL_FOUR[3], played("both")),
            False,
            id="a play before the fourth prediction fails for good",
        ),
        pytest.param((played("neither"), *ALL_FOUR), False, id="a play before any prediction"),
        pytest.param(
            (*ALL_FOUR[:3], predicted("both", "chance"), played("both")),
            False,
            id="a repeated prediction is not a fourth",
        ),
        pytest.param(ALL_FOUR[:2], True, id="nothing played yet"),
    ],
)
def test_the_order_rule(
    specs: tuple[tuple[EventKind, dict[str, Any]], ...], before_play: bool
) -> None:
    assert fold_ablation(events(*specs), LESSON, facts()).predictions_before_play is before_play


@pytest.mark.parametrize("best", KEYS)
def test_the_best_row_played_follows_the_file(best: str) -> None:
    others = [k for k in KEYS if k != best]
    history = events(*ALL_FOUR, *(played(k) for k in others))
    assert not fold_ablation(history, LESSON, facts(best=best)).best_row_played
    history = events(*ALL_FOUR, *(played(k) for k in others), played(best))
    a = fold_ablation(history, LESSON, facts(best=best))
    assert a.best_row_played and a.all_played


def test_the_statement_and_the_initialisation_come_from_the_recording() -> None:
    a = fold_ablation([], LESSON, facts())
    assert a.statement is not None and a.initialisation is not None
    assert "8 blocks" in a.statement and "seed 0" in a.statement and "600" in a.statement
    assert "GPT-2" in a.initialisation and "residuals-only row" in a.initialisation
    b = fold_ablation([], LESSON, facts(depth=4, seed=2, init="pytorch"))
    assert b.statement is not None and "4 blocks" in b.statement and "seed 2" in b.statement
    assert b.initialisation is not None and "PyTorch default" in b.initialisation
    c = fold_ablation([], LESSON, facts(init="orthogonal"))
    assert c.initialisation is not None and "orthogonal" in c.initialisation


def test_a_recording_with_a_problem_offers_nothing_to_predict_or_play() -> None:
    a = fold_ablation(events(*ALL_FOUR, played("both")), LESSON, PROBLEM)
    assert not a.available and not a.can_play
    assert a.problem == f"{LESSON.ablation.unavailable} {PROBLEM.problem}"
    assert a.predictions_total == 0 and a.play_locked_reason is None
    assert all(r.result is None for r in a.rows) and not a.best_row_played
    assert all(o.band_text is None for o in a.outcomes)
    assert a.statement is None and a.initialisation is None


def test_facts_that_know_only_the_keys_still_fold() -> None:
    keys_only = RecordingFacts(problem=None, row_keys=KEYS, best_row="both")
    a = fold_ablation(events(*ALL_FOUR, played("both")), LESSON, keys_only)
    assert a.available and a.best_row_played
    both = a.row("both")
    assert both is not None and both.plays == 1 and both.result is None
    assert a.statement is None
