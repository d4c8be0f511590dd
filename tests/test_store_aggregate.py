"""Store.prediction_counts on a real SQLite file and on PostgreSQL: every learner counted once,
by their first prediction, and the shares hidden until five learners have answered."""

from __future__ import annotations

import pytest

from normdive.lesson.content import load_lesson
from normdive.progress.aggregate import PredictionCounts, aggregate
from normdive.progress.events import EventKind
from normdive.store.event_store import Store

pytestmark = pytest.mark.both_databases

LESSON = load_lesson()


def learner_who(store: Store, opening: str | None, **rows: str) -> str:
    learner = store.create_learner()
    store.append(learner, EventKind.PREREQUISITE_DONE, {"source": "host"})
    if opening is not None:
        store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": opening})
    for row, outcome in rows.items():
        store.append(learner, EventKind.ROW_PREDICTED, {"row": row, "outcome": outcome})
    return learner


def test_an_empty_store_counts_nothing(store: Store) -> None:
    assert store.prediction_counts() == PredictionCounts(committed=0, opening={}, rows={})


def test_each_learner_is_counted_once_by_their_first_prediction(store: Store) -> None:
    racer = learner_who(store, "residual", both="learns")
    # Two tabs racing: later events for the same question never count.
    store.append(racer, EventKind.PREDICTION_COMMITTED, {"choice": "layer_norm"})
    store.append(racer, EventKind.ROW_PREDICTED, {"row": "both", "outcome": "chance"})
    learner_who(store, "layer_norm", both="partial", neither="chance")
    learner_who(store, "residual", neither="chance")
    learner_who(store, None)  # never committed: not counted
    counts = store.prediction_counts()
    assert counts.committed == 3
    assert dict(counts.opening) == {"residual": 2, "layer_norm": 1}
    assert {row: dict(outcomes) for row, outcomes in counts.rows.items()} == {
        "both": {"learns": 1, "partial": 1},
        "neither": {"chance": 2},
    }


def test_other_events_and_payloads_without_the_answer_are_left_out(store: Store) -> None:
    learner = learner_who(store, "residual")
    store.append(learner, EventKind.ROW_PLAYED, {"row": "both"})
    store.append(learner, EventKind.HINT_OPENED, {"rung": 1})
    store.append(learner, EventKind.ROW_PREDICTED, {"outcome": "learns"})  # no row
    store.append(learner, EventKind.ROW_PREDICTED, {"row": "neither"})  # no outcome
    counts = store.prediction_counts()
    assert (counts.committed, dict(counts.opening), dict(counts.rows)) == (
        1,
        {"residual": 1},
        {},
    )


def test_the_shares_appear_at_five_learners_and_not_before(store: Store) -> None:
    for _ in range(4):
        learner_who(store, "residual", both="learns")
    hidden = aggregate(store.prediction_counts(), LESSON)
    assert not hidden.opening.shown and hidden.committed_text is None
    assert not hidden.rows[0].shown
    learner_who(store, "layer_norm", both="partial")
    shown = aggregate(store.prediction_counts(), LESSON)
    assert shown.opening.shown and shown.opening.total == 5
    assert [s.text for s in shown.opening.shares] == ["1 of 5 (20 %)", "4 of 5 (80 %)"]
    both = shown.rows[0]
    assert both.key == "both" and both.shown
    assert [s.count for s in both.shares] == [4, 1, 0]
    assert not any(q.shown for q in shown.rows[1:])


def test_a_learner_who_repeats_does_not_reach_the_minimum_alone(store: Store) -> None:
    learner = learner_who(store, "residual")
    for _ in range(6):
        store.append(learner, EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
    counts = store.prediction_counts()
    assert counts.committed == 1 and dict(counts.opening) == {"residual": 1}
    assert not aggregate(counts, LESSON).opening.shown
