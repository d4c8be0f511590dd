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

from normdive.lab.grid import (
    LAB_EPS,
    LAB_FORMAT_VERSION,
    OFFERED_SEEDS,
    LabBase,
    LabCell,
    LabConfig,
    LabGrid,
    lab_grid_runs,
    offered_points,
)
from normdive.recording.format import ROW_SWITCHES, InitScheme, Provenance, RowKey
from normdive.recording.runs import LabOffered
from normdive.recording.sweep import ShardPart
from normdive.training.progress import Planned, RunProgress
from normdive.training.runner import (
    PartialRows,
    Recorder,
    fingerprint,
    record_kept,
    run_processes,
    serve_tasks,
)

LAB_KIND = "lab_grid"
CELL = "cell"  # one job of the lab grid, on the console
LAB_DEVICE = "cpu"  # the lab's cells are small: they train in worker processes on the CPU
# A cell's cost relative to the others (for the estimate of the time left): its depth plus
# the fixed part every step pays (embeddings, head, the optimiser, Python's overhead), which
# at width 32 weighs about as much as two blocks.
FIXED_COST_IN_BLOCKS = 2.0

Point = tuple[int, bool, bool, float | None, InitScheme, int]


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
    def point(self) -> Point:
        c = self.config
        return (c.depth, c.layernorm, c.residual, c.eps, c.init, self.seed)

    @property
    def planned(self) -> Planned:
        return Planned(self.name, self.label, self.config.depth + FIXED_COST_IN_BLOCKS)


@dataclass(frozen=True)
class LabPlan:
    """What to record: the offered grid, less the seeds left out of the extra eps values."""

    offered: LabOffered
    rows: tuple[RowKey, ...]
    # The seeds at which the offered eps values other than LAB_EPS are recorded; None: all.
    extra_eps_seeds: tuple[int, ...] | None = None

    def points(self, shard: ShardPart | None = None) -> list[Point]:
        """The cells to record (of `shard`: every count-th offered point from the index-th
        on), most wanted first: every cell of the first seed, then the other seeds at eps
        LAB_EPS (and without layer norm), then their other eps values. A run stopped part-way
        has what the page needs most, and a rerun with fewer --lab-eps-seeds keeps it all."""
        wanted = {ROW_SWITCHES[key] for key in self.rows}
        offered = offered_points(self.offered)
        if shard is not None:
            offered = offered[shard.index - 1 :: shard.count]
        chosen = [
            p
            for p in offered
            if (p[1], p[2]) in wanted
            and (
                self.extra_eps_seeds is None
                or p[3] in (None, LAB_EPS)
                or p[5] in self.extra_eps_seeds
            )
        ]
        first = self.offered.seeds[0]
        return sorted(chosen, key=lambda p: p[5] != first and p[3] not in (None, LAB_EPS))

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


def lab_jobs(base: LabBase, points: Sequence[Point]) -> list[LabJob]:
    return [
        LabJob(LabConfig.at(base, depth=d, layernorm=ln, residual=res, eps=eps, init=init), seed)
        for d, ln, res, eps, init, seed in points
    ]


def _load(partial: PartialRows, job: LabJob) -> LabCell | None:
    """The kept cell, or None when absent, unreadable or not the job's (trained again)."""
    try:
        cell = LabCell.model_validate_json((partial.dir / f"{job.name}.json").read_bytes())
    except (OSError, ValueError):
        return None
    return cell if cell.point == job.point else None


def lab_worker(
    device: str, partial: str, tasks: Any, events: Any
) -> None:  # pragma: no cover  (runs in a spawned process; the CLI tests drive it)
    """runner._worker's twin for lab cells: the same loop, queues and events."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from normdive.training.lab import train_lab_cell  # torch: only here; it pins the thread

    def train(config_json: str, _key: Any, seed: int, report: Callable[[Any], None]) -> LabCell:
        return train_lab_cell(LabConfig.model_validate_json(config_json), seed, report=report)

    serve_tasks(partial, tasks, events, train)


def record_lab(
    base: LabBase, plan: LabPlan, how: Recorder, *, shard: ShardPart | None = None
) -> LabGrid:
    """Train the plan's cells not kept yet (CPU worker processes), then write the grid to
    `how.out` (on LAB_DEVICE). Raises KeyboardInterrupt (finished cells stay kept) or
    RecordError."""

    def train(todo: list[LabJob], partial: PartialRows, bars: RunProgress) -> None:
        run_processes(todo, how.jobs, partial, bars, target=lab_worker)

    def grid(found: dict[str, LabCell], made_by: Provenance) -> LabGrid:
        return LabGrid(
            format_version=LAB_FORMAT_VERSION,
            base=base,
            offered=plan.offered,
            trimmed=plan.trimmed(),
            cells=list(found.values()),
            provenance=made_by,
        )

    return record_kept(
        lab_jobs(base, plan.points(shard)),
        how,
        noun=CELL,
        fingerprint=fingerprint(base, how.device, "lab_grid"),
        load=_load,
        train=train,
        steps=base.steps,
        document=grid,
        as_runs=lambda grid: lab_grid_runs(grid).shard_of(shard),
    )


def lab_summary(grid: LabGrid) -> list[str]:
    """Final held-out accuracy per depth and row at eps LAB_EPS, averaged over the seeds."""
    lines = []
    for init in grid.offered.inits:
        lines.append(f"init {init}: final held-out accuracy (mean over seeds), eps {LAB_EPS:g}")
        for depth in grid.offered.depths:
            parts = []
            for key, (ln, res) in ROW_SWITCHES.items():
                found = [
                    float(c.final.heldout_accuracy)
                    for c in grid.cells
                    if (c.depth, c.layernorm, c.residual, c.init) == (depth, ln, res, init)
                    and c.eps in (None, LAB_EPS)
                ]
                if found:
                    parts.append(f"{key} {100 * sum(found) / len(found):.1f}%")
            lines.append(f"  depth {depth}: " + ", ".join(parts))
    return lines


__all__ = ["LabJob", "LabPlan", "lab_summary", "record_lab"]
