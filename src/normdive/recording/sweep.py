"""The depth sweep's plan (recording/runs.py, `SweepPlan`): its defaults, where its files go,
and what each run costs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from normdive.recording.format import DEFAULT_SEEDS, ROW_KEYS, InitScheme, RowKey, RunConfig
from normdive.recording.runs import DepthSeeds, SweepPlan

SWEEP_DEPTHS: tuple[int, ...] = (2, 4, 8, 16)
CUDA_EXTRA_DEPTHS: tuple[int, ...] = (32,)
SWEEP_INITS: tuple[InitScheme, ...] = ("gpt2", "pytorch")  # the residuals-only row depends on init
# From depth 16 on, one seed: with two the default sweep took 61 minutes on 2 cores, past its
# 60-minute budget (docs/recording.md, "The depth sweep").
TRIM_DEPTH = 16
SEEDS_FROM_TRIM_DEPTH = 1
SWEEP_SUFFIX = "-sweep"


def sweep_path_for(recording_path: Path) -> Path:
    return recording_path.with_name(recording_path.stem + SWEEP_SUFFIX + recording_path.suffix)


def shard_path_for(sweep_path: Path, index: int, count: int) -> Path:
    return sweep_path.with_name(f"{sweep_path.stem}.shard-{index}-of-{count}{sweep_path.suffix}")


def relative_cost(depth: int) -> float:
    """Relative to runs of the same steps and width: depth plus a fixed part (one core: 20 s at
    depth 2, 37 s at 4, 67 s at 8, 144 s at 16)."""
    return depth + 0.5


def trimmed_depths(depths: Sequence[DepthSeeds]) -> str | None:
    """The depths trained at fewer seeds, in a sentence; None: none were."""
    widest = max(len(entry.seeds) for entry in depths)
    fewer = [entry for entry in depths if len(entry.seeds) < widest]
    if not fewer:
        return None
    return (
        "; ".join(
            f"depth {entry.depth} trained seed(s) {', '.join(map(str, entry.seeds))} only"
            for entry in fewer
        )
        + " (the sweep's time budget)."
    )


def default_plan(
    depths: Sequence[int] = SWEEP_DEPTHS,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    inits: Sequence[InitScheme] = SWEEP_INITS,
    rows: Sequence[RowKey] = ROW_KEYS,
    *,
    base: RunConfig | None = None,
    trim_depth: int | None = TRIM_DEPTH,
    seeds_from_trim_depth: int = SEEDS_FROM_TRIM_DEPTH,
) -> SweepPlan:
    """The sweep of `base` (default: the recording's), trimmed from `trim_depth` (None: not)."""
    at_depths = [
        DepthSeeds(
            depth=depth,
            seeds=list(seeds)
            if trim_depth is None or depth < trim_depth
            else list(seeds)[:seeds_from_trim_depth],
        )
        for depth in sorted(depths)
    ]
    return SweepPlan(
        kind="sweep",
        base=base or RunConfig(),
        first={"seed": at_depths[0].seeds[0]},
        trimmed=trimmed_depths(at_depths),
        depths=at_depths,
        inits=list(inits),
        rows=[key for key in ROW_KEYS if key in rows],
    )
