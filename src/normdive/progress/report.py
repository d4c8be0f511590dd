"""What the instructor view shows: each learner's History summed up, then a pool of learners
summed up (pure). The steps and what reaches each: docs/instructor.md, "What it counts"."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from normdive.i18n.catalogues import N_
from normdive.lesson.content import Lesson
from normdive.progress.ablation import row_band, which_recovers_more
from normdive.progress.events import Event
from normdive.progress.facts import RecordingFacts
from normdive.progress.history import History, from_microseconds, microseconds

STEPS: tuple[str, ...] = (
    "opened",
    "predicted",
    "numbers_landed",
    "reading_right",
    "rows_before_play",
    "best_row_played",
    "gate_closed",
)
STEP_LABELS: Mapping[str, str] = {
    "opened": N_("Opened the lesson"),
    "predicted": N_("Committed the opening prediction"),
    "numbers_landed": N_("Landed all six numbers"),
    "reading_right": N_("Locked the right reading"),
    "rows_before_play": N_("Predicted all four rows before playing"),
    "best_row_played": N_("Played the best row"),
    "gate_closed": N_("Closed the gate"),
}
# The opening prediction's answer when the recording's two single-component rows tie.
TIE = "tie"


class FieldSummary(NamedTuple):  # a tuple: the view builds one per field and learner
    attempts: int
    landed: bool
    slips: Mapping[str, int]  # slip name (numeric.targets.SLIPS) -> wrong tries
    format_errors: int

    @property
    def tried(self) -> bool:
        return self.attempts > 0 or self.format_errors > 0


class LearnerSummary(NamedTuple):  # a tuple: the view builds one per learner
    learner_id: str
    reached: Mapping[str, datetime]  # step -> when first reached (absent: never)
    fields: Mapping[str, FieldSummary]
    opening: str | None
    reading_choices: tuple[str, ...]
    reading_right: bool
    row_predictions: Mapping[str, str]  # row key -> first predicted outcome id
    rows_played: frozenset[str]
    rungs_opened: frozenset[int]
    runs_before_gate: int  # all of them while the gate is open
    takeaway: str | None
    takeaway_at: datetime | None
    events: int

    @property
    def stopped_after(self) -> str | None:
        """The last step of the unbroken run from "opened"; None when not opened."""
        last = None
        for step in STEPS:
            if step not in self.reached:
                break
            last = step
        return last


def summary_record(history: History) -> list[Any]:
    """One learner for the view, as recording-free JSON (layout: history.SNAPSHOT_FORMAT)."""
    return [
        [microseconds(moment) for moment in _step_times(history)],
        {
            key: [tally.attempts, tally.landed, tally.format_errors, tally.slips]
            for key, tally in history.fields.items()
        },
        history.prediction,
        list(history.reading_picks),
        history.reading_right,
        {key: row.prediction for key, row in history.rows.items() if row.prediction is not None},
        {
            key: microseconds(row.first_played_time)
            for key, row in history.rows.items()
            if row.plays
        },
        sorted(history.opened_rungs),
        (
            history.runs_before_gate
            if history.runs_before_gate is not None
            else history.evaluated_runs
        ),
        history.takeaway,
        microseconds(history.takeaway_time),
        history.position,
    ]


def _step_times(history: History) -> tuple[datetime | None, ...]:
    """STEPS' times but best_row_played's, which needs the recording."""
    return (
        history.first_event_at,
        history.predicted_time,
        history.numbers_landed_time,
        history.reading_right_time,
        history.rows_before_play_time,
        history.gate_closed_time,
    )


_RECORDED_STEPS = ("opened", "predicted", "numbers_landed", "reading_right", "rows_before_play")


def summary_from_record(
    learner_id: str,
    record: Sequence[Any],
    best_row: str | None,
    launched_at: datetime | None = None,
) -> LearnerSummary:
    (
        times,
        fields,
        opening,
        picks,
        reading_right,
        predictions,
        played,
        rungs,
        runs,
        takeaway,
        takeaway_at,
        events,
    ) = record
    *before_play, gate_closed = times
    reached: dict[str, datetime] = {}
    for step, count in zip(_RECORDED_STEPS, before_play, strict=True):
        if count is not None:
            reached[step] = from_microseconds(count)  # type: ignore[assignment]
    if launched_at is not None and ("opened" not in reached or launched_at < reached["opened"]):
        reached["opened"] = launched_at
    best_played = played.get(best_row) if best_row is not None else None
    if best_played is not None:
        reached["best_row_played"] = from_microseconds(best_played)  # type: ignore[assignment]
    if gate_closed is not None:
        reached["gate_closed"] = from_microseconds(gate_closed)  # type: ignore[assignment]
    return LearnerSummary(
        learner_id=learner_id,
        reached={step: reached[step] for step in STEPS if step in reached},
        fields={
            key: FieldSummary(attempts, landed, slips, format_errors)
            for key, (attempts, landed, format_errors, slips) in fields.items()
        },
        opening=opening,
        reading_choices=tuple(picks),
        reading_right=reading_right,
        row_predictions=predictions,
        rows_played=frozenset(played),
        rungs_opened=frozenset(rungs),
        runs_before_gate=runs,
        takeaway=takeaway,
        takeaway_at=from_microseconds(takeaway_at),
        events=events,
    )


def summary_of(
    learner_id: str,
    history: History,
    best_row: str | None,
    launched_at: datetime | None = None,
) -> LearnerSummary:
    return summary_from_record(learner_id, summary_record(history), best_row, launched_at)


def summarise(
    learner_id: str,
    events: Iterable[Event],
    lesson: Lesson,
    best_row: str | None,
    launched_at: datetime | None = None,
) -> LearnerSummary:
    return summary_of(learner_id, History.of(events, lesson), best_row, launched_at)


@dataclass(frozen=True)
class FunnelStep:
    step: str
    label: str
    reached: int  # in any order
    stopped: int
    median_s_from_previous: float | None  # over learners who reached both; None: nobody


@dataclass(frozen=True)
class FieldReport:
    field_id: str
    label: str
    tried: int  # learners with a graded try or a format error
    landed: int
    first_try: int
    attempts_to_land: Mapping[int, int]  # graded tries -> learners who landed after that many
    slips: Mapping[str, int]  # most frequent first
    format_errors: int  # entries, over all learners
    never_landed: int


@dataclass(frozen=True)
class RowReport:
    key: str
    label: str
    recorded: str | None  # None when the recording cannot be read
    predicted: Mapping[str, int]  # outcome id -> learners whose first prediction it was


@dataclass(frozen=True)
class Takeaway:
    saved_at: datetime
    text: str


@dataclass(frozen=True)
class PoolReport:
    learners: int
    funnel: tuple[FunnelStep, ...]
    fields: tuple[FieldReport, ...]
    reading_choices: Mapping[str, int]  # choice id -> locks
    reading_tries: Mapping[int, int]  # locks until the right one -> learners
    opening: Mapping[str, int]  # choice id -> learners
    opening_answer: str | None  # the choice that recovers more, TIE, or None
    rows: tuple[RowReport, ...]
    rung_1: int
    rung_2: int
    runs_before_gate: Mapping[int, int]  # evaluated runs -> learners who closed the gate
    takeaways: tuple[Takeaway, ...]  # newest first, non-empty ones only


def counted_median(values: Counter[float]) -> float | None:
    """The median of a multiset (value -> how many times), as statistics.median of the list."""
    total = sum(values.values())
    if total <= 0:
        return None
    ordered = sorted((value, count) for value, count in values.items() if count > 0)
    low_rank, high_rank = (total - 1) // 2, total // 2  # the middle one, or the middle two
    low = high = None
    seen = 0
    for value, count in ordered:
        if low is None and seen + count > low_rank:
            low = value
        if seen + count > high_rank:
            high = value
            break
        seen += count
    assert low is not None and high is not None
    return (low + high) / 2 if low != high else low


def _sorted_counts(counter: Counter[Any]) -> dict[Any, int]:
    """The counts above zero (a removed summary leaves zeros), by key."""
    return dict(sorted((+counter).items()))


@dataclass
class PoolReportBuilder:
    lesson: Lesson
    recording: RecordingFacts
    learners: int = 0
    reached: Counter[str] = field(default_factory=Counter)
    stopped: Counter[str] = field(default_factory=Counter)
    # step -> seconds from the step before -> learners (a multiset: one learner out in one step)
    spans: dict[str, Counter[float]] = field(
        default_factory=lambda: {step: Counter() for step in STEPS}
    )
    tried: Counter[str] = field(default_factory=Counter)
    landed: Counter[str] = field(default_factory=Counter)
    first_try: Counter[str] = field(default_factory=Counter)
    attempts: defaultdict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    slips: defaultdict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    format_errors: Counter[str] = field(default_factory=Counter)
    reading_choices: Counter[str] = field(default_factory=Counter)
    reading_tries: Counter[int] = field(default_factory=Counter)
    opening: Counter[str] = field(default_factory=Counter)
    row_predictions: defaultdict[str, Counter[str]] = field(
        default_factory=lambda: defaultdict(Counter)
    )
    rungs: Counter[int] = field(default_factory=Counter)
    runs_before_gate: Counter[int] = field(default_factory=Counter)
    takeaways: Counter[Takeaway] = field(default_factory=Counter)

    def add(self, summary: LearnerSummary) -> None:
        self._count(summary, 1)

    def remove(self, summary: LearnerSummary) -> None:
        """Take back a summary added before (a learner who moved on is counted again)."""
        self._count(summary, -1)

    def _count(self, summary: LearnerSummary, sign: int) -> None:
        # Run for every learner of a pool: written for speed.
        self.learners += sign
        reached = summary.reached
        before: datetime | None = None
        for step in STEPS:
            at = reached.get(step)
            if at is not None:
                self.reached[step] += sign
                if before is not None:
                    self.spans[step][(at - before).total_seconds()] += sign
            before = at
        stopped = summary.stopped_after
        if stopped is not None:
            self.stopped[stopped] += sign
        for field_id, tally in summary.fields.items():
            if not tally.tried:
                continue
            self.tried[field_id] += sign
            if tally.format_errors:
                self.format_errors[field_id] += sign * tally.format_errors
            for slip, count in tally.slips.items():
                self.slips[field_id][slip] += sign * count
            if tally.landed:
                self.landed[field_id] += sign
                if tally.attempts == 1:
                    self.first_try[field_id] += sign
                self.attempts[field_id][tally.attempts] += sign
        for choice in summary.reading_choices:
            self.reading_choices[choice] += sign
        if summary.reading_right:
            self.reading_tries[len(summary.reading_choices)] += sign
        if summary.opening is not None:
            self.opening[summary.opening] += sign
        for row, outcome in summary.row_predictions.items():
            self.row_predictions[row][outcome] += sign
        for rung in summary.rungs_opened:
            self.rungs[rung] += sign
        if "gate_closed" in reached:
            self.runs_before_gate[summary.runs_before_gate] += sign
        if summary.takeaway and summary.takeaway_at is not None:
            self.takeaways[Takeaway(summary.takeaway_at, summary.takeaway)] += sign

    def _opening_answer(self) -> str | None:
        recovery = which_recovers_more(self.recording)
        if recovery is None:
            return None
        return TIE if recovery.tie else recovery.component

    def _recorded(self, key: str) -> str | None:
        facts = self.recording.row(key)
        chance = self.recording.chance_level
        if self.recording.problem is not None or facts is None or chance is None:
            return None
        return row_band(facts.accuracy, self.lesson, chance)

    def report(self) -> PoolReport:
        funnel = tuple(
            FunnelStep(
                step=step,
                label=STEP_LABELS[step],
                reached=self.reached[step],
                stopped=self.stopped[step],
                median_s_from_previous=counted_median(self.spans[step]),
            )
            for step in STEPS
        )
        fields = tuple(
            FieldReport(
                field_id=number.id,
                label=number.label,
                tried=self.tried[number.id],
                landed=self.landed[number.id],
                first_try=self.first_try[number.id],
                attempts_to_land=_sorted_counts(self.attempts.get(number.id, Counter())),
                slips=dict((+self.slips.get(number.id, Counter())).most_common()),
                format_errors=self.format_errors[number.id],
                never_landed=self.tried[number.id] - self.landed[number.id],
            )
            for number in self.lesson.number_fields
        )
        rows = tuple(
            RowReport(
                key=row.key,
                label=row.label,
                recorded=self._recorded(row.key),
                predicted=dict(+self.row_predictions.get(row.key, Counter())),
            )
            for row in self.lesson.rows
        )
        return PoolReport(
            learners=self.learners,
            funnel=funnel,
            fields=fields,
            reading_choices=dict((+self.reading_choices).most_common()),
            reading_tries=_sorted_counts(self.reading_tries),
            opening=dict((+self.opening).most_common()),
            opening_answer=self._opening_answer(),
            rows=rows,
            rung_1=self.rungs[1],
            rung_2=self.rungs[2],
            runs_before_gate=_sorted_counts(self.runs_before_gate),
            takeaways=tuple(
                sorted(
                    (t for t, count in self.takeaways.items() for _ in range(max(count, 0))),
                    key=lambda t: t.saved_at,
                    reverse=True,
                )
            ),
        )
