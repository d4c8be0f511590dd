"""Recording the depth sweep; kept runs are reused whatever the plan, so new depths train alone."""

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

RUN = "run"


def sweep_jobs(plan: SweepPlan) -> list[Job]:
    return [sweep_job(settings) for settings in plan.sharded()]


def sweep_job(settings: RunSettings) -> Job:
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
    """Train the runs not kept yet and write the sweep; raises as runner.record_kept does."""
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
