"""Shares of how all learners predicted, hidden below the lesson's minimum of learners."""

from __future__ import annotations

import pytest

from normdive.lesson.content import load_lesson
from normdive.progress.aggregate import PredictionCounts, aggregate

LESSON = load_lesson()
MINIMUM = LESSON.aggregate.min_learners


def test_the_minimum_is_lesson_data_and_five() -> None:
    assert MINIMUM == 5


@pytest.mark.parametrize(
    ("counts", "shown"),
    [
        ({}, False),
        ({"residual": 4}, False),
        ({"residual": 2, "layer_norm": 2}, False),
        ({"residual": 3, "layer_norm": 2}, True),
        ({"residual": 5}, True),
        # An id the lesson no longer offers is not an answer to this question.
        ({"residual": 4, "attention": 3}, False),
    ],
)
def test_the_opening_question_is_hidden_below_five_learners(
    counts: dict[str, int], shown: bool
) -> None:
    view = aggregate(PredictionCounts(committed=sum(counts.values()), opening=counts), LESSON)
    assert view.opening.shown is shown
    if shown:
        assert view.opening.hidden_text is None
        assert view.opening.total == sum(counts.get(c.id, 0) for c in LESSON.predict.choices)
    else:
        assert view.opening.shares == () and view.opening.total == 0
        assert (
            view.opening.hidden_text
            == "These totals appear once at least 5 learners have answered."
        )


def test_shares_at_exactly_five() -> None:
    view = aggregate(
        PredictionCounts(committed=5, opening={"residual": 3, "layer_norm": 2}), LESSON
    )
    assert view.committed_text == "5 learners have committed an opening prediction."
    assert [(s.id, s.label, s.count, s.share, s.text) for s in view.opening.shares] == [
        ("layer_norm", "Layer norm", 2, 0.4, "2 of 5 (40 %)"),
        ("residual", "Residual connections", 3, 0.6, "3 of 5 (60 %)"),
    ]


def test_each_row_is_its_own_question() -> None:
    counts = PredictionCounts(
        committed=7,
        opening={"residual": 7},
        rows={
            "both": {"learns": 6, "partial": 1},
            "residual_only": {"partial": 2, "chance": 2},
            "neither": {"chance": 5, "sideways": 9},
        },
    )
    view = aggregate(counts, LESSON)
    assert [q.key for q in view.rows] == ["both", "residual_only", "layernorm_only", "neither"]
    assert [q.label for q in view.rows] == [r.label for r in LESSON.rows]
    both, residual, layer_norm, neither = view.rows
    assert both.shown and [s.count for s in both.shares] == [6, 1, 0]
    assert [s.text for s in both.shares] == ["6 of 7 (86 %)", "1 of 7 (14 %)", "0 of 7 (0 %)"]
    assert not residual.shown and residual.shares == ()
    assert not layer_norm.shown
    assert neither.shown and neither.total == 5  # the unknown outcome is left out
    assert [s.id for s in neither.shares] == ["learns", "partial", "chance"]


def test_nothing_is_shown_for_a_new_server() -> None:
    view = aggregate(PredictionCounts(), LESSON)
    assert view.committed_text is None and view.minimum == MINIMUM
    assert not view.opening.shown and not any(q.shown for q in view.rows)
