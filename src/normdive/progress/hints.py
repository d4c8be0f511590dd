"""The hint rungs: open by effort (evaluated runs), never by time, in order, and for free.
Rung 1 asks a question; rung 2 is the answer, composed from the recording, so no text names it
in advance. The answer also waits for every row's prediction: five runs can be had from the
numbers and the reading alone, and would turn the row predictions into a reading exercise."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from normdive.i18n.catalogues import N_, gettext
from normdive.lesson.content import Lesson
from normdive.lesson.plurals import counted
from normdive.progress import figures
from normdive.progress.ablation import Recovery, which_recovers_more
from normdive.progress.events import Event
from normdive.progress.facts import RecordingFacts
from normdive.progress.history import History

ANSWER_RUNG = 2


@dataclass(frozen=True)
class HintRungState:
    rung: int
    label: str
    threshold: int  # evaluated runs
    available: bool
    opened: bool
    can_open: bool  # available, not opened, and every earlier rung opened
    runs_needed: int
    predictions_missing: int  # 0 but for the answer
    status: str  # "" once opened
    text: str | None

    @property
    def awaits_predictions(self) -> bool:
        return self.predictions_missing > 0


@dataclass(frozen=True)
class HintsState:
    runs: int
    runs_text: str  # "You have run it 4 times."
    rungs: tuple[HintRungState, ...]

    def rung(self, number: int) -> HintRungState | None:
        return next((r for r in self.rungs if r.rung == number), None)


def answer_values(lesson: Lesson, recovery: Recovery) -> dict[str, str]:
    """ANSWER_FIELDS from the recording: the component that recovers more first."""
    row = lesson.row(recovery.row.key)
    other_row = lesson.row(recovery.other_row.key)
    return {
        "component": lesson.components[recovery.component],
        "row": row.label if row is not None else recovery.row.key,
        "accuracy": figures.percent(recovery.row.accuracy),
        "loss": figures.loss(recovery.row.loss),
        "other_component": lesson.components[recovery.other],
        "other_row": other_row.label if other_row is not None else recovery.other_row.key,
        "other_accuracy": figures.percent(recovery.other_row.accuracy),
        "other_loss": figures.loss(recovery.other_row.loss),
    }


NO_SINGLE_ROWS = N_("it lacks one of the two rows with a single component.")
UNUSABLE = N_("it cannot be read just now.")


def answer_text(lesson: Lesson, recording: RecordingFacts) -> str:
    recovery = which_recovers_more(recording)
    if recovery is None:
        # The recording's own problem is the operator's, in English; the learner reads why.
        reason = gettext(NO_SINGLE_ROWS) if recording.problem is None else gettext(UNUSABLE)
        return f"{lesson.hints.answer_unavailable} {reason}"
    template = lesson.hints.answer_tie if recovery.tie else lesson.hints.rungs[1].text
    return template.format_map(answer_values(lesson, recovery))


def opened_rungs(events: Sequence[Event]) -> set[int]:
    no_lesson = History(lesson_fields=(), lesson_rows=(), lesson_outcomes=frozenset())
    return set(no_lesson.extended(list(events), 0).opened_rungs)


def fold_hints(
    events: Sequence[Event], lesson: Lesson, recording: RecordingFacts, runs: int
) -> HintsState:
    history = dataclasses.replace(History.of(events, lesson), evaluated_runs=runs)
    return hints_state(history, lesson, recording)


def hints_state(history: History, lesson: Lesson, recording: RecordingFacts) -> HintsState:
    opened, runs = history.opened_rungs, history.evaluated_runs
    text_of = lesson.hints
    rows = len(history.lesson_rows)
    unpredicted = sum(
        (tally := history.rows.get(key)) is None or tally.prediction is None
        for key in history.lesson_rows
    )
    rungs: list[HintRungState] = []
    for number, rung in enumerate(lesson.hints.rungs, 1):
        has_runs = runs >= rung.threshold
        missing = unpredicted if number == ANSWER_RUNG else 0
        awaits_predictions = missing > 0
        available = has_runs and not awaits_predictions
        is_open = number in opened
        more = max(0, rung.threshold - runs)
        shut_earlier = next((e for e in range(1, number) if e not in opened), None)
        if is_open:
            status = ""
        elif available:
            status = (
                text_of.rung_ready
                if shut_earlier is None
                else text_of.rung_after_earlier.format(earlier=shut_earlier)
            )
        elif not has_runs:
            status = counted(
                text_of.rung_waiting, rung.threshold, threshold=rung.threshold, more=more
            )
            if awaits_predictions:
                status += " " + counted(text_of.answer_also_needs_predictions, rows, rows=rows)
        else:
            status = counted(text_of.answer_needs_predictions, rows, rows=rows)
        text = None
        if is_open:
            text = rung.text if number == 1 else answer_text(lesson, recording)
        rungs.append(
            HintRungState(
                rung=number,
                label=rung.label,
                threshold=rung.threshold,
                available=available,
                opened=is_open,
                can_open=available and not is_open and shut_earlier is None,
                runs_needed=more,
                predictions_missing=missing,
                status=status,
                text=text,
            )
        )
    return HintsState(
        runs=runs,
        runs_text=lesson.hints.runs_sentence(runs),
        rungs=tuple(rungs),
    )
