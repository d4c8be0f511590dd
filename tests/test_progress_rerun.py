"""progress.rerun: the learner's re-runs folded from their events, the one row each set takes
next, the refusals, and the two runs' rankings compared pair by pair into sentences."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from lesson_answers import LESSON
from normdive.progress.actions import Conflict, Invalid
from normdive.progress.events import Event, EventKind
from normdive.progress.rerun import (
    MAX_RERUNS,
    finish_rerun_row,
    next_row,
    order_sentences,
    pairs,
    ranking_matches,
    relation,
    rerun_choice,
    reruns,
)

ROWS = [row.key for row in LESSON.rows]
LABELS = {row.key: row.label for row in LESSON.rows}
TEXT = LESSON.rerun
STEPS = 40
RECORDED = {"both": 1.0, "residual_only": 0.206, "layernorm_only": 0.062, "neither": 0.062}
LEVEL = Decimal(2)


def result(accuracy: float) -> str:
    curve = [
        {"step": s, "heldout_loss": 0.5, "heldout_accuracy": accuracy * s / STEPS}
        for s in (0, 20, 40)
    ]
    final = {"step": STEPS, "heldout_loss": 0.5, "heldout_accuracy": accuracy}
    return json.dumps({"final": final, "curve": curve})


def events_of(*rows: tuple[int, str, float]) -> list[Event]:
    """RERUN_ROW_FINISHED events, each (set, row, final accuracy), as the store gives them."""
    made: list[Event] = []
    for number, (rerun, row, accuracy) in enumerate(rows, start=1):
        kind, payload = finish_rerun_row(
            reruns(made), LESSON, rerun, row, result(accuracy), 0.25, STEPS
        )
        made.append(Event(number, "learner", kind, payload, datetime.now(UTC)))
    return made


def test_a_set_takes_its_rows_in_the_lessons_order_then_the_next_set_begins() -> None:
    assert next_row((), LESSON) == (1, ROWS[0])
    events = events_of((1, ROWS[0], 1.0), (1, ROWS[1], 0.5))
    assert next_row(reruns(events), LESSON) == (1, ROWS[2])
    events = events_of(*((1, key, 0.5) for key in ROWS))
    assert next_row(reruns(events), LESSON) == (2, ROWS[0])


def test_the_kept_row_holds_the_lessons_setting_and_its_band() -> None:
    payload = events_of((1, "both", 1.0), (1, "residual_only", 0.7))[1].payload
    choice = rerun_choice(LESSON, "residual_only")
    assert payload["config"] == choice.to_json()
    assert choice.depth == TEXT.config.depth and choice.eps is None and choice.residual
    assert payload["outcome"] == "partial" and payload["final"]["heldout_accuracy"] == 0.7


@pytest.mark.parametrize(
    ("number", "row", "refusal", "words"),
    [
        (1, "neither", Conflict, "comes next"),  # out of order
        (1, "both", Conflict, "kept already"),  # twice
        (2, "residual_only", Conflict, "re-run 1"),  # not the open set
        (1, "nonsense", Invalid, "no row called"),
    ],
)
def test_refusals(number: int, row: str, refusal: type[Exception], words: str) -> None:
    sets = reruns(events_of((1, "both", 1.0)))
    with pytest.raises(refusal, match=words):
        finish_rerun_row(sets, LESSON, number, row, result(0.5), 0.25, STEPS)


def test_a_result_that_cannot_be_read_is_refused() -> None:
    with pytest.raises(Invalid, match="could not be read"):
        finish_rerun_row((), LESSON, 1, "both", "[]", 0.25, STEPS)


def test_the_sets_kept_are_bounded() -> None:
    rows = [(n, key, 0.5) for n in range(1, MAX_RERUNS + 1) for key in ROWS]
    sets = reruns(events_of(*rows))
    with pytest.raises(Conflict, match=str(MAX_RERUNS)):
        finish_rerun_row(sets, LESSON, MAX_RERUNS + 1, ROWS[0], result(0.5), 0.25, STEPS)


def test_events_this_version_cannot_read_are_passed_over() -> None:
    good = events_of((1, "both", 1.0))
    odd: list[dict[str, Any]] = [
        {"rerun": "1", "row": "both"},
        {"rerun": 1, "row": "residual_only", "config": {}, "final": {}},
        {"rerun": 1, "row": "both", "config": good[0].payload["config"], "final": "x"},
    ]
    noise = [
        Event(10 + i, "learner", EventKind.RERUN_ROW_FINISHED, payload, datetime.now(UTC))
        for i, payload in enumerate(odd)
    ]
    (kept,) = reruns([*good, *noise])
    assert [row.key for row in kept.rows] == ["both"]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (1.0, 0.2, "above"),
        (0.2, 1.0, "below"),
        (0.062, 0.061, "level"),
        (0.50, 0.48, "level"),  # 2 points apart: level
        (0.50, 0.479, "above"),
        (float("nan"), 0.0, "level"),  # not a number counts as nothing learned
    ],
)
def test_relation(a: float, b: float, expected: str) -> None:
    assert relation(a, b, LEVEL) == expected


@pytest.mark.parametrize(
    ("device", "matches"),
    [
        ({"both": 1.0, "residual_only": 0.139, "layernorm_only": 0.056, "neither": 0.056}, True),
        ({"both": 1.0, "residual_only": 0.107, "layernorm_only": 0.065, "neither": 0.065}, True),
        ({"both": 1.0, "residual_only": 1.0, "layernorm_only": 0.06, "neither": 0.06}, False),
        ({"both": 1.0, "residual_only": 0.05, "layernorm_only": 0.3, "neither": 0.05}, False),
    ],
)
def test_ranking_matches(device: dict[str, float], matches: bool) -> None:
    assert ranking_matches(device, RECORDED, ROWS, LEVEL) is matches
    assert len(pairs(device, RECORDED, ROWS, LEVEL)) == 6


def test_a_matching_ranking_is_said_along_the_recordings_order() -> None:
    device = {"both": 1.0, "residual_only": 0.139, "layernorm_only": 0.056, "neither": 0.056}
    sentences = order_sentences(LESSON, device, RECORDED)
    relations = [
        TEXT.above.format(high=LABELS["both"], low=LABELS["residual_only"]),
        TEXT.above.format(high=LABELS["residual_only"], low=LABELS["layernorm_only"]),
        TEXT.level.format(one=LABELS["layernorm_only"], other=LABELS["neither"]),
    ]
    assert sentences[0] == TEXT.same_order.format(relations="; ".join(relations))
    # Each pair stays readable on its own: "“Both” ends above “Residuals only”; ..."
    assert sentences[0].count("“") == 6
    assert sentences[-1] == TEXT.all_same


def test_where_the_two_differ_each_pair_is_named_and_counted() -> None:
    # Residuals alone recover everything here: level with both, against the recording's gap.
    device = {"both": 1.0, "residual_only": 1.0, "layernorm_only": 0.062, "neither": 0.062}
    sentences = order_sentences(LESSON, device, RECORDED)
    assert sentences[0].startswith(TEXT.same_order.split("{")[0])
    assert (
        TEXT.above.format(high=LABELS["residual_only"], low=LABELS["layernorm_only"])
        in sentences[0]
    )
    assert sentences[1] == TEXT.differs.format(
        pairs=TEXT.differs_pair.format(
            device=TEXT.level.format(one=LABELS["both"], other=LABELS["residual_only"]),
            recorded=TEXT.above.format(high=LABELS["both"], low=LABELS["residual_only"]),
        )
    )
    assert sentences[-1] == "1 pair of rows ranks differently from the recording."


def test_nothing_in_common_still_says_every_difference() -> None:
    device = {"both": 0.06, "residual_only": 0.5, "layernorm_only": 1.0, "neither": 0.3}
    sentences = order_sentences(LESSON, device, RECORDED)
    assert not sentences[0].startswith(TEXT.same_order.split("{")[0])
    assert sentences[0].count(TEXT.clause_separator) == 4  # five pairs, in one sentence
    assert sentences[-1].startswith("5 pairs")
