"""Recording the lab grid (`record-runs --lab`): every offered cell trained as record-runs
trains the ablation's rows (single-thread worker processes on the CPU, each cell kept beside
the output as it finishes, an interrupted run resumed), then the grid written in one atomic
step. Torch-free until a worker trains: the parent only plans, shows progress and writes.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from normdive.lab.config import LAB_DEPTH, LAB_EPS, LAB_INIT, OFFERED_SEEDS, LabBase, LabConfig
from normdive.recording.format import ROW_SWITCHES, Provenance, RowKey
from normdive.recording.runs import (
    LESSON,
    LabOffered,
    LabPlan,
    Run,
    Runs,
    RunSettings,
    ShardPart,
    runs_file,
)
from normdive.training.progress import Planned, RunProgress
from normdive.training.runner import (
    PartialRows,
    Recorder,
    fingerprint,
    record_kept,
    run_processes,
    serve_tasks,
)

CELL = "cell"  # one job of the lab grid, on the console
LAB_DEVICE = "cpu"  # the lab's cells are small: they train in worker processes on the CPU
# A cell's cost relative to the others (for the estimate of the time left): its depth plus
# the fixed part every step pays (embeddings, head, the optimiser, Python's overhead), which
# at width 32 weighs about as much as two blocks.
FIXED_COST_IN_BLOCKS = 2.0


@dataclass(frozen=True)
class LabJob:
    """One cell to train; under `name` it is kept beside the output."""

    config: LabConfig
    seed: int

    @property
    def key(self) -> str:
        return self.name

    @property
    def name(self) -> str:
        return self._said(("d{}", "ln-eps{:g}", "noln", "res", "nores", "seed{}"), "-")

    @property
    def label(self) -> str:
        return self._said(("depth {}", "LN eps {:g}", "no LN", "res", "no res", "seed {}"), " ")

    def _said(self, words: tuple[str, str, str, str, str, str], between: str) -> str:
        """The cell in `words`: its depth, eps (or no layer norm), residual (or none) and
        seed, each filled into its template, and its init, joined by `between`."""
        depth, eps, no_norm, residual, no_residual, seed = words
        c = self.config
        return between.join(
            (
                depth.format(c.depth),
                c.init,
                eps.format(c.eps) if c.eps is not None else no_norm,
                residual if c.residual else no_residual,
                seed.format(self.seed),
            )
        )

    @property
    def settings(self) -> RunSettings:
        return self.config.settings(self.seed)

    @property
    def planned(self) -> Planned:
        return Planned(self.name, self.label, self.config.depth + FIXED_COST_IN_BLOCKS)


@dataclass(frozen=True)
class LabCells:
    """The cells to record: the offered grid's `rows`, less the seeds left out of the extra
    eps values."""

    offered: LabOffered
    rows: tuple[RowKey, ...]
    # The seeds at which the offered eps values other than LAB_EPS are recorded; None: all.
    extra_eps_seeds: tuple[int, ...] | None = None

    def plan(self, base: LabBase, shard: ShardPart | None = None) -> LabPlan:
        """The file's plan: the offered grid at `base`, the page's default cell first (at the
        first seed), what is left out in a sentence, and the `shard` the file holds."""
        return LabPlan(
            kind="lab_grid",
            base=LabConfig.at(base).run_config(),
            first={
                "depth": LAB_DEPTH,
                "init": LAB_INIT,
                "layernorm": True,
                "residual": True,
                "eps": LAB_EPS,
                "seed": self.offered.seeds[0],
            },
            trimmed=self.trimmed(),
            shard=shard,
            **self.offered.model_dump(),
        )

    def points(self, base: LabBase, shard: ShardPart | None = None) -> list[RunSettings]:
        """The cells to record (of `shard`: every count-th offered point from the index-th
        on), most wanted first: every cell of the first seed, then the other seeds at eps
        LAB_EPS (and without layer norm), then their other eps values. A run stopped part-way
        has what the page needs most, and a rerun with fewer --lab-eps-seeds keeps it all."""
        wanted = {ROW_SWITCHES[key] for key in self.rows}
        chosen = [
            p
            for p in self.plan(base, shard).sharded()
            if (p.layernorm, p.residual) in wanted
            and (
                self.extra_eps_seeds is None
                or p.eps in (None, LAB_EPS)
                or p.seed in self.extra_eps_seeds
            )
        ]
        first = self.offered.seeds[0]
        return sorted(chosen, key=lambda p: p.seed != first and p.eps not in (None, LAB_EPS))

    def trimmed(self) -> str | None:
        """The sentence the page shows when part of what it offers is not recorded."""
        parts = []
        extra = [e for e in self.offered.eps if e != LAB_EPS]
        if (
            self.extra_eps_seeds is not None
            and extra
            and self.offered.seeds != list(self.extra_eps_seeds)
        ):
            seeds = [s for s in self.offered.seeds if s in self.extra_eps_seeds]
            where = (
                f"seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} only"
                if seeds
                else "no seed"
            )
            parts.append(
                f"with layer norm, eps {' and '.join(f'{e:g}' for e in extra)} recorded at "
                f"{where} (eps {LAB_EPS:g} at every seed)"
            )
        narrow = self.offered.depth_eps_trimmed()
        if narrow:
            parts.append(narrow[:1].lower() + narrow[1:].rstrip("."))
        left_out = [seed for seed in OFFERED_SEEDS if seed not in self.offered.seeds]
        if left_out:
            parts.append(
                f"seed{'s' if len(left_out) > 1 else ''} {', '.join(map(str, left_out))} of "
                f"{', '.join(map(str, OFFERED_SEEDS))} not recorded"
            )
        missing_rows = [key for key in ROW_SWITCHES if key not in self.rows]
        if missing_rows:
            parts.append(f"rows not recorded: {', '.join(missing_rows)}")
        said = "; ".join(parts)
        # The first letter raised, the rest as written (str.capitalize would lower "GPT-2").
        return said[:1].upper() + said[1:] + "." if parts else None


def lab_jobs(base: LabBase, points: Sequence[RunSettings]) -> list[LabJob]:
    return [
        LabJob(
            LabConfig.at(
                base,
                depth=p.depth,
                layernorm=p.layernorm,
                residual=p.residual,
                eps=p.eps,
                init=p.init,
            ),
            p.seed,
        )
        for p in points
    ]


def _load(partial: PartialRows, job: LabJob) -> Run | None:
    """The kept cell, or None when absent, unreadable or not the job's (trained again)."""
    return partial.kept(job.name, job.settings)


def lab_worker(
    device: str, partial: str, tasks: Any, events: Any
) -> None:  # pragma: no cover  (runs in a spawned process; the CLI tests drive it)
    """runner._worker's twin for lab cells: the same loop, queues and events."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from normdive.training.lab import train_lab_cell  # torch: only here; it pins the thread

    def train(config_json: str, _key: Any, seed: int, report: Callable[[Any], None]) -> Run:
        return train_lab_cell(LabConfig.model_validate_json(config_json), seed, report=report)

    serve_tasks(partial, tasks, events, train)


def record_lab(
    base: LabBase, cells: LabCells, how: Recorder, *, shard: ShardPart | None = None
) -> Runs:
    """Train the cells not kept yet (CPU worker processes), then write the grid to `how.out`
    (on LAB_DEVICE). Raises KeyboardInterrupt (finished cells stay kept) or RecordError."""
    plan = cells.plan(base, shard)

    def train(todo: list[LabJob], partial: PartialRows, bars: RunProgress) -> None:
        run_processes(todo, how.jobs, partial, bars, target=lab_worker)

    def grid(found: dict[str, Run], made_by: Provenance) -> Runs:
        return runs_file(LESSON, plan, [made_by], list(found.values()))

    return record_kept(
        lab_jobs(base, cells.points(base, shard)),
        how,
        noun=CELL,
        fingerprint=fingerprint(base, how.device, "lab_grid"),
        load=_load,
        train=train,
        steps=base.steps,
        document=grid,
    )


def lab_summary(grid: Runs) -> list[str]:
    """Final held-out accuracy per depth and row at eps LAB_EPS, averaged over the seeds."""
    plan = grid.plan_as(LabPlan)
    lines = []
    for init in plan.inits:
        lines.append(f"init {init}: final held-out accuracy (mean over seeds), eps {LAB_EPS:g}")
        for depth in plan.depths:
            parts = []
            for key, (ln, res) in ROW_SWITCHES.items():
                at = {"depth": depth, "init": init, "eps": LAB_EPS if ln else None}
                found = [
                    float(run.final.heldout_accuracy)
                    for run in grid.select(layernorm=ln, residual=res, **at)
                ]
                if found:
                    parts.append(f"{key} {100 * sum(found) / len(found):.1f}%")
            lines.append(f"  depth {depth}: " + ", ".join(parts))
    return lines


__all__ = ["LabCells", "LabJob", "lab_summary", "record_lab"]
