"""The compare section's sentences (Lesson.compare) and the takeaway's pre-filled line: what
the recording shows is told once the learner has played the rows that show it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from normdive.lesson.content import COMPONENT_ROWS, Lesson
from normdive.lesson.plurals import counted
from normdive.progress.ablation import AblationState, run_values, which_recovers_more
from normdive.progress.facts import RecordingFacts
from normdive.progress.hints import answer_values

OpeningVerdict = Literal["none", "waiting", "agrees", "differs", "tie", "unavailable"]
RowVerdict = Literal["unpredicted", "waiting", "agrees", "differs"]
ReadingVerdict = Literal["none", "wrong", "right"]


@dataclass(frozen=True)
class CompareRow:
    key: str
    label: str
    verdict: RowVerdict
    sentence: str


@dataclass(frozen=True)
class CompareState:
    revealed: bool  # both single-component rows have played: the answer is shown
    opening_verdict: OpeningVerdict
    opening: str | None
    rows: tuple[CompareRow, ...]
    reading_verdict: ReadingVerdict
    reading: str | None
    complete: bool


def revealed(ablation: AblationState) -> bool:
    return ablation.available and all(key in ablation.play_order for key in COMPONENT_ROWS.values())


def _opening(
    lesson: Lesson, recording: RecordingFacts, prediction: str | None, ablation: AblationState
) -> tuple[OpeningVerdict, str | None]:
    if prediction is None or prediction not in lesson.components:
        return "none", None
    predicted = lesson.components[prediction]
    recovery = which_recovers_more(recording)
    templates = lesson.compare
    if recovery is None:
        problem = recording.problem or ""
        return "unavailable", templates.opening_unavailable.format(
            predicted=predicted, problem=problem
        ).strip()
    if not revealed(ablation):
        # Only the rows still to play: "play both" after one reads as if it had not counted.
        to_play = [
            text.label if text is not None else ""
            for key in COMPONENT_ROWS.values()
            if key not in ablation.play_order
            for text in (lesson.row(key),)
        ]
        if len(to_play) == 1:
            return "waiting", templates.opening_waiting_one.format(
                predicted=predicted, row=to_play[0]
            )
        row, other_row = to_play
        return "waiting", templates.opening_waiting.format(
            predicted=predicted, row=row, other_row=other_row
        )
    values = {"predicted": predicted, **answer_values(lesson, recovery)}
    if recovery.tie:
        return "tie", templates.opening_tie.format_map(values)
    if recovery.component == prediction:
        return "agrees", templates.opening_agrees.format_map(values)
    return "differs", templates.opening_differs.format_map(values)


def _rows(lesson: Lesson, ablation: AblationState) -> tuple[CompareRow, ...]:
    templates = lesson.compare
    out: list[CompareRow] = []
    for row in ablation.rows:
        predicted = lesson.outcome(row.prediction) if row.prediction is not None else None
        if predicted is None:
            out.append(
                CompareRow(
                    row.key,
                    row.label,
                    "unpredicted",
                    templates.row_unpredicted.format(row=row.label),
                )
            )
            continue
        if row.result is None:
            sentence = templates.row_waiting.format(row=row.label, predicted=predicted.predicted)
            out.append(CompareRow(row.key, row.label, "waiting", sentence))
            continue
        actual = lesson.outcome(row.result.band)
        values = {
            "row": row.label,
            "predicted": predicted.predicted,
            "actual": actual.actual if actual is not None else row.result.band_label,
            "accuracy": row.result.accuracy_text,
            "loss": row.result.loss_text,
            "exact_match": row.result.exact_match_text,
            "step": str(row.result.step),
        }
        agrees = row.result.band == row.prediction
        template = templates.row_agrees if agrees else templates.row_differs
        out.append(
            CompareRow(
                row.key,
                row.label,
                "agrees" if agrees else "differs",
                counted(template, row.result.step, **values),
            )
        )
    return tuple(out)


def _reading(lesson: Lesson, locks: int, right: bool) -> tuple[ReadingVerdict, str]:
    templates = lesson.compare
    if locks == 0:
        return "none", templates.reading_none
    if not right:
        return "wrong", templates.reading_wrong
    if locks == 1:
        return "right", templates.reading_right_first
    return "right", counted(templates.reading_right_after, locks, locks=locks)


def compare(
    lesson: Lesson,
    recording: RecordingFacts,
    *,
    prediction: str | None,
    ablation: AblationState,
    reading_locks: int,
    reading_right: bool,
) -> CompareState:
    shown = revealed(ablation)
    opening_verdict, opening = _opening(lesson, recording, prediction, ablation)
    reading_verdict, reading = _reading(lesson, reading_locks, reading_right)
    return CompareState(
        revealed=shown,
        opening_verdict=opening_verdict,
        opening=opening,
        rows=_rows(lesson, ablation),
        reading_verdict=reading_verdict,
        reading=reading,
        complete=ablation.all_played,
    )


def takeaway_line(lesson: Lesson, recording: RecordingFacts, *, revealed: bool) -> str:
    """The default line; once the answer is shown, the composed one if it fits the limit."""
    recovery = which_recovers_more(recording)
    if not revealed or recovery is None:
        return lesson.takeaway.default_line
    template = lesson.takeaway.composed_line_tie if recovery.tie else lesson.takeaway.composed_line
    line = template.format_map({**answer_values(lesson, recovery), **run_values(lesson, recording)})
    return line if len(line) <= lesson.takeaway.max_chars else lesson.takeaway.default_line
