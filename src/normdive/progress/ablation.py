"""The ablation's derived state: bands, which single component recovers more, row predictions
and plays. Pure functions of the lesson, the recording's facts and the learner's events.

Public API (the web renders these; nothing here names a row or a component as the answer):
    row_band(accuracy, lesson, chance_level) -> OutcomeId      a recorded row's outcome
    band_texts(lesson, recording) -> dict[OutcomeId, str]       each band stated in words
    which_recovers_more(recording) -> Recovery | None           the opening question's answer
    best_row(recording) -> str | None                           the reader's best row
    fold_ablation(events, lesson, recording) -> AblationState   predictions, plays, the order
                                                                rule, results of played rows

Rules:
- Bands (lesson data, Lesson.bands): learns when the final held-out per-token accuracy is at
  least learns_min_accuracy; chance when it is at most chance_max_multiple x the chance level
  1 / vocab_size; partial in between. Learns is checked first, so a tiny vocabulary whose
  chance band would reach past it still reads "learns" at the top. A non-finite accuracy (the
  file marks it, never drops it) is no evidence of learning: it reads as chance.
- Which single component recovers more: compare the "layernorm_only" row (layer norm put back
  into the stack with both removed) with the "residual_only" row: higher final accuracy, then
  lower final loss (a non-finite loss is the worst). Equal on both: a tie, a real outcome
  (Recovery.tie), never an error.
- The first row_predicted for a row wins (two tabs racing); later ones change nothing.
- Plays: each row_played counts (replays too); a row's first play fixes its place in
  play_order. A row's result (band and figures) is revealed once the row has played.
- The order rule: if any row played while fewer than all rows were predicted, the gate's
  "predictions before play" part fails for good. The server refuses such a play, so only a
  race or an older version can produce it; derive still says so.
"""

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

# Accuracies are recorded through float32 (a 0.9 arrives as 0.89999998), so a band edge is
# met within this much. The accuracy itself moves in steps of 1 / (256 x 16) ~ 2.4e-4, far
# coarser, so no real row is moved across an edge by it.
BAND_EDGE_SLACK = 1e-6


@dataclass(frozen=True)
class Recovery:
    """Which single component, put back into the stack that has lost both, recovers more."""

    component: str  # predict choice id ("layer_norm" / "residual") that recovers more
    other: str  # the other choice id
    row: RowFacts  # the row keeping only `component`
    other_row: RowFacts
    tie: bool  # equal accuracy and equal loss: neither recovers more (component is then
    # simply the first of COMPONENT_ROWS)


@dataclass(frozen=True)
class RowResult:
    """What a played row did, with its figures ready for a sentence."""

    band: OutcomeId
    band_label: str  # the outcome's label, e.g. "Gets part of the way"
    accuracy: float
    loss: float
    exact_match: float
    step: int
    first_step_at_full_accuracy: int | None
    accuracy_text: str  # "21.3 %"
    loss_text: str  # "0.012"
    exact_match_text: str


@dataclass(frozen=True)
class RowState:
    key: str
    label: str  # from the lesson
    description: str
    prediction: OutcomeId | None = None  # the first committed prediction for this row
    prediction_label: str | None = None
    plays: int = 0  # every play, replays included
    first_played: int | None = None  # 1 for the first row played, 2 for the next new one, ...
    result: RowResult | None = None  # revealed once the row has played


@dataclass(frozen=True)
class OutcomeOption:
    """One outcome a learner can predict, with its band stated for this recording."""

    id: OutcomeId
    label: str
    band_text: str | None  # None while the recording cannot be used


@dataclass(frozen=True)
class AblationState:
    available: bool  # the recording's rows can be predicted and played
    problem: str | None  # lesson.ablation.unavailable + the recording's problem
    rows: tuple[RowState, ...]  # in the lesson's order, the recording's rows only
    outcomes: tuple[OutcomeOption, ...]
    predictions_recorded: int
    predictions_total: int  # the recording's rows (4), 0 when it cannot be used
    can_play: bool  # every row predicted and the recording usable
    play_locked_reason: str | None  # why the play buttons are disabled (the 409 text)
    plays: int  # every play of every row
    play_order: tuple[str, ...]  # row keys in the order of their first play
    all_played: bool  # every row has played at least once
    predictions_before_play: bool  # False for good once a row played too early
    best_row_played: bool  # the reader's best row has been played
    statement: str | None  # these runs, this depth and seed, nothing more general
    initialisation: str | None  # the initialisation the recording names

    def row(self, key: str) -> RowState | None:
        return next((r for r in self.rows if r.key == key), None)


def _is_number(x: float) -> bool:
    return not math.isnan(x)


def row_band(accuracy: float, lesson: Lesson, chance_level: float) -> OutcomeId:
    """The outcome a final held-out per-token accuracy falls in (see the module's rules)."""
    if not math.isfinite(accuracy):
        return "chance"
    if accuracy >= float(lesson.bands.learns_min_accuracy) - BAND_EDGE_SLACK:
        return "learns"
    if accuracy <= float(lesson.bands.chance_max_multiple) * chance_level + BAND_EDGE_SLACK:
        return "chance"
    return "partial"


def band_texts(lesson: Lesson, recording: RecordingFacts) -> dict[OutcomeId, str]:
    """Each outcome's band in words, for this recording's vocabulary. Empty when unknown."""
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
    # Higher accuracy first, then lower loss; anything non-finite ranks last.
    accuracy = row.accuracy if _is_number(row.accuracy) else -math.inf
    loss = row.loss if _is_number(row.loss) else math.inf
    return accuracy, -loss


def which_recovers_more(recording: RecordingFacts) -> Recovery | None:
    """The opening question's answer as this recording gives it, or None when it cannot."""
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
    """The best row as the recording's reader computed it; None when the rows cannot be used."""
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
    """Row predictions, plays and the order rule from the learner's events, oldest first."""
    return ablation_state(History.of(events, lesson), lesson, recording)


def ablation_state(history: History, lesson: Lesson, recording: RecordingFacts) -> AblationState:
    """Row predictions, plays and the order rule from the learner's History (its per-row
    tallies), for the recording's rows."""
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
    # Predictions only accumulate: were all the rows predicted before the first play of any
    # row, they were before every play.
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
