"""The instructor view's figures from hand-built histories: one learner summed up (steps and
when they were reached, tries to land, slips, format errors, the reading's locks, the order
rule, runs before the gate, the latest takeaway), then a pool added up (funnel, where they
stop, median spans, first-try shares, attempt distributions, predictions against the
recording's outcomes, takeaways newest first)."""

from __future__ import annotations

import itertools
import statistics
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from normdive.lesson.content import Lesson, load_lesson
from normdive.progress.events import Event, EventKind
from normdive.progress.facts import RecordingFacts, RowFacts
from normdive.progress.report import (
    STEPS,
    TIE,
    PoolReportBuilder,
    counted_median,
    summarise,
)

FIELDS = (
    "row1_mean",
    "row1_variance",
    "row1_denominator",
    "row2_mean",
    "row2_variance",
    "row2_denominator",
)
ROWS = ("both", "residual_only", "layernorm_only", "neither")
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
VOCAB = 16  # chance level 1/16; "chance" is at most 2/16 = 0.125


@pytest.fixture(scope="module")
def lesson() -> Lesson:
    return load_lesson()


def row(key: str, accuracy: float, loss: float = 1.0) -> RowFacts:
    return RowFacts(key, accuracy, loss, 0.0, 100, None)


# both learns, residual_only learns (but lower), layernorm_only partial, neither at chance.
RECORDING = RecordingFacts(
    problem=None,
    row_keys=ROWS,
    best_row="both",
    rows=(
        row("both", 0.99, 0.1),
        row("residual_only", 0.95, 0.2),
        row("layernorm_only", 0.5),
        row("neither", 0.07),
    ),
    vocab_size=VOCAB,
)


class History:
    """Events of one learner, each `gap_s` seconds after the one before (ids increasing)."""

    ids = itertools.count(1)

    def __init__(self, learner: str, start: datetime = START) -> None:
        self.learner = learner
        self.at = start
        self.events: list[Event] = []

    def add(self, kind: EventKind, payload: dict[str, Any], gap_s: float = 60) -> History:
        self.events.append(Event(next(self.ids), self.learner, kind, payload, self.at))
        self.at += timedelta(seconds=gap_s)
        return self

    def check(self, *answers: tuple[str, str, str | None]) -> History:
        entries = [
            {
                "field": field,
                "raw": "1",
                "parsed": "1",
                "verdict": verdict,
                "slip": slip,
                "message": None,
            }
            for field, verdict, slip in answers
        ]
        return self.add(EventKind.NUMBERS_CHECKED, {"answers": entries})

    def all_right(self, *fields: str) -> History:
        return self.check(*((field, "right", None) for field in fields))


def complete(learner: str, start: datetime = START) -> History:
    """A learner who does everything right at the first try, each step a minute apart."""
    history = History(learner, start)
    history.add(EventKind.PREDICTION_COMMITTED, {"choice": "residual"})
    history.all_right(*FIELDS)
    history.add(EventKind.READING_LOCKED, {"choice": "keeps_finite", "right": True})
    for key in ROWS:
        history.add(EventKind.ROW_PREDICTED, {"row": key, "outcome": "learns"})
    history.add(EventKind.ROW_PLAYED, {"row": "both"})
    history.add(EventKind.GATE_CLOSED, {"recording_digest": "d", "recording_file": "f"})
    history.add(EventKind.TAKEAWAY_SAVED, {"text": f"{learner} learnt"})
    return history


def test_a_learner_who_does_everything_reaches_every_step_in_order(lesson: Lesson) -> None:
    history = complete("ada")
    summary = summarise("ada", history.events, lesson, "both")
    assert list(summary.reached) == list(STEPS)
    assert summary.reached["opened"] == START
    assert summary.reached["predicted"] == START
    assert summary.reached["numbers_landed"] == START + timedelta(minutes=1)
    assert summary.reached["rows_before_play"] == START + timedelta(minutes=6)
    assert summary.reached["best_row_played"] == START + timedelta(minutes=7)
    assert summary.reached["gate_closed"] == START + timedelta(minutes=8)
    assert summary.stopped_after == "gate_closed"
    assert all(f.attempts == 1 and f.landed for f in summary.fields.values())
    # One graded check, one lock, one play: three evaluated runs before the gate.
    assert summary.runs_before_gate == 3
    assert summary.takeaway == "ada learnt"


def test_tries_slips_and_format_errors_follow_the_states_rules(lesson: Lesson) -> None:
    history = History("grace")
    history.check(
        ("row1_variance", "wrong", "variance_n_minus_1"),
        ("row1_mean", "format_error", None),
    )
    history.check(
        ("row1_variance", "wrong", "variance_n_minus_1"),
        ("row1_mean", "wrong", None),  # wrong, no slip recognised
    )
    history.check(("row1_variance", "wrong", "variance_is_std"), ("row1_mean", "right", None))
    history.check(("row1_variance", "right", None), ("row1_mean", "wrong", "mean_not_divided"))
    history.check(("row1_variance", "format_error", None))  # after landing: ignored
    summary = summarise("grace", history.events, lesson, "both")
    variance, mean = summary.fields["row1_variance"], summary.fields["row1_mean"]
    assert (variance.attempts, variance.landed, variance.format_errors) == (4, True, 0)
    assert variance.slips == {"variance_n_minus_1": 2, "variance_is_std": 1}
    assert (mean.attempts, mean.landed, mean.format_errors) == (2, True, 1)
    assert mean.slips == {}  # the slip after it landed is ignored
    assert not summary.fields["row2_mean"].tried
    assert "numbers_landed" not in summary.reached
    assert summary.stopped_after == "opened"  # never committed a prediction


def test_the_reading_counts_locks_until_the_right_one(lesson: Lesson) -> None:
    history = History("linus")
    for choice, right in [("smoothing", False), ("regulariser", False), ("keeps_finite", True)]:
        history.add(EventKind.READING_LOCKED, {"choice": choice, "right": right})
    history.add(EventKind.READING_LOCKED, {"choice": "smoothing", "right": False})  # after: final
    summary = summarise("linus", history.events, lesson, "both")
    assert summary.reading_choices == ("smoothing", "regulariser", "keeps_finite")
    assert summary.reading_right
    assert summary.reached["reading_right"] == START + timedelta(minutes=2)


def test_playing_before_predicting_every_row_never_reaches_the_order_step(
    lesson: Lesson,
) -> None:
    history = History("barbara")
    history.add(EventKind.ROW_PREDICTED, {"row": "both", "outcome": "learns"})
    history.add(EventKind.ROW_PLAYED, {"row": "both"})
    for key in ROWS[1:]:
        history.add(EventKind.ROW_PREDICTED, {"row": key, "outcome": "chance"})
    history.add(EventKind.ROW_PREDICTED, {"row": "both", "outcome": "chance"})  # first wins
    history.add(EventKind.HINT_OPENED, {"rung": 1})
    summary = summarise("barbara", history.events, lesson, "both")
    assert "rows_before_play" not in summary.reached
    assert "best_row_played" in summary.reached
    assert summary.row_predictions["both"] == "learns"
    assert summary.rungs_opened == {1}
    assert summary.runs_before_gate == 1  # the play; the gate never closed


def test_a_launch_opens_the_lesson_for_a_learner_with_no_events(lesson: Lesson) -> None:
    summary = summarise("new", [], lesson, "both", launched_at=START)
    assert summary.reached == {"opened": START}
    assert summary.stopped_after == "opened"
    assert summarise("never", [], lesson, "both").stopped_after is None


def test_a_pool_adds_up_its_learners(lesson: Lesson) -> None:
    builder = PoolReportBuilder(lesson, RECORDING)
    # Two complete learners; the second took twice as long between steps.
    builder.add(summarise("ada", complete("ada").events, lesson, "both"))
    slow = History("bob", START + timedelta(days=1))
    slow.add(EventKind.PREDICTION_COMMITTED, {"choice": "layer_norm"}, gap_s=180)
    slow.check(
        *(("row1_mean", "wrong", "mean_not_divided"),),
        *((field, "right", None) for field in FIELDS[1:]),
    )
    slow.all_right("row1_mean")
    slow.add(EventKind.READING_LOCKED, {"choice": "smoothing", "right": False})
    slow.add(EventKind.READING_LOCKED, {"choice": "keeps_finite", "right": True})
    slow.add(EventKind.HINT_OPENED, {"rung": 2})
    slow.add(EventKind.TAKEAWAY_SAVED, {"text": "<script>alert(1)</script>"})
    builder.add(summarise("bob", slow.events, lesson, "both"))
    # One who opened and stopped.
    builder.add(summarise("cy", [], lesson, "both", launched_at=START))
    report = builder.report()

    assert report.learners == 3
    funnel = {step.step: step for step in report.funnel}
    assert [funnel[s].reached for s in STEPS] == [3, 2, 2, 2, 1, 1, 1]
    assert [funnel[s].stopped for s in STEPS] == [1, 0, 0, 1, 0, 0, 1]
    # ada: predicted -> numbers landed in 60 s; bob: 180 s to the first check, which left
    # the mean wrong, and 60 s more to the one that landed it; the median of 60 and 240.
    assert funnel["numbers_landed"].median_s_from_previous == 150.0
    assert funnel["opened"].median_s_from_previous is None

    mean = next(f for f in report.fields if f.field_id == "row1_mean")
    assert (mean.tried, mean.landed, mean.first_try, mean.never_landed) == (2, 2, 1, 0)
    assert mean.attempts_to_land == {1: 1, 2: 1}
    assert mean.slips == {"mean_not_divided": 1}
    variance = next(f for f in report.fields if f.field_id == "row1_variance")
    assert variance.first_try == 2 and variance.slips == {}

    assert report.reading_choices == {"keeps_finite": 2, "smoothing": 1}
    assert report.reading_tries == {1: 1, 2: 1}
    assert report.opening == {"residual": 1, "layer_norm": 1}
    # residual_only (0.95) beats layernorm_only (0.5): the residual connections recover more.
    assert report.opening_answer == "residual"
    recorded = {r.key: r.recorded for r in report.rows}
    assert recorded == {
        "both": "learns",
        "residual_only": "learns",
        "layernorm_only": "partial",
        "neither": "chance",
    }
    assert {r.key: dict(r.predicted) for r in report.rows}["neither"] == {"learns": 1}
    assert (report.rung_1, report.rung_2) == (0, 1)
    assert report.runs_before_gate == {3: 1}
    assert [t.text for t in report.takeaways] == ["<script>alert(1)</script>", "ada learnt"]


def test_a_tie_and_an_unreadable_recording_are_said_so(lesson: Lesson) -> None:
    tied = RecordingFacts(
        problem=None,
        row_keys=ROWS,
        best_row="both",
        rows=(
            row("both", 0.99),
            row("residual_only", 0.5),
            row("layernorm_only", 0.5),
            row("neither", 0.07),
        ),
        vocab_size=VOCAB,
    )
    assert PoolReportBuilder(lesson, tied).report().opening_answer == TIE
    broken = PoolReportBuilder(lesson, RecordingFacts(problem="missing")).report()
    assert broken.opening_answer is None
    assert all(r.recorded is None for r in broken.rows)
    assert broken.learners == 0 and all(step.reached == 0 for step in broken.funnel)


def test_malformed_payloads_are_skipped_not_raised_on(lesson: Lesson) -> None:
    history = History("mallory")
    history.add(EventKind.NUMBERS_CHECKED, {"answers": [{"field": "row1_mean", "verdict": []}]})
    history.add(EventKind.NUMBERS_CHECKED, {"answers": "not a list"})
    history.add(EventKind.NUMBERS_CHECKED, {"answers": [7, {"field": ["x"], "verdict": "right"}]})
    history.add(EventKind.ROW_PREDICTED, {"row": ["both"], "outcome": {"a": 1}})
    history.add(EventKind.ROW_PLAYED, {"row": {"k": "both"}})
    history.add(EventKind.HINT_OPENED, {"rung": "1"})
    history.add(EventKind.READING_LOCKED, {})
    summary = summarise("mallory", history.events, lesson, "both")
    assert not any(f.tried for f in summary.fields.values())
    assert summary.row_predictions == {} and summary.rows_played == frozenset()
    assert summary.rungs_opened == frozenset()
    assert summary.reading_choices == ("None",) and not summary.reading_right
    PoolReportBuilder(lesson, RECORDING).add(summary)


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=30), st.integers(0, 5))
@example([], 0)
@example([1.0, 1.0, 2.0, 5.0], 0)
@example([3.0], 1)
def test_the_median_of_a_multiset_is_the_median_of_its_list(
    values: list[float], taken_back: int
) -> None:
    """The funnel's medians are kept as counts per value, so that a learner's spans can be
    taken back; with values added and some taken back, the median is statistics.median's."""
    counts: Counter[float] = Counter(values)
    kept = list(values)
    for value in values[:taken_back]:
        counts[value] -= 1
        kept.remove(value)
    assert counted_median(counts) == (statistics.median(kept) if kept else None)
