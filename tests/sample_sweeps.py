"""Small hand-made depth sweeps, for the tests that need a sweep without training one.

Their numbers are made up (shaped like the issue's depth table, or moved on purpose); their
provenance says so. Nothing ships them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from normdive.recording.format import (
    ROW_SWITCHES,
    BlockGradNorms,
    InitScheme,
    RowKey,
    RunConfig,
)
from normdive.recording.runs import (
    LESSON,
    Run,
    RunFinal,
    RunPoint,
    Runs,
    SweepPlan,
    runs_file,
    settings_at,
)
from normdive.recording.sweep import default_plan
from sample_recordings import CHANCE_LOSS, SAMPLE_PROVENANCE

CHANCE = 1 / 16
# Final accuracy by (depth, init, row), shaped like the table at gpt2: layer norm
# alone recovers more at depths 2 and 4, the residual path alone at 8 and 16; with pytorch's
# init the residual path alone learns the copy at every depth.
FLIP_AT_8: dict[tuple[int, InitScheme], dict[RowKey, float]] = {
    (2, "gpt2"): {"both": 1.0, "residual_only": 0.10, "layernorm_only": 1.0, "neither": CHANCE},
    (4, "gpt2"): {"both": 1.0, "residual_only": 0.186, "layernorm_only": 0.879, "neither": CHANCE},
    (8, "gpt2"): {"both": 1.0, "residual_only": 0.206, "layernorm_only": CHANCE, "neither": CHANCE},
    (16, "gpt2"): {"both": 1.0, "residual_only": 0.25, "layernorm_only": CHANCE, "neither": CHANCE},
    **{
        (depth, "pytorch"): {
            "both": 1.0,
            "residual_only": 1.0,
            "layernorm_only": 0.5 if depth <= 4 else CHANCE,
            "neither": CHANCE,
        }
        for depth in (2, 4, 8, 16)
    },
}
# The same, but the answer at gpt2 flips between depth 2 and 4 instead.
FLIP_AT_4: dict[tuple[int, InitScheme], dict[RowKey, float]] = {
    **FLIP_AT_8,
    (4, "gpt2"): {"both": 1.0, "residual_only": 0.3, "layernorm_only": 0.12, "neither": CHANCE},
}

Finals = Mapping[tuple[int, InitScheme], Mapping[RowKey, float]]


def sweep_row(
    key: RowKey,
    seed: int,
    depth: int,
    init: InitScheme,
    accuracy: float,
    config: RunConfig,
    *,
    points: int = 3,
) -> Run:
    """A row's run at `depth` and `init` whose curve goes from chance to `accuracy` in `points`
    evaluations, with a gradient norm per block at `config.grad_norm_points` updates."""
    layernorm, residual = ROW_SWITCHES[key]
    loss = CHANCE_LOSS * (1 - accuracy) + 0.003
    steps = [round(i * config.steps / (points - 1)) for i in range(points)]
    curve = []
    for index, step in enumerate(steps):
        share = index / (points - 1)
        # full float64 figures between the ends, as training writes them, so the size test is
        # honest; the ends exact
        wobble = share * (1 - share)
        here_acc = CHANCE + (accuracy - CHANCE) * share + math.pi * 1e-9 * wobble
        here_loss = CHANCE_LOSS + (loss - CHANCE_LOSS) * share + math.e * 1e-9 * wobble
        curve.append(
            RunPoint(
                step=step,
                train_loss=None if step == 0 else here_loss * 1.0000001,
                grad_norm=None if step == 0 else 0.123456789012345 + share,
                heldout_loss=here_loss,
                heldout_accuracy=here_acc if step else CHANCE,
                heldout_exact_match=here_acc**16,
            )
        )
    last = curve[-1]
    grad_steps = sorted(
        {
            round(config.steps ** (i / (config.grad_norm_points - 1)))
            for i in range(config.grad_norm_points)
        }
        | {1, config.steps}
    )
    norms = [
        BlockGradNorms(step=s, norms=[0.0123456789012345 * (b + 1) for b in range(depth)])
        for s in grad_steps
    ]
    return Run(
        config=settings_at(
            config, layernorm=layernorm, residual=residual, seed=seed, depth=depth, init=init
        ),
        curve=curve,
        block_grad_norms=norms,
        final=RunFinal(
            step=last.step,
            heldout_loss=last.heldout_loss,
            heldout_accuracy=accuracy,
            heldout_exact_match=accuracy**16,
            first_step_at_full_accuracy=config.steps if accuracy == 1 else None,
        ),
        wall_s=1.0,
    )


def sample_sweep(
    finals: Finals = FLIP_AT_8,
    *,
    plan: SweepPlan | None = None,
    config: RunConfig | None = None,
    points: int = 3,
    seed_noise: Callable[[int, RowKey], float] = lambda seed, key: 0.0,
) -> Runs:
    """A valid, whole sweep of `plan` (default: the default plan) at `config` (default: the
    plan's base) ending at `finals`, the same at every seed plus `seed_noise(seed, row)` on the
    single-component rows (kept in 0..1)."""
    chosen_plan = plan or default_plan()
    if config is not None:
        chosen_plan = chosen_plan.model_copy(update={"base": config})
    runs = []
    for settings in chosen_plan.planned():
        key = settings.row_key
        accuracy = finals[(settings.depth, settings.init)][key]
        if key in ("residual_only", "layernorm_only"):
            accuracy = min(1.0, max(0.0, accuracy + seed_noise(settings.seed, key)))
        runs.append(
            sweep_row(
                key,
                settings.seed,
                settings.depth,
                settings.init,
                accuracy,
                chosen_plan.base,
                points=points,
            )
        )
    return runs_file(LESSON, chosen_plan, [SAMPLE_PROVENANCE], chosen_plan.file_order(runs))
