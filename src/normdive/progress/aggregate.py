"""How all learners of this server predicted: totals only, hidden below a minimum.

    PredictionCounts                    what the store counts (Store.prediction_counts()):
                                        learners per opening choice and per (row, outcome),
                                        each learner once, by their FIRST such event
    aggregate(counts, lesson) -> AggregateView
                                        counts and shares per question, each question hidden
                                        while fewer than lesson.aggregate.min_learners (5)
                                        learners have answered it

No learner id ever reaches this module: the store returns bare counts. A question's total is
the number of learners whose first answer is one of the lesson's choices (an id the lesson no
longer has is left out), so its shares add up to 100 % (give or take rounding).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from normdive.lesson.content import Choice, Lesson
from normdive.lesson.plurals import counted
from normdive.progress import figures


@dataclass(frozen=True)
class PredictionCounts:
    """Learners counted once each, by their first prediction."""

    committed: int = 0  # learners who committed an opening prediction
    opening: Mapping[str, int] = field(default_factory=dict)  # choice id -> learners
    rows: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # row -> outcome -> n


@dataclass(frozen=True)
class ShareView:
    id: str  # the choice or outcome id
    label: str
    count: int
    share: float  # count / total, 0..1
    text: str  # the lesson's share template: "3 of 7 (43 %)"


@dataclass(frozen=True)
class QuestionView:
    key: str  # "opening", or the row key
    label: str  # the question or the row, as the page names it
    total: int  # learners who answered it (hidden as 0 while below the minimum)
    shown: bool  # at least the minimum answered; otherwise no counts are given at all
    shares: tuple[ShareView, ...]  # in the lesson's choice order; () while hidden
    hidden_text: str | None  # why it is hidden ("appear once at least 5 ...")


@dataclass(frozen=True)
class AggregateView:
    minimum: int
    committed_text: str | None  # "N learners have committed ...", None while below minimum
    opening: QuestionView
    rows: tuple[QuestionView, ...]


def _question(
    key: str,
    label: str,
    counts: Mapping[str, int],
    choices: Sequence[Choice],
    lesson: Lesson,
) -> QuestionView:
    minimum = lesson.aggregate.min_learners
    known = {choice.id: max(0, int(counts.get(choice.id, 0))) for choice in choices}
    total = sum(known.values())
    if total < minimum:
        hidden = counted(lesson.aggregate.hidden, minimum, minimum=minimum)
        return QuestionView(key, label, 0, False, (), hidden)
    shares = tuple(
        ShareView(
            id=choice.id,
            label=choice.label,
            count=known[choice.id],
            share=known[choice.id] / total,
            text=lesson.aggregate.share.format(
                count=known[choice.id],
                total=total,
                share=figures.share(known[choice.id], total),
            ),
        )
        for choice in choices
    )
    return QuestionView(key, label, total, True, shares, None)


def aggregate(counts: PredictionCounts, lesson: Lesson) -> AggregateView:
    """Counts and shares per question, in the lesson's order, hidden below the minimum."""
    outcomes = [Choice(id=o.id, label=o.label) for o in lesson.outcomes]
    minimum = lesson.aggregate.min_learners
    return AggregateView(
        minimum=minimum,
        committed_text=(
            counted(lesson.aggregate.committed, counts.committed, count=counts.committed)
            if counts.committed >= minimum
            else None
        ),
        opening=_question(
            "opening",
            lesson.aggregate.opening_label,
            counts.opening,
            lesson.predict.choices,
            lesson,
        ),
        rows=tuple(
            _question(row.key, row.label, counts.rows.get(row.key, {}), outcomes, lesson)
            for row in lesson.rows
        ),
    )
