"""Recording the depth sweep: the plan's runs (or one shard's), trained as record-runs trains
the ablation's rows (worker processes on the CPU, one after another on CUDA), each kept beside
the output as it finishes, and the sweep written in one atomic step.

Resuming: kept runs are reused when the shared settings and the device are the same, whatever
the plan; so a sweep run again with more depths or seeds trains only the new runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console

from normdive.recording.files import UnfaithfulWrite, write_validated
from normdive.recording.format import RunConfig
from normdive.recording.sweep import (
    SWEEP_FORMAT_VERSION,
    SWEEP_KIND,
    RunKey,
    ShardPart,
    Sweep,
    SweepPlan,
    SweepRun,
    canonical_order,
    relative_cost,
    run_config,
)
from normdive.training.provenance import provenance
from normdive.training.runner import (
    LESSON,
    THREADS_PER_JOB,
    Job,
    PartialRows,
    RecordError,
    train_missing,
)


def sweep_fingerprint(config: RunConfig, device: str) -> dict[str, Any]:
    """What kept runs must share with this sweep to be reused (the plan may differ)."""
    return {
        "kind": SWEEP_KIND,
        "format_version": SWEEP_FORMAT_VERSION,
        "config": config.model_dump(mode="json"),
        "device": device,
    }


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
    *,
    shard: ShardPart | None,
    device: str,
    jobs: int,
    out: Path,
    command: str,
    fresh: bool,
    console: Console,
) -> Sweep:
    """Train the runs of `plan` (or of its `shard`) not kept yet, then write the sweep to
    `out`. Raises KeyboardInterrupt (finished runs stay kept) or RecordError."""
    started = time.perf_counter()
    out.parent.mkdir(parents=True, exist_ok=True)
    runs = plan.runs() if shard is None else plan.shard(shard.index, shard.count)
    every = sweep_jobs(config, runs)
    partial = PartialRows(out, sweep_fingerprint(config, device), fresh=fresh)
    kept = {job.name: row for job in every if (row := partial.load(job)) is not None}
    todo = [job for job in every if job.name not in kept]
    if kept:
        console.print(
            f"Resuming: {len(kept)} finished run(s) kept in {partial.dir}; {len(todo)} to train."
        )
    found = train_missing(
        todo,
        kept,
        device=device,
        jobs=jobs,
        partial=partial,
        console=console,
        steps=config.steps,
        every=every,
    )
    sweep = Sweep(
        format_version=SWEEP_FORMAT_VERSION,
        kind="depth_sweep",
        lesson=LESSON,
        provenance=[
            provenance(
                command=command,
                device=device,
                jobs=jobs,
                threads_per_job=THREADS_PER_JOB,
                wall_s=time.perf_counter() - started,
                rows_resumed=len(kept),
            )
        ],
        config=config,
        plan=plan,
        shard=shard,
        runs=canonical_order(
            SweepRun(depth=run.depth, init=run.init, row=found[run.name]) for run in runs
        ),
    )
    # Compact: the default sweep is about 0.7 MB so, against 0.9 MB with one-space indents.
    try:
        write_validated(out, sweep, indent=None)
    except UnfaithfulWrite as error:
        raise RecordError(str(error)) from None
    partial.remove()
    return sweep
