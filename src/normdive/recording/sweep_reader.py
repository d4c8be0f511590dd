"""Reading, summarising and merging depth sweep files; what the sweep says, as facts.

CONTRACT: parse_sweep(text, name) -> Sweep, raising RecordingProblem (the recording reader's
reasons and messages); read_sweep(path) likewise from a file (capped like a recording);
sweep_status(path) -> Sweep | RecordingProblem, never raising, cached by the file's stat
(what the server uses); sweep_summary(sweep) -> the lines `check-recording` prints;
merge_sweeps(parts) -> the unsharded Sweep, raising MergeProblem; cells(sweep) and
verdicts(sweep) -> the figures and the per-depth answers the page's sentences are made from.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from normdive.recording.format import InitScheme, RowKey, as_float
from normdive.recording.reader import RecordingProblem, read_capped, validation_summary
from normdive.recording.sweep import (
    SWEEP_FORMAT_VERSION,
    SWEEP_KIND,
    Sweep,
    SweepRun,
    canonical_order,
)

SWEEP_REMEDY = "Run `normdive record-runs --sweep` to make it again."
# Two single-component rows whose final accuracies differ by less than this are a tie: the
# "layer norm only" and "neither" rows at chance differ by a few hundredths of a percent.
TIE_MARGIN = 0.01
SINGLE_ROWS: tuple[RowKey, RowKey] = ("residual_only", "layernorm_only")

Verdict = Literal["residual_only", "layernorm_only", "tie", "mixed"]


class MergeProblem(Exception):
    """Why shard files cannot be merged; the message names the files."""


def is_sweep_document(data: object) -> bool:
    """Whether parsed JSON claims to be a sweep (and not a recording)."""
    return isinstance(data, dict) and data.get("kind") == SWEEP_KIND


def sweep_from_data(data: Any, name: str) -> Sweep:
    version = data.get("format_version") if isinstance(data, dict) else None
    if version != SWEEP_FORMAT_VERSION:
        found = "no format_version" if version is None else f"format_version {version!r}"
        raise RecordingProblem(
            "unknown_version",
            f"The sweep {name} has {found}; this normdive reads sweep format_version "
            f"{SWEEP_FORMAT_VERSION}. Re-record it with this version, or upgrade normdive.",
        )
    try:
        return Sweep.model_validate(data)
    except ValidationError as error:
        raise RecordingProblem(
            "invalid",
            f"The sweep {name} does not match the format: {validation_summary(error)}. "
            f"{SWEEP_REMEDY}",
        ) from error


def parse_sweep(text: str | bytes, name: str) -> Sweep:
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise RecordingProblem(
            "bad_json", f"The sweep {name} is not valid JSON ({error}). {SWEEP_REMEDY}"
        ) from error
    if not is_sweep_document(data):
        raise RecordingProblem(
            "invalid", f"The file {name} is not a depth sweep (its kind is not {SWEEP_KIND!r})."
        )
    return sweep_from_data(data, name)


def read_sweep(path: Path | str) -> Sweep:
    return parse_sweep(read_capped(path), str(path))


def _final(run: SweepRun) -> float:
    return as_float(run.row.final.heldout_accuracy)


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


def cells(sweep: Sweep) -> list[Cell]:
    """Every (depth, init, row) present, by depth, init, then the page's row order."""
    found = []
    for entry in sweep.plan.depths:
        for init in sweep.plan.inits:
            for key in sweep.plan.rows:
                by_seed = tuple(
                    (seed, _final(run))
                    for seed in entry.seeds
                    if (run := sweep.run(entry.depth, init, key, seed)) is not None
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


def verdicts(sweep: Sweep) -> list[DepthVerdict]:
    """One verdict per (init, depth) where both single-component rows were trained, by init
    in the plan's order, then by depth."""
    if not all(key in sweep.plan.rows for key in SINGLE_ROWS):
        return []
    found = []
    for init in sweep.plan.inits:
        for entry in sweep.plan.depths:
            per_seed = []
            residual, layernorm = [], []
            for seed in entry.seeds:
                r = sweep.run(entry.depth, init, "residual_only", seed)
                n = sweep.run(entry.depth, init, "layernorm_only", seed)
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


def sweep_summary(sweep: Sweep) -> list[str]:
    """The sweep by depth x init x row, each row's final accuracy at every seed, the mean and
    the spread (highest minus lowest); then which single component recovers more where."""
    seeds_everywhere = [entry.seeds for entry in sweep.plan.depths]
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
    trimmed = [e for e in sweep.plan.depths if len(e.seeds) < len(widest)]
    for entry in trimmed:
        lines.append(
            f"depth {entry.depth} trained seed(s) {', '.join(map(str, entry.seeds))} only "
            "(the sweep's time budget)."
        )
    return lines


def describe_sweep(sweep: Sweep, name: str) -> list[str]:
    """What `normdive check-recording` prints for a sweep file that parses."""
    config = sweep.config
    depths = ", ".join(str(entry.depth) for entry in sweep.plan.depths)
    wall = sum(run.row.wall_s for run in sweep.runs)
    lines = [
        f"{name}: depth sweep, format_version {sweep.format_version}, lesson {sweep.lesson!r}"
        + (f", shard {sweep.shard.index} of {sweep.shard.count}" if sweep.shard else ""),
    ]
    for source in sweep.provenance:
        lines.append(
            f"made by: {source.command} on {source.created_at} with {source.device}, "
            f"torch {source.torch_version}, commit {source.git_commit or 'unknown'}; "
            f"wall time {source.wall_s:.0f} s"
        )
    lines += [
        f"depths {depths}; inits {', '.join(sweep.plan.inits)}; copy length "
        f"{config.copy_length}, width {config.d_model}, {config.steps} steps at batch "
        f"{config.batch_size}; {len(sweep.runs)} runs, {wall:.0f} s of training summed",
        "",
        *sweep_summary(sweep),
    ]
    return lines


def merge_sweeps(parts: Sequence[tuple[str, Sweep]]) -> Sweep:
    """The N shards of one plan, joined into the unsharded sweep. Raises MergeProblem when
    they disagree on the format, config or plan, when a shard is missing or given twice, or
    when a run appears in two parts."""
    if not parts:
        raise MergeProblem("Give the shard files to merge.")
    first_name, first = parts[0]
    for name, part in parts:
        if part.shard is None:
            raise MergeProblem(f"{name} is a whole sweep, not a shard: nothing to merge.")
        if part.config != first.config:
            raise MergeProblem(f"{name} and {first_name} were trained with different settings.")
        if part.plan != first.plan:
            raise MergeProblem(f"{name} and {first_name} belong to different sweep plans.")
        if part.lesson != first.lesson:
            raise MergeProblem(f"{name} and {first_name} belong to different lessons.")
    counts = {part.shard.count for _, part in parts if part.shard is not None}
    if len(counts) != 1:
        raise MergeProblem(
            "The parts were cut into different numbers of shards: "
            + ", ".join(f"{name} is 1 of {part.shard.count}" for name, part in parts if part.shard)
        )
    count = counts.pop()
    indices: dict[int, str] = {}
    for name, part in parts:
        assert part.shard is not None
        if part.shard.index in indices:
            raise MergeProblem(
                f"Shard {part.shard.index} of {count} is given twice: "
                f"{indices[part.shard.index]} and {name}."
            )
        indices[part.shard.index] = name
    gaps = [index for index in range(1, count + 1) if index not in indices]
    if gaps:
        raise MergeProblem(
            f"Shard(s) {', '.join(map(str, gaps))} of {count} are missing; give all {count}."
        )
    seen: dict[tuple[int, str, str, int], str] = {}
    runs: list[SweepRun] = []
    for name, part in parts:
        for run in part.runs:
            key = (run.depth, run.init, run.row.key, run.row.seed)
            if key in seen:
                raise MergeProblem(f"{run.run_key.label} is in both {seen[key]} and {name}.")
            seen[key] = name
            runs.append(run)
    ordered = sorted(parts, key=lambda item: item[1].shard.index if item[1].shard else 0)
    try:
        return Sweep(
            format_version=first.format_version,
            kind=first.kind,
            lesson=first.lesson,
            provenance=[source for _, part in ordered for source in part.provenance],
            config=first.config,
            plan=first.plan,
            shard=None,
            runs=canonical_order(runs),
        )
    except ValidationError as error:
        raise MergeProblem(f"The merged sweep is not whole: {validation_summary(error)}") from None


_status_cache: dict[Path, tuple[tuple[int, int, int, int], Sweep | RecordingProblem]] = {}
_status_lock = threading.Lock()


def sweep_status(path: Path | str) -> Sweep | RecordingProblem:
    """The sweep at `path`, or why it cannot be shown; never raises. Parsed again only when
    the file's stat (inode, size, mtime, ctime) changes: the server asks on every open of the
    panel, and parsing the default sweep takes tens of milliseconds."""
    where = Path(path).absolute()
    try:
        info = os.stat(where)
    except FileNotFoundError:
        return RecordingProblem("missing", f"The sweep {path} does not exist. {SWEEP_REMEDY}")
    except OSError as error:
        return RecordingProblem("unreadable", f"The sweep {path} cannot be read ({error}).")
    stamp = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    with _status_lock:
        seen = _status_cache.get(where)
    if seen is not None and seen[0] == stamp:
        return seen[1]
    status: Sweep | RecordingProblem
    try:
        status = read_sweep(where)
    except RecordingProblem as problem:
        status = problem
    except Exception as error:
        status = RecordingProblem("unreadable", f"The sweep {path} could not be read: {error!r}")
    with _status_lock:
        _status_cache[where] = (stamp, status)
    return status
