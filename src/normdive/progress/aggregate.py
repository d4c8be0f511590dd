"""How all learners of this server predicted, each once by their first answer; a question is
hidden while fewer than lesson.aggregate.min_learners answered it. No learner id reaches here;
an id the lesson no longer has is left out, so shares add up to 100 %."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from normdive.lesson.content import Choice, Lesson
from normdive.lesson.plurals import counted
from normdive.progress import figures


@dataclass(frozen=True)
class PredictionCounts:
    """What the store counts (Store.prediction_counts)."""

    committed: int = 0
    opening: Mapping[str, int] = field(default_factory=dict)  # choice id -> learners
    rows: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # row -> outcome -> n


@dataclass(frozen=True)
class ShareView:
    id: str
    label: str
    count: int
    share: float  # 0..1
    text: str  # "3 of 7 (43 %)"


@dataclass(frozen=True)
class QuestionView:
    key: str  # "opening", or the row key
    label: str
    total: int  # 0 while hidden
    shown: bool  # while hidden no count is given at all
    shares: tuple[ShareView, ...]  # in the lesson's choice order; () while hidden
    hidden_text: str | None


@dataclass(frozen=True)
class AggregateView:
    minimum: int
    committed_text: str | None  # None while below the minimum
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
