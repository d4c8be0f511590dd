"""A small hand-made recording, for the tests that need rows without training any.

Its numbers are made up (shaped like the real ones); its provenance says so. Nothing ships
it: the page reads recordings/the-transformer-block.json, made by `normdive record-runs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from normdive.recording.format import (
    ROW_KEYS,
    ROW_SWITCHES,
    BlockGradNorms,
    Provenance,
    RowKey,
    RunConfig,
)
from normdive.recording.runs import (
    LESSON,
    AblationPlan,
    Run,
    RunFinal,
    RunPoint,
    Runs,
    runs_file,
    settings_at,
)

# (final held-out accuracy, final held-out loss) per row, shaped like a real recording.
SAMPLE_FINALS: dict[RowKey, tuple[float, float]] = {
    "both": (1.0, 0.003),
    "residual_only": (0.2, 2.2),
    "layernorm_only": (0.062, 2.773),
    "neither": (0.061, 2.774),
}
CHANCE_LOSS = 2.833  # about ln(17): the untrained model's loss over 16 symbols + separator
SAMPLE_PROVENANCE = Provenance(
    script="tests/sample_recordings.py (made-up numbers, for tests)",
    normdive_version="0",
    git_commit=None,
    git_dirty=None,
    command="sample_recording()",
    python_version="3",
    torch_version="none",
    platform="none",
    device="none",
    jobs=1,
    threads_per_job=1,
    created_at="2000-01-01T00:00:00+00:00",
    wall_s=0.0,
    rows_resumed=0,
)


def sample_row(
    key: RowKey, seed: int = 0, *, accuracy: float, loss: float, config: RunConfig
) -> Run:
    """A row's run whose curve goes from chance to (accuracy, loss) in three points."""
    layernorm, residual = ROW_SWITCHES[key]
    middle = config.steps // 2
    curve = [
        RunPoint(
            step=0,
            train_loss=None,
            heldout_loss=CHANCE_LOSS,
            heldout_accuracy=1 / 16,
            heldout_exact_match=0.0,
        ),
        RunPoint(
            step=middle,
            train_loss=(CHANCE_LOSS + loss) / 2,
            grad_norm=1.0,
            heldout_loss=(CHANCE_LOSS + loss) / 2,
            heldout_accuracy=(1 / 16 + accuracy) / 2,
            heldout_exact_match=0.0,
        ),
        RunPoint(
            step=config.steps,
            train_loss=loss,
            grad_norm=0.5,
            heldout_loss=loss,
            heldout_accuracy=accuracy,
            heldout_exact_match=accuracy**16,
        ),
    ]
    norms = [BlockGradNorms(step=s, norms=[0.1] * config.depth) for s in (1, config.steps)]
    return Run(
        config=settings_at(config, layernorm=layernorm, residual=residual, seed=seed),
        curve=curve,
        block_grad_norms=norms,
        final=RunFinal(
            step=config.steps,
            heldout_loss=loss,
            heldout_accuracy=accuracy,
            heldout_exact_match=accuracy**16,
            first_step_at_full_accuracy=config.steps if accuracy == 1 else None,
        ),
        wall_s=1.0,
    )


def sample_recording(
    finals: Mapping[RowKey, tuple[float, float]] | None = None,
    *,
    seeds: Sequence[int] = (0,),
    rows: Sequence[RowKey] = ROW_KEYS,
    config: RunConfig | None = None,
) -> Runs:
    """A valid recording with `rows` at every seed, ending at `finals` (default: shaped
    like the real thing). The first seed is the page's."""
    chosen = config or RunConfig()
    ends = {**SAMPLE_FINALS, **(finals or {})}
    plan = AblationPlan(
        kind="ablation",
        base=chosen,
        first={"seed": seeds[0]},
        rows=[key for key in ROW_KEYS if key in rows] or list(ROW_KEYS),
        seeds=list(seeds),
    )
    return runs_file(
        LESSON,
        plan,
        [SAMPLE_PROVENANCE],
        [
            sample_row(key, seed, accuracy=ends[key][0], loss=ends[key][1], config=chosen)
            for seed in seeds
            for key in rows
        ],
    )
