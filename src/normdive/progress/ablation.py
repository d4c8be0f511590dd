"""The ablation's derived state: row bands, which single component recovers more, predictions
and plays. Nothing here names a row or a component as the answer: the recording does."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from normdive.lesson.content import COMPONENT_ROWS, Lesson, OutcomeId
from normdive.progress import figures
from normdive.progress.events import Event
from normdive.progress.facts import RecordingFacts, RowFacts
from normdive.progress.history import History, RowTally

# Accuracies pass float32 (0.9 -> 0.89999998); their steps of 1 / 4,096 dwarf this slack.
BAND_EDGE_SLACK = 1e-6


@dataclass(frozen=True)
class Recovery:
    """Which single component, put back into the stack that has lost both, recovers more."""

    component: str  # predict choice id: "layer_norm" or "residual"
    other: str
    row: RowFacts  # the row keeping only `component`
    other_row: RowFacts
    tie: bool  # equal accuracy and loss: a real outcome; `component` is then COMPONENT_ROWS' first


@dataclass(frozen=True)
class RowResult:
    band: OutcomeId
    band_label: str
    accuracy: float
    loss: float
    exact_match: float
    step: int
    first_step_at_full_accuracy: int | None
    accuracy_text: str  # "21.3 %"
    loss_text: str
    exact_match_text: str


@dataclass(frozen=True)
class RowState:
    key: str
    label: str
    description: str
    prediction: OutcomeId | None = None
    prediction_label: str | None = None
    plays: int = 0
    first_played: int | None = None  # 1 for the first row played, 2 for the next new one, ...
    result: RowResult | None = None  # revealed once the row has played


@dataclass(frozen=True)
class OutcomeOption:
    id: OutcomeId
    label: str
    band_text: str | None  # None while the recording cannot be used


@dataclass(frozen=True)
class AblationState:
    available: bool  # the recording's rows can be predicted and played
    problem: str | None
    rows: tuple[RowState, ...]  # in the lesson's order, the recording's rows only
    outcomes: tuple[OutcomeOption, ...]
    predictions_recorded: int
    predictions_total: int  # 0 when the recording cannot be used
    can_play: bool
    play_locked_reason: str | None  # the 409 text
    plays: int
    play_order: tuple[str, ...]  # by first play
    all_played: bool
    # False for good once a row played early: only a race or an older version lets one.
    predictions_before_play: bool
    best_row_played: bool  # RecordingFacts.best_row, whichever row that is
    statement: str | None  # these runs, this depth and seed, nothing more general
    initialisation: str | None

    def row(self, key: str) -> RowState | None:
        return next((r for r in self.rows if r.key == key), None)


def _is_number(x: float) -> bool:
    return not math.isnan(x)


def row_band(accuracy: float, lesson: Lesson, chance_level: float) -> OutcomeId:
    """The band of a final held-out per-token accuracy (Lesson.bands)."""
    # Non-finite shows no learning. Learns first: a tiny vocabulary's chance band may reach it.
    if not math.isfinite(accuracy):
        return "chance"
    if accuracy >= float(lesson.bands.learns_min_accuracy) - BAND_EDGE_SLACK:
        return "learns"
    if accuracy <= float(lesson.bands.chance_max_multiple) * chance_level + BAND_EDGE_SLACK:
        return "chance"
    return "partial"


def band_texts(lesson: Lesson, recording: RecordingFacts) -> dict[OutcomeId, str]:
    """Each outcome's band in words for this recording's vocabulary; empty when unknown."""
    if recording.vocab_size is None:
        return {}
    chance_level = Decimal(1) / Decimal(recording.vocab_size)
    values = {
        "learns_min": figures.exact_percent(lesson.bands.learns_min_accuracy),
        "chance_max": figures.exact_percent(lesson.bands.chance_max_multiple * chance_level),
        "chance_level": figures.exact_percent(chance_level),
        "chance_multiple": f"{lesson.bands.chance_max_multiple.normalize():f}",
        "vocab_size": str(recording.vocab_size),
    }
    return {outcome.id: outcome.band.format_map(values) for outcome in lesson.outcomes}


def _rank(row: RowFacts) -> tuple[float, float]:
    # Higher accuracy, then lower loss; anything non-finite ranks last.
    accuracy = row.accuracy if _is_number(row.accuracy) else -math.inf
    loss = row.loss if _is_number(row.loss) else math.inf
    return accuracy, -loss


def which_recovers_more(recording: RecordingFacts) -> Recovery | None:
    """Which single component recovers more in this recording; None when it cannot say."""
    if recording.problem is not None:
        return None
    (first, first_key), (second, second_key) = COMPONENT_ROWS.items()
    first_row, second_row = recording.row(first_key), recording.row(second_key)
    if first_row is None or second_row is None:
        return None
    if _rank(first_row) == _rank(second_row):
        return Recovery(first, second, first_row, second_row, tie=True)
    if _rank(first_row) > _rank(second_row):
        return Recovery(first, second, first_row, second_row, tie=False)
    return Recovery(second, first, second_row, first_row, tie=False)


def best_row(recording: RecordingFacts) -> str | None:
    """The recording reader's best row; None when the rows cannot be used."""
    return recording.best_row if recording.problem is None else None


def run_values(lesson: Lesson, recording: RecordingFacts) -> dict[str, str]:
    """RUN_FIELDS for a template: depth, copy_length, seed, steps, init (in words)."""
    init = recording.init or ""
    return {
        "depth": str(recording.depth),
        "copy_length": str(recording.copy_length),
        "seed": str(recording.seed),
        "steps": str(recording.steps),
        "init": lesson.init_names.get(init, init),
    }


def _result(lesson: Lesson, facts: RowFacts, chance_level: float | None) -> RowResult | None:
    if chance_level is None:
        return None
    band = row_band(facts.accuracy, lesson, chance_level)
    outcome = lesson.outcome(band)
    return RowResult(
        band=band,
        band_label=outcome.label if outcome is not None else band,
        accuracy=facts.accuracy,
        loss=facts.loss,
        exact_match=facts.exact_match,
        step=facts.step,
        first_step_at_full_accuracy=facts.first_step_at_full_accuracy,
        accuracy_text=figures.percent(facts.accuracy),
        loss_text=figures.loss(facts.loss),
        exact_match_text=figures.percent(facts.exact_match),
    )


def fold_ablation(
    events: Sequence[Event], lesson: Lesson, recording: RecordingFacts
) -> AblationState:
    return ablation_state(History.of(events, lesson), lesson, recording)


def ablation_state(history: History, lesson: Lesson, recording: RecordingFacts) -> AblationState:
    """Row predictions, plays and the order rule for the recording's rows."""
    available = recording.problem is None and bool(recording.row_keys)
    if available:
        keys = [row.key for row in lesson.rows if row.key in recording.row_keys]
    else:
        keys = [row.key for row in lesson.rows]
    total = len(recording.row_keys) if available else 0
    tallies = {key: history.rows.get(key, RowTally()) for key in keys}
    predictions: dict[str, OutcomeId] = {
        key: tally.prediction  # type: ignore[misc]
        for key, tally in tallies.items()
        if tally.prediction is not None
    }
    plays = {key: tally.plays for key, tally in tallies.items() if tally.plays > 0}
    order = sorted(plays, key=lambda key: tallies[key].first_played_at or 0)
    # Predictions only accumulate: all made before the first play were before every play.
    first_play = history.first_play_at
    before_play = first_play is None or (
        sum(
            1
            for tally in tallies.values()
            if tally.predicted_at is not None and tally.predicted_at < first_play
        )
        >= total
    )
    rows = []
    for key in keys:
        text = lesson.row(key)
        assert text is not None  # keys come from lesson.rows
        prediction = predictions.get(key)
        predicted = lesson.outcome(prediction) if prediction is not None else None
        facts = recording.row(key) if available else None
        played = plays.get(key, 0) > 0
        rows.append(
            RowState(
                key=key,
                label=text.label,
                description=text.description,
                prediction=prediction,
                prediction_label=predicted.label if predicted is not None else None,
                plays=plays.get(key, 0),
                first_played=order.index(key) + 1 if played else None,
                result=(
                    _result(lesson, facts, recording.chance_level)
                    if played and facts is not None
                    else None
                ),
            )
        )
    bands = band_texts(lesson, recording) if available else {}
    missing = total - len(predictions)
    can_play = available and missing == 0
    best = best_row(recording)
    return AblationState(
        available=available,
        problem=(
            None
            if available
            else f"{lesson.ablation.unavailable} {recording.problem or ''}".strip()
        ),
        rows=tuple(rows),
        outcomes=tuple(
            OutcomeOption(outcome.id, outcome.label, bands.get(outcome.id))
            for outcome in lesson.outcomes
        ),
        predictions_recorded=len(predictions),
        predictions_total=total,
        can_play=can_play,
        play_locked_reason=(
            lesson.ablation.play_locked.format(missing=missing, total=total)
            if available and not can_play
            else None
        ),
        plays=sum(plays.values()),
        play_order=tuple(order),
        all_played=available and len(order) == total,
        predictions_before_play=before_play,
        best_row_played=best is not None and best in plays,
        statement=(
            lesson.ablation.statement.format_map(run_values(lesson, recording))
            if available and recording.depth is not None
            else None
        ),
        initialisation=(
            lesson.ablation.initialisation_named.format_map(run_values(lesson, recording))
            if available and recording.init is not None
            else None
        ),
    )
