"""The depth sweep as the panel reads it: the four ablation rows at several depths, both
initialisations and several seeds, every run with its curves, in a file of its own beside the
recording.

The file is a file of runs of the sweep plan (recording/runs.py, whose sweep plan keeps this
module's axes); recording/plans.py turns it into this `Sweep` and back, and a file of
format_version 1 is a `Sweep` as written, still read. Torch-free, like every format module.

A sweep holds exactly the runs of its plan, or of one shard of its plan: no run missing,
none twice, none outside it. The plan lists the runs in one fixed order (longest first, so two
workers finish together and shards share the work evenly); shard I of N holds every N-th run
of that order starting at the I-th. Merging the N shards of one plan gives the unsharded file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from normdive.recording.format import (
    DEFAULT_SEEDS,
    ROW_KEYS,
    ROW_SWITCHES,
    InitScheme,
    Provenance,
    Row,
    RowKey,
    RunConfig,
    _Model,
    row_settings,
)
from normdive.recording.selection import Setting, select_one

SWEEP_FORMAT_VERSION = 1
SWEEP_KIND = "depth_sweep"
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


class DepthSeeds(_Model):
    """One depth of the sweep and the seeds trained at it."""

    depth: int = Field(ge=1, le=64)
    seeds: list[int] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct_seeds(self) -> DepthSeeds:
        if any(seed < 0 for seed in self.seeds) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"depth {self.depth}: seeds must be distinct and >= 0")
        return self


@dataclass(frozen=True, order=True)
class RunKey:
    """One run of a sweep: a row at one depth, initialisation and seed."""

    depth: int
    init: InitScheme
    key: RowKey
    seed: int

    @property
    def name(self) -> str:
        return f"depth{self.depth}-{self.init}-{self.key}-seed{self.seed}"

    @property
    def label(self) -> str:
        return f"depth {self.depth} {self.init} {self.key} seed {self.seed}"


class SweepPlan(_Model):
    """What the sweep trains: every row at every depth, init and that depth's seeds."""

    depths: list[DepthSeeds] = Field(min_length=1, description="Shallowest first.")
    inits: list[InitScheme] = Field(min_length=1)
    rows: list[RowKey] = Field(min_length=1, description="In the page's row order.")

    @model_validator(mode="after")
    def _ordered_and_distinct(self) -> SweepPlan:
        depths = [entry.depth for entry in self.depths]
        if depths != sorted(set(depths)):
            raise ValueError(f"depths {depths} must be distinct and in increasing order")
        if len(set(self.inits)) != len(self.inits):
            raise ValueError(f"inits {self.inits} must be distinct")
        if self.rows != [key for key in ROW_KEYS if key in self.rows]:
            raise ValueError(f"rows {self.rows} must be distinct and in the page's order")
        return self

    def seeds_at(self, depth: int) -> list[int]:
        return next(entry.seeds for entry in self.depths if entry.depth == depth)

    def runs(self) -> list[RunKey]:
        """Every run, in training order: deepest first (the longest runs start first), then
        seed, init and row, so the cheap runs fill the gaps at the end."""
        return [
            RunKey(entry.depth, init, key, seed)
            for entry in sorted(self.depths, key=lambda e: -e.depth)
            for seed in entry.seeds
            for init in self.inits
            for key in self.rows
        ]

    def shard_runs(self, index: int, count: int) -> list[RunKey]:
        """Shard `index` (1-based) of `count`: every count-th run from the index-th on."""
        return self.runs()[index - 1 :: count]


def default_plan(
    depths: Sequence[int] = SWEEP_DEPTHS,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    inits: Sequence[InitScheme] = SWEEP_INITS,
    rows: Sequence[RowKey] = ROW_KEYS,
    *,
    trim_depth: int | None = TRIM_DEPTH,
    seeds_from_trim_depth: int = SEEDS_FROM_TRIM_DEPTH,
) -> SweepPlan:
    """A plan with `seeds` at every depth, but only the first `seeds_from_trim_depth` of them
    from `trim_depth` on (None: no trimming)."""
    return SweepPlan(
        depths=[
            DepthSeeds(
                depth=depth,
                seeds=list(seeds)
                if trim_depth is None or depth < trim_depth
                else list(seeds)[:seeds_from_trim_depth],
            )
            for depth in sorted(depths)
        ],
        inits=list(inits),
        rows=[key for key in ROW_KEYS if key in rows],
    )


class ShardPart(_Model):
    index: int = Field(ge=1, description="Which shard this is, from 1.")
    count: int = Field(ge=1, description="How many shards the plan was cut into.")

    @model_validator(mode="after")
    def _index_in_range(self) -> ShardPart:
        if self.index > self.count:
            raise ValueError(f"shard {self.index} of {self.count} does not exist")
        return self


class SweepRun(_Model):
    """One run: the row's figures and curves, at the depth and init it trained with."""

    depth: int = Field(ge=1, le=64)
    init: InitScheme
    row: Row

    @property
    def run_key(self) -> RunKey:
        return RunKey(self.depth, self.init, self.row.key, self.row.seed)


class Sweep(_Model):
    """The depth sweep of the 8.5 lesson's ablation."""

    format_version: Literal[1]
    kind: Literal["depth_sweep"] = Field(description="Tells a sweep from a recording.")
    lesson: str
    provenance: list[Provenance] = Field(
        min_length=1,
        description="The command that trained the runs; a merged file lists each shard's.",
    )
    config: RunConfig = Field(
        description="The settings every run shares; each run's own depth and init replace "
        "the two here (which are the defaults')."
    )
    plan: SweepPlan
    shard: ShardPart | None = Field(
        default=None, description="Which slice of the plan this file holds; null: all of it."
    )
    runs: list[SweepRun] = Field(description="Exactly the runs of the plan (or of the shard).")

    @model_validator(mode="after")
    def _runs_are_the_plan(self) -> Sweep:
        expected = (
            self.plan.runs()
            if self.shard is None
            else self.plan.shard_runs(self.shard.index, self.shard.count)
        )
        wanted = set(expected)
        seen: set[RunKey] = set()
        for run in self.runs:
            where = run.run_key.label
            if run.run_key in seen:
                raise ValueError(f"{where} appears twice")
            if run.run_key not in wanted:
                raise ValueError(f"{where} is not in the plan{_of_shard(self.shard)}")
            seen.add(run.run_key)
            for point in run.row.block_grad_norms:
                if len(point.norms) != run.depth:
                    raise ValueError(
                        f"{where}: {len(point.norms)} block gradient norms at step "
                        f"{point.step}, expected {run.depth}"
                    )
        missing = [key.label for key in expected if key not in seen]
        if missing:
            shown = ", ".join(missing[:3]) + (
                f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            )
            raise ValueError(f"runs missing from the plan{_of_shard(self.shard)}: {shown}")
        return self

    def run(self, depth: int, init: str, key: str, seed: int) -> SweepRun | None:
        """The run at this depth, init, row and seed, if recorded."""
        if key not in ROW_SWITCHES:
            return None
        layernorm, residual = ROW_SWITCHES[key]
        return select_one(
            self.runs,
            _run_settings,
            depth=depth,
            init=init,
            layernorm=layernorm,
            residual=residual,
            seed=seed,
        )

    def run_config(self, depth: int, init: InitScheme) -> RunConfig:
        return run_config(self.config, depth, init)


def run_config(config: RunConfig, depth: int, init: InitScheme) -> RunConfig:
    """The settings of one run: the shared ones at this depth and init."""
    return RunConfig.model_validate({**config.model_dump(), "depth": depth, "init": init})


def _run_settings(run: SweepRun) -> dict[str, Setting]:
    return {"depth": run.depth, "init": run.init, **row_settings(run.row)}


def _of_shard(shard: ShardPart | None) -> str:
    return "" if shard is None else f" (shard {shard.index} of {shard.count})"


def canonical_order(runs: Iterable[SweepRun]) -> list[SweepRun]:
    """Runs in the file's order: by depth, init, the page's row order, seed."""
    return sorted(
        runs,
        key=lambda r: (r.depth, SWEEP_INITS.index(r.init), ROW_KEYS.index(r.row.key), r.row.seed),
    )
