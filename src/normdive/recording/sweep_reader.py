"""Reading, summarising and merging depth sweep files; what the sweep says, as facts.

CONTRACT: parse_sweep(text, name) -> Runs (of the sweep plan), raising RecordingProblem (the
recording reader's reasons and messages); read_sweep(path) likewise from a file (capped like a
recording); sweep_status(path) -> Runs | RecordingProblem, never raising, cached by the file's
stat (what the server uses); sweep_summary(sweep) -> the lines `check-recording` prints;
cells(sweep) and verdicts(sweep) -> the figures and the per-depth answers the page's
sentences are made from.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from normdive.recording.format import InitScheme, RowKey, as_float
from normdive.recording.kept import KeptByStat
from normdive.recording.reader import REMEDIES, RecordingProblem, parse_runs, read_capped
from normdive.recording.runs import Run, Runs, SweepPlan

SWEEP_REMEDY = REMEDIES["sweep"]
# Two single-component rows whose final accuracies differ by less than this are a tie: the
# "layer norm only" and "neither" rows at chance differ by a few hundredths of a percent.
TIE_MARGIN = 0.01
SINGLE_ROWS: tuple[RowKey, RowKey] = ("residual_only", "layernorm_only")

Verdict = Literal["residual_only", "layernorm_only", "tie", "mixed"]


def parse_sweep(text: str | bytes, name: str) -> Runs:
    """The depth sweep in a file's text, read by the one reader (reader.parse_runs)."""
    return parse_runs(text, name, "sweep")


def read_sweep(path: Path | str) -> Runs:
    return parse_sweep(read_capped(path), str(path))


def _final(run: Run) -> float:
    return as_float(run.final.heldout_accuracy)


@dataclass(frozen=True)
class Cell:
    """One (depth, init, row) of the sweep: its final held-out accuracy at each seed."""

    depth: int
    init: InitScheme
    key: RowKey
    by_seed: tuple[tuple[int, float], ...]  # (seed, final accuracy), in the plan's seed order

    @property
    def accuracies(self) -> list[float]:
        return [value for _, value in self.by_seed]

    @property
    def mean(self) -> float:
        finite = [v for v in self.accuracies if math.isfinite(v)]
        return statistics.fmean(finite) if finite else math.nan

    @property
    def low(self) -> float:
        return min(self.accuracies, key=lambda v: v if math.isfinite(v) else math.inf)

    @property
    def high(self) -> float:
        return max(self.accuracies, key=lambda v: v if math.isfinite(v) else -math.inf)


def cells(sweep: Runs) -> list[Cell]:
    """Every (depth, init, row) present, by depth, init, then the page's row order."""
    plan = sweep.plan_as(SweepPlan)
    found = []
    for entry in plan.depths:
        for init in plan.inits:
            for key in plan.rows:
                by_seed = tuple(
                    (seed, _final(run))
                    for seed in entry.seeds
                    if (run := sweep.row(key, depth=entry.depth, init=init, seed=seed)) is not None
                )
                if by_seed:
                    found.append(Cell(entry.depth, init, key, by_seed))
    return found


def _winner(residual: float, layernorm: float) -> Verdict:
    if not (math.isfinite(residual) or math.isfinite(layernorm)):
        return "tie"
    if not math.isfinite(layernorm) or residual - layernorm >= TIE_MARGIN:
        return "residual_only"
    if not math.isfinite(residual) or layernorm - residual >= TIE_MARGIN:
        return "layernorm_only"
    return "tie"


@dataclass(frozen=True)
class DepthVerdict:
    """Which single component recovers more at one depth and init: the same at every seed
    (or a tie at every seed), or "mixed" when the seeds disagree."""

    depth: int
    init: InitScheme
    verdict: Verdict
    residual_mean: float
    layernorm_mean: float


def verdicts(sweep: Runs) -> list[DepthVerdict]:
    """One verdict per (init, depth) where both single-component rows were trained, by init
    in the plan's order, then by depth."""
    plan = sweep.plan_as(SweepPlan)
    if not all(key in plan.rows for key in SINGLE_ROWS):
        return []
    found = []
    for init in plan.inits:
        for entry in plan.depths:
            per_seed = []
            residual, layernorm = [], []
            for seed in entry.seeds:
                r = sweep.row("residual_only", depth=entry.depth, init=init, seed=seed)
                n = sweep.row("layernorm_only", depth=entry.depth, init=init, seed=seed)
                if r is None or n is None:
                    continue
                per_seed.append(_winner(_final(r), _final(n)))
                residual.append(_final(r))
                layernorm.append(_final(n))
            if not per_seed:
                continue
            verdict: Verdict = per_seed[0] if len(set(per_seed)) == 1 else "mixed"
            found.append(
                DepthVerdict(
                    entry.depth,
                    init,
                    verdict,
                    statistics.fmean(residual),
                    statistics.fmean(layernorm),
                )
            )
    return found


def _percent(value: float) -> str:
    return f"{100 * value:.1f} %" if math.isfinite(value) else str(value)


def sweep_summary(sweep: Runs) -> list[str]:
    """The sweep by depth x init x row, each row's final accuracy at every seed, the mean and
    the spread (highest minus lowest); then which single component recovers more where."""
    plan = sweep.plan_as(SweepPlan)
    seeds_everywhere = [entry.seeds for entry in plan.depths]
    widest = max(seeds_everywhere, key=len)
    lines = [
        "| depth | init | row | accuracy at seeds "
        + ", ".join(map(str, widest))
        + " | mean | spread |",
        "|---|---|---|---|---|---|",
    ]
    for cell in cells(sweep):
        shown = {seed: _percent(value) for seed, value in cell.by_seed}
        spread = cell.high - cell.low
        lines.append(
            f"| {cell.depth} | {cell.init} | {cell.key} | "
            + " / ".join(shown.get(seed, "-") for seed in widest)
            + f" | {_percent(cell.mean)} | {100 * spread:.1f} points |"
        )
    lines.append("")
    for verdict in verdicts(sweep):
        lines.append(
            f"depth {verdict.depth}, {verdict.init}: single component recovering more: "
            f"{verdict.verdict} (residual_only {_percent(verdict.residual_mean)}, "
            f"layernorm_only {_percent(verdict.layernorm_mean)}, mean over seeds)"
        )
    trimmed = [e for e in plan.depths if len(e.seeds) < len(widest)]
    for entry in trimmed:
        lines.append(
            f"depth {entry.depth} trained seed(s) {', '.join(map(str, entry.seeds))} only "
            "(the sweep's time budget)."
        )
    return lines


def describe_sweep(sweep: Runs, name: str) -> list[str]:
    """What `normdive check-recording` prints for a sweep file that parses."""
    plan = sweep.plan_as(SweepPlan)
    config = plan.base
    depths = ", ".join(str(entry.depth) for entry in plan.depths)
    wall = sum(run.wall_s for run in sweep.runs)
    lines = [
        f"{name}: depth sweep, lesson {sweep.lesson!r}"
        + (f", shard {plan.shard.index} of {plan.shard.count}" if plan.shard else ""),
    ]
    for source in sweep.provenance:
        lines.append(
            f"made by: {source.command} on {source.created_at} with {source.device}, "
            f"torch {source.torch_version}, commit {source.git_commit or 'unknown'}; "
            f"wall time {source.wall_s:.0f} s"
        )
    lines += [
        f"depths {depths}; inits {', '.join(plan.inits)}; copy length "
        f"{config.copy_length}, width {config.d_model}, {config.steps} steps at batch "
        f"{config.batch_size}; {len(sweep.runs)} runs, {wall:.0f} s of training summed",
        "",
        *sweep_summary(sweep),
    ]
    return lines


def _sweep_or_problem(where: Path) -> Runs | RecordingProblem:
    try:
        return read_sweep(where)
    except RecordingProblem as problem:
        return problem
    except Exception as error:
        return RecordingProblem("unreadable", f"The sweep {where} could not be read: {error!r}")


_sweeps: KeptByStat[Runs | RecordingProblem] = KeptByStat(_sweep_or_problem)


def sweep_status(path: Path | str) -> Runs | RecordingProblem:
    """The sweep at `path`, or why it cannot be shown; never raises. Parsed again only when
    the file's stat changes (recording.kept)."""
    try:
        return _sweeps.get(path)
    except FileNotFoundError:
        return RecordingProblem("missing", f"The sweep {path} does not exist. {SWEEP_REMEDY}")
    except OSError as error:
        return RecordingProblem("unreadable", f"The sweep {path} cannot be read ({error}).")
