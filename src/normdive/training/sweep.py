"""Recording the depth sweep: the plan's runs (or one shard's), trained as record-runs trains
the ablation's rows (worker processes on the CPU, one after another on CUDA), each kept beside
the output as it finishes, and the sweep written in one atomic step.

Resuming: kept runs are reused when the shared settings and the device are the same, whatever
the plan; so a sweep run again with more depths or seeds trains only the new runs.
"""

from __future__ import annotations

from normdive.recording.format import Provenance
from normdive.recording.runs import LESSON, Run, Runs, RunSettings, SweepPlan, runs_file
from normdive.recording.sweep import relative_cost
from normdive.training.runner import (
    Job,
    PartialRows,
    Recorder,
    fingerprint,
    record_kept,
    train_rows,
)

RUN = "run"  # one job of the sweep, on the console


def sweep_jobs(plan: SweepPlan) -> list[Job]:
    """The jobs that train the runs of `plan` (or of its shard), in its training order."""
    return [sweep_job(settings) for settings in plan.sharded()]


def sweep_job(settings: RunSettings) -> Job:
    """The job that trains the sweep's run at `settings`, kept under a name of its own."""
    config, key, seed = settings, settings.row_key, settings.seed
    return Job(
        name=f"depth{config.depth}-{config.init}-{key}-seed{seed}",
        label=f"depth {config.depth} {config.init} {key} seed {seed}",
        config=config.run_config(),
        key=key,
        seed=seed,
        cost=relative_cost(config.depth),
    )


def record_sweep(plan: SweepPlan, how: Recorder) -> Runs:
    """Train the runs of `plan` (or of its shard) not kept yet, then write the sweep to
    `how.out`. Raises KeyboardInterrupt (finished runs stay kept) or RecordError."""
    jobs = sweep_jobs(plan)

    def sweep(found: dict[str, Run], made_by: Provenance) -> Runs:
        return runs_file(LESSON, plan, [made_by], plan.file_order(found[job.name] for job in jobs))

    return record_kept(
        jobs,
        how,
        noun=RUN,
        fingerprint=fingerprint(plan.base, how.device, "sweep"),
        load=PartialRows.load,
        train=train_rows(how.device, how.jobs),
        steps=plan.base.steps,
        document=sweep,
    )
