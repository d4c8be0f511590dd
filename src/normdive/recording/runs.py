"""The one recording format: a file of training runs, each with its whole configuration, and
the plan they were trained to (the ablation, the depth sweep or the lab grid).

What `record-runs` writes and every reader reads (recording/reader.py, `parse_runs`). Torch-free
on purpose: the web app reads these models and never imports torch. The JSON Schema in
docs/recording.schema.json is generated from `Runs` (recording/schema.py) and a test fails when it
goes stale. docs/recording.md says why one format with three plans.

Every run carries its whole configuration (`RunSettings`: a `RunConfig` plus the two switches,
layer norm's eps and the seed), so "the runs at this configuration" is one question for every
plan (`Runs.select`). The plan says what the file was meant to hold: its axes (the values each
varying setting takes), which runs the page plays first, what was left out and why, and which
shard of the plan the file is. The figures keep the `Measure` of recording/format.py: a
diverged run keeps its "nan". The player, the sweep panel and the lab ask these models
directly (`Runs.row`, `Runs.run_at`); there is no other model of a recorded run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Annotated, Any, Final, Literal, Protocol, TypeVar

from pydantic import Field, model_validator

from normdive.recording.format import (
    MAX_CURVE_POINTS,
    ROW_KEYS,
    ROW_SWITCHES,
    BlockGradNorms,
    InitScheme,
    Measure,
    Provenance,
    RowKey,
    RunConfig,
    _Model,
)
from normdive.recording.selection import Setting, select, select_one

RUNS_FORMAT_VERSION: Final = 2
RUNS_KIND: Final = "runs"
# The lesson the shipped runs belong to.
LESSON = "8.5 The transformer block"
# torch.nn.LayerNorm's default eps, which the ablation's and the sweep's model use
# (training/model.py); the lab offers other values.
TORCH_LAYERNORM_EPS = 1e-5

PlanKind = Literal["ablation", "sweep", "lab_grid"]
PLAN_KINDS: tuple[PlanKind, ...] = ("ablation", "sweep", "lab_grid")
# How each plan's file is indented: the ablation's is read in review, and one-space indents
# keep its diffs readable; the sweep and the lab grid are read by the page, not by people, and
# compact (the default sweep is about 0.6 MB so, against 0.9 MB with one-space indents).
PLAN_INDENTS: dict[PlanKind, int | None] = {"ablation": 1, "sweep": None, "lab_grid": None}


class Switched(Protocol):
    """A run's settings or a lab config: layer norm's switch and its eps."""

    @property
    def layernorm(self) -> bool: ...
    @property
    def eps(self) -> float | None: ...


SwitchedT = TypeVar("SwitchedT", bound=Switched)


def eps_with_layernorm(settings: SwitchedT) -> SwitchedT:
    """`settings`, once its eps is a finite number (0 allowed) exactly when layer norm is on and
    null when it is off (else ValueError); a model validator of each model that has both."""
    layernorm, eps = settings.layernorm, settings.eps
    if layernorm and eps is None:
        raise ValueError("layer norm is on: give its eps (0 allowed)")
    if not layernorm and eps is not None:
        raise ValueError("layer norm is off: eps must be null")
    if eps is not None and not math.isfinite(eps):
        raise ValueError("eps must be a finite number")
    return settings


class RunSettings(RunConfig):
    """One run's whole configuration: the shared settings and the run's own choices."""

    layernorm: bool = Field(description="Every layer norm on (pre-LN and final).")
    residual: bool = Field(description="The skip path around each sublayer.")
    eps: float | None = Field(
        ge=0, description="Layer norm's epsilon (0 allowed); null exactly when it is off."
    )
    seed: int = Field(ge=0, description="Seed of the weights and the training batches.")

    _eps_with_layernorm = model_validator(mode="after")(eps_with_layernorm)

    @property
    def row_key(self) -> RowKey:
        """The ablation row these switches make."""
        return next(k for k in ROW_KEYS if ROW_SWITCHES[k] == (self.layernorm, self.residual))

    def run_config(self) -> RunConfig:
        """The settings this run shares with the others of its plan's shape: all but its
        switches, eps and seed."""
        return RunConfig.model_validate(self.model_dump(include=set(RunConfig.model_fields)))


def settings_at(
    base: RunConfig, *, layernorm: bool, residual: bool, seed: int, **axes: Any
) -> RunSettings:
    """`base` at one point: the switches, the seed, and any other settings in `axes` (depth,
    init, eps). Layer norm's eps is TORCH_LAYERNORM_EPS unless given, null when it is off."""
    eps = axes.pop("eps", TORCH_LAYERNORM_EPS) if layernorm else None
    axes.pop("eps", None)
    return RunSettings.model_validate(
        {
            **base.model_dump(),
            **axes,
            "layernorm": layernorm,
            "residual": residual,
            "eps": eps,
            "seed": seed,
        }
    )


class RunPoint(_Model):
    """One evaluation along a run's curve; a figure the plan does not record is null."""

    step: int = Field(ge=0, description="Updates done; 0 is the untrained model.")
    train_loss: Measure | None = Field(
        description="Mean training loss over the updates since the previous point; null at 0."
    )
    grad_norm: Measure | None = Field(
        default=None,
        description="Mean global gradient norm (before clipping) over the same updates; null "
        "at 0 and where not recorded.",
    )
    heldout_loss: Measure = Field(description="Cross-entropy on the copied half, held out.")
    heldout_accuracy: Measure = Field(description="Per-token copy accuracy, held out (0..1).")
    heldout_exact_match: Measure | None = Field(
        default=None, description="Whole sequences copied exactly (0..1); null: not recorded."
    )


class RunFinal(_Model):
    """Where the run ended: the held-out figures after the last update."""

    step: int = Field(ge=0)
    heldout_loss: Measure
    heldout_accuracy: Measure
    heldout_exact_match: Measure | None = Field(default=None, description="Null: not recorded.")
    first_step_at_full_accuracy: int | None = Field(
        default=None,
        description="First evaluated step with every held-out copied token right; null: never, "
        "or not recorded.",
    )


class Run(_Model):
    """One training run: its whole configuration, its curves and how long it took."""

    config: RunSettings
    curve: list[RunPoint] = Field(min_length=1)
    block_grad_norms: list[BlockGradNorms] | None = Field(
        default=None,
        description="Each block's gradient norm at a few updates; null where not recorded.",
    )
    final: RunFinal
    wall_s: float = Field(ge=0, description="Seconds this run took to train and evaluate.")

    @model_validator(mode="after")
    def _one_norm_per_block(self) -> Run:
        for point in self.block_grad_norms or []:
            if len(point.norms) != self.config.depth:
                raise ValueError(
                    f"{len(point.norms)} block gradient norms at step {point.step}, expected "
                    f"depth {self.config.depth}"
                )
        return self


def run_label(config: RunSettings) -> str:
    """A run in words, for messages: depth 8 gpt2 both eps 1e-05 seed 0."""
    eps = "" if config.eps is None else f" eps {config.eps:g}"
    return f"depth {config.depth} {config.init} {config.row_key}{eps} seed {config.seed}"


def check_every_figure(run: Run) -> None:
    """Raise ValueError unless `run` records what the player draws of a row: the exact match
    at every point and at the end, each block's gradient norms, at most MAX_CURVE_POINTS."""
    label = run_label(run.config)
    if len(run.curve) > MAX_CURVE_POINTS:
        raise ValueError(f"{label}: {len(run.curve)} curve points, at most {MAX_CURVE_POINTS}")
    unrecorded = [p.step for p in run.curve if p.heldout_exact_match is None]
    if unrecorded or run.final.heldout_exact_match is None:
        where = f"step {unrecorded[0]}" if unrecorded else "the end"
        raise ValueError(f"{label}: no exact match recorded at {where}")
    if not run.block_grad_norms:
        raise ValueError(f"{label}: no block gradient norms recorded")


class ShardPart(_Model):
    index: int = Field(ge=1, description="Which shard this is, from 1.")
    count: int = Field(ge=1, description="How many shards the plan was cut into.")

    @model_validator(mode="after")
    def _index_in_range(self) -> ShardPart:
        if self.index > self.count:
            raise ValueError(f"shard {self.index} of {self.count} does not exist")
        return self


class _Plan(_Model):
    """What every plan says: the settings its runs share, which runs the page plays first, what
    was left out, and which shard of the plan a file holds."""

    base: RunConfig = Field(
        description="The settings every run shares before the plan's axes replace some."
    )
    first: dict[str, Setting] = Field(
        description="The runs the page plays first: those whose settings have these values."
    )
    trimmed: str | None = Field(
        default=None,
        description="What the axes cover that was left unrecorded and why, in a sentence the "
        "page can show; null when nothing was.",
    )
    shard: ShardPart | None = Field(
        default=None, description="Which slice of the plan this file holds; null: all of it."
    )

    @model_validator(mode="after")
    def _first_names_settings(self) -> _Plan:
        unknown = sorted(set(self.first) - set(RunSettings.model_fields))
        if unknown:
            raise ValueError(f"first names no setting: {', '.join(unknown)}")
        return self

    def planned(self) -> list[RunSettings]:
        """Every run the axes cover, in training order."""
        raise NotImplementedError

    def exact(self) -> bool:
        """Whether a file must hold exactly the planned runs (else any of them)."""
        return False

    def check_run(self, run: Run) -> None:
        """Raise ValueError when `run` lacks a figure the readers of this plan draw."""

    def file_order(self, runs: Iterable[Run]) -> list[Run]:
        """Runs in the order a file of this plan lists them: the plan's training order."""
        rank = {settings_point(config): index for index, config in enumerate(self.planned())}
        return sorted(runs, key=lambda run: rank.get(settings_point(run.config), len(rank)))

    def sharded(self) -> list[RunSettings]:
        """The runs of this file's shard: every count-th planned run from the index-th on."""
        planned = self.planned()
        return planned if self.shard is None else planned[self.shard.index - 1 :: self.shard.count]


class AblationPlan(_Plan):
    """The ablation the page plays: each row (a combination of the switches) at each seed."""

    kind: Literal["ablation"]
    rows: list[RowKey] = Field(min_length=1, description="In the page's row order.")
    seeds: list[int] = Field(min_length=1, description="The others give the spread.")

    @model_validator(mode="after")
    def _first_is_a_seed(self) -> AblationPlan:
        if self.page_seed not in self.seeds:
            raise ValueError(f"first seed {self.page_seed} is not among seeds {self.seeds}")
        return self

    @property
    def page_seed(self) -> int:
        """The seed whose rows the page plays (`first`; the first seed when it names none)."""
        seed = self.first.get("seed", self.seeds[0])
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"first seed {seed!r} is not a seed")
        return seed

    def planned(self) -> list[RunSettings]:
        return [
            settings_at(self.base, layernorm=ln, residual=res, seed=seed)
            for seed in self.seeds
            for ln, res in (ROW_SWITCHES[key] for key in self.rows)
        ]

    def check_run(self, run: Run) -> None:
        check_every_figure(run)


class DepthSeeds(_Model):
    """One depth of the sweep and the seeds trained at it."""

    depth: int = Field(ge=1, le=64)
    seeds: list[int] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct_seeds(self) -> DepthSeeds:
        if any(seed < 0 for seed in self.seeds) or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"depth {self.depth}: seeds must be distinct and >= 0")
        return self


class SweepPlan(_Plan):
    """The depth sweep: each row at each depth, initialisation and that depth's seeds."""

    depths: list[DepthSeeds] = Field(min_length=1, description="Shallowest first.")
    inits: list[InitScheme] = Field(min_length=1)
    rows: list[RowKey] = Field(min_length=1, description="In the page's row order.")
    kind: Literal["sweep"]

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
        """The seeds trained at `depth` (none when the sweep has no such depth)."""
        return next((entry.seeds for entry in self.depths if entry.depth == depth), [])

    def planned(self) -> list[RunSettings]:
        """In training order: deepest first (the longest runs start first), then seed, init
        and row, so the cheap runs fill the gaps at the end and shards cost about the same."""
        return [
            settings_at(
                self.base,
                layernorm=ROW_SWITCHES[key][0],
                residual=ROW_SWITCHES[key][1],
                seed=seed,
                depth=entry.depth,
                init=init,
            )
            for entry in sorted(self.depths, key=lambda e: -e.depth)
            for seed in entry.seeds
            for init in self.inits
            for key in self.rows
        ]

    def exact(self) -> bool:
        return True

    def check_run(self, run: Run) -> None:
        check_every_figure(run)

    def file_order(self, runs: Iterable[Run]) -> list[Run]:
        """By depth, initialisation, the page's row order, then seed."""
        return sorted(
            runs,
            key=lambda run: (
                run.config.depth,
                self.inits.index(run.config.init),
                ROW_KEYS.index(run.config.row_key),
                run.config.seed,
            ),
        )


class LabOffered(_Model):
    """What the page lets a learner pick; the lab grid records each combination of these."""

    depths: list[int] = Field(min_length=1)
    eps: list[float] = Field(min_length=1, description="Offered wherever layer norm is on.")
    inits: list[InitScheme] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    depth_eps: dict[int, list[float]] = Field(
        default_factory=dict,
        description="Depths offered at fewer eps values, each with the values it has (some "
        "of eps); every other depth has every eps.",
    )

    @model_validator(mode="after")
    def _depth_eps_within_axes(self) -> LabOffered:
        for depth, values in self.depth_eps.items():
            if depth not in self.depths:
                raise ValueError(f"depth_eps names depth {depth}, which is not offered")
            strange = [f"{value:g}" for value in values if value not in self.eps]
            if not values or strange:
                raise ValueError(
                    f"depth_eps at depth {depth}: give some of the offered eps "
                    f"({', '.join(f'{e:g}' for e in self.eps)}), not "
                    f"{', '.join(strange) or 'none'}"
                )
        return self

    def eps_at(self, depth: int) -> list[float]:
        """The eps values offered at `depth` (where layer norm is on)."""
        return self.depth_eps.get(depth, self.eps)

    def depth_eps_trimmed(self) -> str | None:
        """The depths offered at fewer eps values, in a sentence; None: none are."""
        if not self.depth_eps:
            return None
        said = {
            depth: " and ".join(f"{e:g}" for e in values)
            for depth, values in sorted(self.depth_eps.items())
        }
        groups: dict[str, list[int]] = {}
        for depth, eps in said.items():
            groups.setdefault(eps, []).append(depth)
        sentence = "; ".join(
            f"depth{'s' if len(depths) > 1 else ''} "
            f"{' and '.join(map(str, depths))} recorded at eps {eps} only"
            for eps, depths in groups.items()
        )
        return sentence[:1].upper() + sentence[1:] + "."


class LabPlan(LabOffered, _Plan):
    """The lab grid: every row, with each offered eps where layer norm is on, at each offered
    depth, initialisation and seed (what the page offers a learner)."""

    kind: Literal["lab_grid"]

    def planned(self) -> list[RunSettings]:
        """Seed-major, so the first seed is whole first."""
        return [
            settings_at(
                self.base, layernorm=ln, residual=res, seed=seed, depth=depth, init=init, eps=eps
            )
            for seed in self.seeds
            for init in self.inits
            for depth in self.depths
            for ln, res in (ROW_SWITCHES[key] for key in ROW_KEYS)
            for eps in (self.eps_at(depth) if ln else [None])
        ]


PlanT = AblationPlan | SweepPlan | LabPlan
PlanKindT = TypeVar("PlanKindT", AblationPlan, SweepPlan, LabPlan)
Plan = Annotated[PlanT, Field(discriminator="kind")]


def runs_file(lesson: str, plan: PlanT, made_by: list[Provenance], runs: list[Run]) -> Runs:
    """A file of `runs` of `plan` in this format_version, as `made_by` recorded them."""
    head = {"format_version": RUNS_FORMAT_VERSION, "kind": RUNS_KIND, "lesson": lesson}
    return Runs.model_validate({**head, "plan": plan, "provenance": made_by, "runs": runs})


def _settings(run: Run) -> dict[str, Setting]:
    # The fields as pydantic keeps them: no copy, since every question of the page asks it.
    return vars(run.config)


def settings_point(config: RunSettings) -> tuple[Any, ...]:
    """A run's settings as a tuple: what tells two runs apart."""
    return tuple(config.model_dump().values())


class Runs(_Model):
    """A file of runs: the ablation, the depth sweep or the lab grid, as its plan says."""

    format_version: Literal[2]
    kind: Literal["runs"] = Field(description="Tells this format from any other JSON.")
    lesson: str = Field(description="The lesson these runs belong to.")
    plan: Plan
    provenance: list[Provenance] = Field(
        min_length=1,
        description="The command that trained the runs; a merged file lists each shard's.",
    )
    runs: list[Run] = Field(default_factory=list)

    @model_validator(mode="after")
    def _runs_are_planned(self) -> Runs:
        expected = self.plan.sharded()
        wanted = {settings_point(config) for config in expected}
        seen: set[tuple[Any, ...]] = set()
        of_shard = (
            ""
            if self.plan.shard is None
            else (f" (shard {self.plan.shard.index} of {self.plan.shard.count})")
        )
        for run in self.runs:
            point = settings_point(run.config)
            if point in seen:
                raise ValueError(f"{run_label(run.config)} appears twice")
            if point not in wanted:
                raise ValueError(f"{run_label(run.config)} is not in the plan{of_shard}")
            seen.add(point)
            self.plan.check_run(run)
        if self.plan.exact():
            missing = [run_label(c) for c in expected if settings_point(c) not in seen]
            if missing:
                shown = ", ".join(missing[:3]) + (
                    f" and {len(missing) - 3} more" if len(missing) > 3 else ""
                )
                raise ValueError(f"runs missing from the plan{of_shard}: {shown}")
        return self

    def select(self, **wanted: Setting) -> list[Run]:
        """The runs at this configuration: those whose settings have every value given (eps
        within selection.EPS_MATCH), in the file's order. select() is every run."""
        unknown = sorted(set(wanted) - set(RunSettings.model_fields))
        if unknown:
            raise ValueError(f"no run setting is called {', '.join(unknown)}")
        return select(self.runs, _settings, **wanted)

    def run_at(self, **wanted: Setting) -> Run | None:
        """The first run at this configuration, if any."""
        unknown = sorted(set(wanted) - set(RunSettings.model_fields))
        if unknown:
            raise ValueError(f"no run setting is called {', '.join(unknown)}")
        return select_one(self.runs, _settings, **wanted)

    def row(self, key: RowKey, **at: Setting) -> Run | None:
        """The run of the ablation row `key` (its two switches) at the plan's first settings
        (the page's seed), each setting in `at` changing one of them: another seed, depth or
        initialisation."""
        layernorm, residual = ROW_SWITCHES[key]
        wanted = {**self.plan.first, **at, "layernorm": layernorm, "residual": residual}
        if not layernorm:
            wanted["eps"] = None
        return self.run_at(**wanted)

    def plan_as(self, kind: type[PlanKindT]) -> PlanKindT:
        """The file's plan, which must be of `kind` (else ValueError naming both)."""
        if not isinstance(self.plan, kind):
            raise ValueError(f"plan: a {self.plan.kind} plan, not a {kind.__name__}")
        return self.plan

    def first_runs(self) -> list[Run]:
        """The runs the page plays first (the plan's `first`)."""
        return self.select(**self.plan.first)

    def shard_of(self, shard: ShardPart | None) -> Runs:
        """The same runs, said to be `shard` of their plan (validated: each must be in it)."""
        data = self.model_dump()
        data["plan"]["shard"] = None if shard is None else shard.model_dump()
        return Runs.model_validate(data)

    def missing(self) -> list[RunSettings]:
        """The planned runs (of this file's shard) the file does not hold."""
        held = {settings_point(run.config) for run in self.runs}
        return [config for config in self.plan.sharded() if settings_point(config) not in held]
