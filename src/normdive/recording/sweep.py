"""The depth sweep's plan: the four ablation rows at several depths, both initialisations and
several seeds, recorded into a file of runs of its own beside the recording (recording/runs.py,
`SweepPlan`). Here are its defaults, where its files go, and what each run costs.

A sweep holds exactly the runs of its plan, or of one shard of its plan: no run missing,
none twice, none outside it. The plan lists the runs in one fixed order (longest first, so two
workers finish together and shards share the work evenly); shard I of N holds every N-th run
of that order starting at the I-th. Merging the N shards of one plan gives the unsharded file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from normdive.recording.format import DEFAULT_SEEDS, ROW_KEYS, InitScheme, RowKey, RunConfig
from normdive.recording.runs import DepthSeeds, SweepPlan

# The sweep's defaults: the depths trained on any device, the one a CUDA device adds, and the
# two initialisations (the residuals-only row depends on it).
SWEEP_DEPTHS: tuple[int, ...] = (2, 4, 8, 16)
CUDA_EXTRA_DEPTHS: tuple[int, ...] = (32,)
SWEEP_INITS: tuple[InitScheme, ...] = ("gpt2", "pytorch")
# From this depth on the default sweep trains only the first SEEDS_FROM_TRIM_DEPTH seeds: its
# runs cost the most (a median 24 s at depth 2 and 205 s at depth 16, two runs at a time on
# two cores), and two seeds at depth 16 took the default 61 minutes, past its 60-minute
# budget on two cores (docs/recording.md, "The sweep's budget").
TRIM_DEPTH = 16
SEEDS_FROM_TRIM_DEPTH = 1
# The sweep file's name beside the recording's: recordings/the-transformer-block.json ->
# recordings/the-transformer-block-sweep.json.
SWEEP_SUFFIX = "-sweep"


def sweep_path_for(recording_path: Path) -> Path:
    """Where the sweep of a recording lives: beside it, its name ending in SWEEP_SUFFIX."""
    return recording_path.with_name(recording_path.stem + SWEEP_SUFFIX + recording_path.suffix)


def shard_path_for(sweep_path: Path, index: int, count: int) -> Path:
    """Where shard `index` of `count` of a sweep is written: beside the sweep."""
    return sweep_path.with_name(f"{sweep_path.stem}.shard-{index}-of-{count}{sweep_path.suffix}")


def relative_cost(depth: int) -> float:
    """A run's cost relative to others of the same steps and width: about proportional to the
    depth plus a fixed part (one core: 20 s at depth 2, 37 s at 4, 67 s at 8, 144 s at 16)."""
    return depth + 0.5


def trimmed_depths(depths: Sequence[DepthSeeds]) -> str | None:
    """The depths trained at fewer seeds than the widest, in a sentence; None: none were."""
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
    """The sweep of `base` (default: the recording's settings) with `seeds` at every depth, but
    only the first `seeds_from_trim_depth` of them from `trim_depth` on (None: no trimming);
    the page plays the first seed first."""
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
