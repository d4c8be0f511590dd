"""The ablation and the depth sweep as plans of the one format (recording/runs.py), and back.

The player and the sweep panel read a `Recording` and a `Sweep` (recording/format.py,
recording/sweep.py): the same runs, arranged as each draws them. `ablation_view` and
`sweep_view` make those from a `Runs` file of their plan; `ablation_runs` and `sweep_runs` make
the file from them (what `record-runs` writes, and how a file of format_version 1 is read).
A round trip gives back an equal document, so the page draws the same numbers either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from normdive.recording.format import (
    FORMAT_VERSION,
    ROW_SWITCHES,
    CurvePoint,
    FinalFigures,
    Recording,
    Row,
    RowKey,
    RunConfig,
)
from normdive.recording.runs import (
    AblationPlan,
    Run,
    RunFinal,
    RunPoint,
    Runs,
    SweepPlan,
    runs_file,
    settings_at,
)
from normdive.recording.sweep import (
    SWEEP_FORMAT_VERSION,
    SWEEP_KIND,
    Sweep,
    SweepRun,
)
from normdive.recording.sweep import (
    SweepPlan as SweepAxes,
)


def row_run(row: Row, base: RunConfig, **axes: object) -> Run:
    """An ablation row as a run: `base` at the row's switches and seed and at `axes`."""
    return Run(
        config=settings_at(
            base, layernorm=row.layernorm, residual=row.residual, seed=row.seed, **axes
        ),
        curve=[RunPoint.model_validate(point.model_dump()) for point in row.curve],
        block_grad_norms=row.block_grad_norms,
        final=RunFinal.model_validate(row.final.model_dump()),
        wall_s=row.wall_s,
    )


def run_row(run: Run) -> Row:
    """A run as an ablation row (it must carry what a row records: the exact match, the
    gradient norms)."""
    config = run.config
    return Row(
        key=config.row_key,
        seed=config.seed,
        layernorm=config.layernorm,
        residual=config.residual,
        curve=[
            CurvePoint.model_validate(point.model_dump(include=set(CurvePoint.model_fields)))
            for point in run.curve
        ],
        block_grad_norms=run.block_grad_norms or [],
        final=FinalFigures.model_validate(
            run.final.model_dump(include=set(FinalFigures.model_fields))
        ),
        wall_s=run.wall_s,
    )


def ablation_runs(recording: Recording, rows: Sequence[RowKey] | None = None) -> Runs:
    """The recording as a file of runs of the ablation plan: `rows` at each of its seeds
    (default: the rows it holds)."""
    present = set(rows) if rows is not None else {row.key for row in recording.rows}
    return runs_file(
        recording.lesson,
        AblationPlan(
            kind="ablation",
            base=recording.config,
            first={"seed": recording.page_seed},
            rows=[key for key in ROW_SWITCHES if key in present] or list(ROW_SWITCHES),
            seeds=recording.seeds,
        ),
        [recording.provenance],
        [row_run(row, recording.config) for row in recording.rows],
    )


def ablation_view(runs: Runs) -> Recording:
    """A file of the ablation plan as the recording the player plays."""
    plan = runs.plan_as(AblationPlan)
    page_seed = plan.first.get("seed", plan.seeds[0])
    return Recording(
        format_version=FORMAT_VERSION,
        lesson=runs.lesson,
        provenance=runs.provenance[0],
        config=plan.base,
        seeds=plan.seeds,
        page_seed=page_seed if isinstance(page_seed, int) else plan.seeds[0],
        rows=[run_row(run) for run in runs.runs],
    )


def sweep_trimmed(axes: SweepAxes) -> str | None:
    """The depths trained at fewer seeds than the widest, in a sentence; None: none were."""
    widest = max(len(entry.seeds) for entry in axes.depths)
    fewer = [entry for entry in axes.depths if len(entry.seeds) < widest]
    if not fewer:
        return None
    return (
        "; ".join(
            f"depth {entry.depth} trained seed(s) {', '.join(map(str, entry.seeds))} only"
            for entry in fewer
        )
        + " (the sweep's time budget)."
    )


def sweep_runs(sweep: Sweep) -> Runs:
    """The depth sweep as a file of runs of the sweep plan."""
    return runs_file(
        sweep.lesson,
        SweepPlan(
            kind="sweep",
            base=sweep.config,
            first={"seed": sweep.plan.depths[0].seeds[0]},
            trimmed=sweep_trimmed(sweep.plan),
            shard=sweep.shard,
            **sweep.plan.model_dump(),
        ),
        sweep.provenance,
        [row_run(run.row, sweep.config, depth=run.depth, init=run.init) for run in sweep.runs],
    )


def sweep_view(runs: Runs) -> Sweep:
    """A file of the sweep plan as the depth sweep the panel draws."""
    plan = runs.plan_as(SweepPlan)
    return Sweep(
        format_version=SWEEP_FORMAT_VERSION,
        kind=SWEEP_KIND,
        lesson=runs.lesson,
        provenance=runs.provenance,
        config=plan.base,
        plan=SweepAxes.model_validate(plan.model_dump(include=set(SweepAxes.model_fields))),
        shard=plan.shard,
        runs=[
            SweepRun(depth=run.config.depth, init=run.config.init, row=run_row(run))
            for run in runs.runs
        ],
    )


def legacy_ablation(data: dict[str, Any]) -> Runs:
    """A recording of format_version 1 (the ablation's own format) as runs."""
    return ablation_runs(Recording.model_validate(data))


def legacy_sweep(data: dict[str, Any]) -> Runs:
    """A depth sweep of format_version 1 (the sweep's own format) as runs."""
    return sweep_runs(Sweep.model_validate(data))
