"""What derived state needs to know from the recording, and the one adapter that reads it.

`RecordingFacts` is plain data (no file access), so derive stays a pure function and tests
build it by hand. Two ways in (normdive.recording is torch-free, so progress may import it):
    recording_facts(recording: Runs | RecordingProblem) -> RecordingFacts
        what normdive.recording.reader returns, adapted: the page seed's four rows with their
        final figures, the run settings the page states (depth, copy length, seed, steps,
        init), the vocabulary size (which fixes the chance level) and the best row as the
        reader's best_row computes it. Never raises.
    recording_facts_at(path) -> RecordingFacts
        the same from reader.recording_status(path) (cached by the reader; never raises).

RecordingFacts is re-exported by normdive.progress.state, where it was first defined.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from normdive.like_named import like_named
from normdive.recording import reader
from normdive.recording.format import ROW_KEYS, as_float, recorded
from normdive.recording.runs import AblationPlan, Runs


@dataclass(frozen=True)
class RowFacts:
    """One row's final held-out figures at the page seed, as the recording holds them."""

    key: str  # "both", "residual_only", "layernorm_only", "neither"
    accuracy: float  # per-token copy accuracy, 0..1 (nan when the file marks it non-finite)
    loss: float  # cross-entropy on the copied half (nan / inf when marked so)
    exact_match: float  # whole sequences copied exactly, 0..1
    step: int  # the update these figures were measured after
    first_step_at_full_accuracy: int | None  # None: never every held-out token right


@dataclass(frozen=True)
class RecordingFacts:
    """What the gate and the player need from the recording, adapted from the reader."""

    problem: str | None  # why the ablation rows cannot be used today (missing, corrupt, no rows)
    row_keys: tuple[str, ...] = ()  # e.g. ("both", "residual_only", "layernorm_only", "neither")
    best_row: str | None = None  # computed by the recording's reader, never written in code
    # The page seed's rows and the settings the page states. Empty / None when the
    # recording has a problem (or when a caller only knows the keys).
    rows: tuple[RowFacts, ...] = ()
    vocab_size: int | None = None  # distinct symbols; the chance level is 1 / vocab_size
    depth: int | None = None
    copy_length: int | None = None
    seed: int | None = None  # the seed whose rows the page plays
    steps: int | None = None  # updates per row
    init: str | None = None  # the initialisation setting, e.g. "gpt2" (the middle row needs it)

    @property
    def chance_level(self) -> float | None:
        """Per-token accuracy of guessing a symbol uniformly: 1 / vocab_size."""
        return None if self.vocab_size is None else 1 / self.vocab_size

    def row(self, key: str) -> RowFacts | None:
        """The final figures of the row with this key, when the recording has them."""
        return next((r for r in self.rows if r.key == key), None)


def recording_facts(recording: Runs | reader.RecordingProblem) -> RecordingFacts:
    """RecordingFacts from the reader's answer. A recording that lacks one of the four rows at
    its page seed is a problem here too (the reader already refuses one), so the gate says why
    it cannot close instead of waiting for ever."""
    if isinstance(recording, reader.RecordingProblem):
        return RecordingFacts(problem=recording.message)
    plan = recording.plan_as(AblationPlan)
    config = plan.base
    rows = tuple(
        RowFacts(
            key=key,
            accuracy=as_float(row.final.heldout_accuracy),
            loss=as_float(row.final.heldout_loss),
            exact_match=recorded(row.final.heldout_exact_match),
            step=row.final.step,
            first_step_at_full_accuracy=row.final.first_step_at_full_accuracy,
        )
        for key in ROW_KEYS
        if (row := recording.row(key)) is not None
    )
    try:
        reader.require_ablation_rows(recording, "in use")
        best: str | None = reader.best_row(recording)
        problem = None
    except reader.RecordingProblem as refused:
        best, problem = None, refused.message
    return RecordingFacts(
        problem=problem,
        row_keys=tuple(r.key for r in rows) if problem is None else (),
        best_row=best,
        rows=rows if problem is None else (),
        seed=plan.page_seed,
        **like_named(config, "vocab_size", "depth", "copy_length", "steps", "init"),
    )


def recording_facts_at(path: Path | str) -> RecordingFacts:
    """RecordingFacts for the recording file at `path` (missing, corrupt or lacking rows: a
    problem saying so). Never raises."""
    return recording_facts(reader.recording_status(path))
