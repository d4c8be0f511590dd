"""A made-up lab grid for the page's tests: a tiny base configuration (a browser trains it in
a second or two, so a browser test trains one end to end through the real worker), every
offered cell at seed 0 but one, and curves shaped like the recorder's. Its numbers are made
up; its provenance (the sample recording's) says so. Nothing ships it."""

from __future__ import annotations

from pathlib import Path

from lesson_answers import LESSON
from normdive.lab.config import LAB_DEPTH, LAB_EPS, LAB_INIT, LabBase, LabConfig
from normdive.recording.lab_grid import lab_path_for
from normdive.recording.runs import LESSON as LESSON_NAME
from normdive.recording.runs import (
    LabOffered,
    LabPlan,
    Run,
    RunFinal,
    RunPoint,
    Runs,
    runs_file,
)
from sample_recordings import SAMPLE_PROVENANCE

# Small enough to train in the browser test in a few seconds on a loaded machine.
TINY_BASE = LabBase(
    copy_length=3,
    vocab_size=4,
    d_model=8,
    n_heads=2,
    mlp_ratio=2,
    steps=40,
    batch_size=4,
    learning_rate=3e-3,
    warmup_steps=4,
    eval_every=10,
    heldout_size=16,
)
# The one offered point at seed 0 the sample leaves unrecorded (depth 4, neither, PyTorch's).
UNRECORDED = (4, False, False, None, "pytorch", 0)
TRIMMED = "seeds 1 and 2 at every point"


def _accuracy(depth: int, layernorm: bool, residual: bool) -> float:
    if residual:
        return 1.0 if layernorm else 0.95
    return 0.25 if depth > 2 else 0.6


def sample_lab_grid(base: LabBase = TINY_BASE, *, with_rerun: bool = False) -> Runs:
    """The grid; `with_rerun`: with the four cells the lesson's re-run of the ablation draws
    over too (lesson.rerun.config's depth, eps, init and seed)."""
    depths = [1, 2, 3, 4]
    rerun = LESSON.rerun.config
    if with_rerun:
        depths.append(rerun.depth)
    offered = LabOffered(
        depths=depths, eps=[0.0, 1e-5, 1.0], inits=["gpt2", "pytorch"], seeds=[0, 1, 2]
    )
    rerun_points = {
        (
            rerun.depth,
            layernorm,
            residual,
            float(rerun.eps) if layernorm else None,
            rerun.init,
            rerun.seed,
        )
        for layernorm in (True, False)
        for residual in (True, False)
    }
    plan = LabPlan(
        kind="lab_grid",
        base=LabConfig.at(base).run_config(),
        first={
            "depth": LAB_DEPTH,
            "init": LAB_INIT,
            "layernorm": True,
            "residual": True,
            "eps": LAB_EPS,
            "seed": 0,
        },
        trimmed=TRIMMED,
        **offered.model_dump(),
    )
    cells = []
    for settings in plan.planned():
        depth, layernorm, residual = settings.depth, settings.layernorm, settings.residual
        point = (depth, layernorm, residual, settings.eps, settings.init, settings.seed)
        if settings.seed != 0 or point == UNRECORDED:
            continue
        if depth > 4 and point not in rerun_points:
            continue
        end = _accuracy(depth, layernorm, residual)
        steps = list(range(0, base.steps + 1, base.eval_every))
        curve = [
            RunPoint(
                step=step,
                train_loss=None if step == 0 else 1.4 - step / base.steps,
                heldout_loss=1.4 - step / base.steps,
                heldout_accuracy=0.25 + (end - 0.25) * step / base.steps,
            )
            for step in steps
        ]
        final = RunFinal(step=base.steps, heldout_loss=curve[-1].heldout_loss, heldout_accuracy=end)
        cells.append(Run(config=settings, curve=curve, final=final, wall_s=1.0))
    return runs_file(LESSON_NAME, plan, [SAMPLE_PROVENANCE], cells)


def write_lab_grid(recording_path: Path, grid: Runs | None = None) -> Path:
    """The grid as the file the page reads, beside the recording, as record-runs writes it."""
    path = lab_path_for(recording_path)
    path.write_text((grid or sample_lab_grid()).model_dump_json(), encoding="utf-8")
    return path
