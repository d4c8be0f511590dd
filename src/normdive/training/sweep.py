"""Recording the depth sweep: the plan's runs (or one shard's), trained as record-runs trains
the ablation's rows (worker processes on the CPU, one after another on CUDA), each kept beside
the output as it finishes, and the sweep written in one atomic step.

Resuming: kept runs are reused when the shared settings and the device are the same, whatever
the plan; so a sweep run again with more depths or seeds trains only the new runs.
"""

from __future__ import annotations

from normdive.recording.format import Provenance, Row, RunConfig
from normdive.recording.plans import sweep_runs
from normdive.recording.runs import LESSON
from normdive.recording.sweep import (
    SWEEP_FORMAT_VERSION,
    RunKey,
    ShardPart,
    Sweep,
    SweepPlan,
    SweepRun,
    canonical_order,
    relative_cost,
    run_config,
)
from normdive.training.runner import (
    Job,
    PartialRows,
    Recorder,
    fingerprint,
    record_kept,
    train_rows,
)

RUN = "run"  # one job of the sweep, on the console


def sweep_jobs(config: RunConfig, runs: list[RunKey]) -> list[Job]:
    return [
        Job(
            name=run.name,
            label=run.label,
            config=run_config(config, run.depth, run.init),
            key=run.key,
            seed=run.seed,
            cost=relative_cost(run.depth),
        )
        for run in runs
    ]


def record_sweep(
    config: RunConfig,
    plan: SweepPlan,
    how: Recorder,
    *,
    shard: ShardPart | None,
) -> Sweep:
    """Train the runs of `plan` (or of its `shard`) not kept yet, then write the sweep to
    `out`. Raises KeyboardInterrupt (finished runs stay kept) or RecordError."""
    runs = plan.runs() if shard is None else plan.shard_runs(shard.index, shard.count)

    def sweep(found: dict[str, Row], made_by: Provenance) -> Sweep:
        return Sweep(
            format_version=SWEEP_FORMAT_VERSION,
            kind="depth_sweep",
            lesson=LESSON,
            provenance=[made_by],
            config=config,
            plan=plan,
            shard=shard,
            runs=canonical_order(
                SweepRun(depth=run.depth, init=run.init, row=found[run.name]) for run in runs
            ),
        )

    return record_kept(
        sweep_jobs(config, runs),
        how,
        noun=RUN,
        fingerprint=fingerprint(config, how.device, "sweep"),
        load=PartialRows.load,
        train=train_rows(how.device, how.jobs),
        steps=config.steps,
        document=sweep,
        as_runs=sweep_runs,
    )
