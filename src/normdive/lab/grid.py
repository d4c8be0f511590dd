"""The lab's configuration and its recorded grid as the lab reads it: the page reads it
lazily when "Train one yourself" opens (docs/lab.md, "The grid file").

`record-runs --lab` writes a file of runs of the lab plan (recording/runs.py);
`lab_grid_view` turns it into this `LabGrid` and `lab_grid_runs` back, and a file of
format_version 1 is a `LabGrid` as written, still read.

Torch-free, like the recording format it borrows from: every field of a `RunConfig` keeps its
name, constraints and description; only the defaults differ, and they are the lab's, chosen
by measurement (docs/lab.md, "Why this config"). Figures are `Measure`s, so a diverged cell
(layer norm with eps 0 on a constant row, say) keeps its "nan" instead of being dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from normdive.like_named import like_named
from normdive.recording.format import InitScheme, Measure, Provenance, RunConfig, check_heads
from normdive.recording.reader import (
    MAX_RECORDING_BYTES,
    REMEDIES,
    RecordingProblem,
    as_view,
    parse_runs,
)
from normdive.recording.runs import (
    LESSON,
    TORCH_LAYERNORM_EPS,
    LabOffered,
    LabPlan,
    Run,
    RunFinal,
    RunPoint,
    Runs,
    RunSettings,
    check_eps,
    runs_file,
    settings_at,
)
from normdive.recording.selection import Setting, select_one

LAB_FORMAT_VERSION = 1
# What a lab grid file says it is (its "kind"), beside a recording's and a sweep's.
LAB_KIND: Final = "lab_grid"

# --- the lab config: every default in one block (why each: docs/lab.md, "Why this config") ---
LAB_COPY_LENGTH = 8
LAB_VOCAB_SIZE = 16
LAB_D_MODEL = 32
LAB_N_HEADS = 4
LAB_MLP_RATIO = 4
LAB_STEPS = 300
LAB_BATCH_SIZE = 16
LAB_LEARNING_RATE = 3e-3
LAB_WARMUP_STEPS = 30
LAB_MIN_LR_RATIO = 0.1
LAB_WEIGHT_DECAY = 0.01
LAB_GRAD_CLIP = 1.0
LAB_EVAL_EVERY = 25
LAB_HELDOUT_SIZE = 128
LAB_HELDOUT_SEED = 20_240_905
LAB_GRAD_NORM_POINTS = 10  # a RunConfig field; the lab records no per-block norms
LAB_DEPTH = 2
LAB_INIT: InitScheme = "gpt2"
LAB_EPS = TORCH_LAYERNORM_EPS
# What the page offers a learner, and so what the grid records.
OFFERED_DEPTHS = (1, 2, 3, 4, 6, 8)
# The offered depths recorded at LAB_EPS only (where layer norm is on), unless every eps is
# asked for at every seed: the deep cells cost the most, and the lesson's question at depth
# is the four rows at the default eps (docs/lab.md, "The grid file"); the file says so.
LAB_EPS_ONLY_DEPTHS = (6, 8)
OFFERED_EPS = (0.0, 1e-5, 1.0)
OFFERED_INITS: tuple[InitScheme, ...] = ("gpt2", "pytorch")
OFFERED_SEEDS = (0, 1, 2)
# The seeds at which the offered eps values other than LAB_EPS are recorded (None: every
# offered seed). The first seed only: the whole grid (192 cells) took over an hour on this
# shared 2-core machine, the grid with this trim (128) fits its 30 minutes on idle cores
# (docs/lab.md, "The grid file"); the file says what was left out.
LAB_EXTRA_EPS_SEEDS: tuple[int, ...] | None = (0,)
# The grid lives beside the recording: <recording stem>-lab.json.
LAB_SUFFIX = "-lab"
# -----------------------------------------------------------------------------------------


def lab_path_for(recording_path: Path) -> Path:
    """Where the lab grid of a recording lives: beside it, its name ending in LAB_SUFFIX."""
    return recording_path.with_name(recording_path.stem + LAB_SUFFIX + recording_path.suffix)


_RUN = RunConfig.model_fields  # each lab field keeps the recording's constraints and wording
_SETTINGS = RunSettings.model_fields  # and each of a run's own choices


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LabBase(_Model):
    """The settings every cell of the grid shares: a RunConfig's fields less depth and init."""

    copy_length: Annotated[int, _RUN["copy_length"]] = LAB_COPY_LENGTH
    vocab_size: Annotated[int, _RUN["vocab_size"]] = LAB_VOCAB_SIZE
    d_model: Annotated[int, _RUN["d_model"]] = LAB_D_MODEL
    n_heads: Annotated[int, _RUN["n_heads"]] = LAB_N_HEADS
    mlp_ratio: Annotated[int, _RUN["mlp_ratio"]] = LAB_MLP_RATIO
    steps: Annotated[int, _RUN["steps"]] = LAB_STEPS
    batch_size: Annotated[int, _RUN["batch_size"]] = LAB_BATCH_SIZE
    learning_rate: Annotated[float, _RUN["learning_rate"]] = LAB_LEARNING_RATE
    warmup_steps: Annotated[int, _RUN["warmup_steps"]] = LAB_WARMUP_STEPS
    min_lr_ratio: Annotated[float, _RUN["min_lr_ratio"]] = LAB_MIN_LR_RATIO
    weight_decay: Annotated[float, _RUN["weight_decay"]] = LAB_WEIGHT_DECAY
    grad_clip: Annotated[float | None, _RUN["grad_clip"]] = LAB_GRAD_CLIP
    eval_every: Annotated[int, _RUN["eval_every"]] = LAB_EVAL_EVERY
    heldout_size: Annotated[int, _RUN["heldout_size"]] = LAB_HELDOUT_SIZE
    heldout_seed: Annotated[int, _RUN["heldout_seed"]] = LAB_HELDOUT_SEED
    grad_norm_points: Annotated[int, _RUN["grad_norm_points"]] = LAB_GRAD_NORM_POINTS

    @model_validator(mode="after")
    def _heads_divide_width(self) -> LabBase:
        check_heads(self.d_model, self.n_heads)
        return self


class LabConfig(LabBase):
    """One lab run's whole configuration: the shared settings and the learner's choices."""

    depth: Annotated[int, _RUN["depth"]] = LAB_DEPTH
    init: Annotated[InitScheme, _RUN["init"]] = LAB_INIT
    layernorm: Annotated[bool, _SETTINGS["layernorm"]] = True
    residual: Annotated[bool, _SETTINGS["residual"]] = True
    eps: Annotated[float | None, _SETTINGS["eps"]] = LAB_EPS

    @model_validator(mode="after")
    def _eps_with_layernorm(self) -> LabConfig:
        check_eps(self.layernorm, self.eps)
        return self

    @property
    def base(self) -> LabBase:
        return LabBase.model_validate(self.model_dump(include=set(LabBase.model_fields)))

    def run_config(self) -> RunConfig:
        """The same settings as a RunConfig, for the recorder's shared pieces (the schedule)."""
        return RunConfig.model_validate(self.model_dump(include=set(RunConfig.model_fields)))

    @classmethod
    def at(cls, base: LabBase, **choices: Setting) -> LabConfig:
        """The config of one grid point: `base` with the learner's `choices` (depth,
        layernorm, residual, eps, init)."""
        return cls.model_validate({**base.model_dump(), **choices})


_POINT = RunPoint.model_fields  # each figure keeps a run's constraints and wording


class LabPoint(_Model):
    """One evaluation along a cell's curve (the JavaScript trainer posts the same shape): a
    run's point less the gradient norm and the exact match, which the lab does not record."""

    step: Annotated[int, _POINT["step"]]
    train_loss: Annotated[Measure | None, _POINT["train_loss"]]
    heldout_loss: Annotated[Measure, _POINT["heldout_loss"]]
    heldout_accuracy: Annotated[Measure, _POINT["heldout_accuracy"]]


class LabFinal(_Model):
    """The held-out figures after the last update."""

    step: int = Field(ge=0)
    heldout_loss: Measure
    heldout_accuracy: Measure


# The settings that tell one cell from another, in the order of LabCell.point.
POINT = ("depth", "layernorm", "residual", "eps", "init", "seed")


class LabCell(_Model):
    """One recorded lab run: a grid point and a seed."""

    depth: int = Field(ge=1, le=64)
    layernorm: bool
    residual: bool
    eps: float | None = Field(ge=0, description="Null exactly when layer norm is off.")
    init: InitScheme
    seed: int = Field(ge=0)
    curve: list[LabPoint] = Field(min_length=1)
    final: LabFinal
    wall_s: float = Field(ge=0, description="Seconds this cell took to train and evaluate.")

    @property
    def point(self) -> tuple[int, bool, bool, float | None, InitScheme, int]:
        return (self.depth, self.layernorm, self.residual, self.eps, self.init, self.seed)

    @model_validator(mode="after")
    def _eps_with_layernorm(self) -> LabCell:
        check_eps(self.layernorm, self.eps)
        return self


class LabGrid(_Model):
    """The recorded lab grid: the base config, what is offered, and one cell per run."""

    format_version: Literal[1]
    kind: Literal["lab_grid"] = LAB_KIND
    base: LabBase
    offered: LabOffered
    trimmed: str | None = Field(
        default=None,
        description="What of the offered grid was left unrecorded to fit the time budget, in "
        "a sentence the page can show; null when every offered cell is recorded.",
    )
    cells: list[LabCell] = Field(default_factory=list)
    provenance: Provenance

    @model_validator(mode="after")
    def _cells_unique(self) -> LabGrid:
        seen: set[tuple[int, bool, bool, float | None, str, int]] = set()
        for cell in self.cells:
            if cell.point in seen:
                raise ValueError(f"cell {cell.point} appears twice")
            seen.add(cell.point)
        return self

    def cell(
        self,
        depth: int,
        layernorm: bool,
        residual: bool,
        eps: float | None,
        init: InitScheme,
        seed: int,
    ) -> LabCell | None:
        """The recorded cell at this point, or None when it was not recorded."""
        point = (depth, layernorm, residual, eps if layernorm else None, init, seed)
        return select_one(self.cells, _cell_settings, **dict(zip(POINT, point, strict=True)))

    def missing(self) -> list[tuple[int, bool, bool, float | None, InitScheme, int]]:
        """The offered points (depth, layernorm, residual, eps, init, seed) with no cell."""
        return [p for p in offered_points(self.offered) if self.cell(*p) is None]


def _cell_settings(cell: LabCell) -> dict[str, Setting]:
    return dict(zip(POINT, cell.point, strict=True))


def offered_points(
    offered: LabOffered,
) -> list[tuple[int, bool, bool, float | None, InitScheme, int]]:
    """Every point the page can ask for: each row, with each eps offered at its depth where
    layer norm is on, at each depth, init and seed. Seed-major, so the first seed is whole first."""
    switches = [(True, True), (False, True), (True, False), (False, False)]  # the page's rows
    return [
        (depth, layernorm, residual, eps, init, seed)
        for seed in offered.seeds
        for init in offered.inits
        for depth in offered.depths
        for layernorm, residual in switches
        for eps in (offered.eps_at(depth) if layernorm else [None])
    ]


def is_lab_grid_document(data: object) -> bool:
    """Whether parsed JSON says it is a lab grid (its kind), valid or not."""
    return isinstance(data, dict) and data.get("kind") == LAB_KIND


def describe_lab_grid(grid: LabGrid, name: str) -> list[str]:
    """The lines `normdive check-recording` prints for a lab grid that parses."""
    source, base, offered = grid.provenance, grid.base, grid.offered
    eps = ", ".join(f"{value:g}" for value in offered.eps)
    lines = [
        f"{name}: lab grid",
        f"made by: {source.command}",
        f"on {source.created_at} with {source.device}, torch {source.torch_version}, "
        f"normdive {source.normdive_version}, commit {source.git_commit or 'unknown'}; "
        f"wall time {source.wall_s:.0f} s",
        f"base: d_model {base.d_model}, {base.n_heads} heads, copy length {base.copy_length}, "
        f"{base.steps} steps at batch {base.batch_size}",
        f"offered: depths {', '.join(map(str, offered.depths))}; eps {eps}; inits "
        f"{', '.join(offered.inits)}; seeds {', '.join(map(str, offered.seeds))}",
        f"{len(grid.cells)} cells recorded, {len(grid.missing())} offered and not recorded",
    ]
    if grid.trimmed:
        lines.append(f"trimmed: {grid.trimmed}")
    return lines


LabProblemReason = Literal["missing", "unreadable", "too_large", "bad_json", "invalid"]
LAB_REMEDY = REMEDIES["lab_grid"]
LAB_REASONS: tuple[LabProblemReason, ...] = ("missing", "unreadable", "too_large", "bad_json")


class LabGridProblem(Exception):
    """Why the lab grid cannot be used. `reason` is for code, `message` for people."""

    def __init__(self, reason: LabProblemReason, message: str) -> None:
        super().__init__(message)
        self.reason: LabProblemReason = reason
        self.message = message


def parse_lab_grid(text: str | bytes, name: str) -> LabGrid:
    """Validate a grid file's text with the one reader (reader.parse_runs); `name` is what
    messages call the file."""

    try:
        runs = parse_runs(text, name, "lab_grid", legacy_lab_grid)
        return as_view(runs, lab_grid_view, "lab_grid", name)
    except RecordingProblem as problem:
        reason: LabProblemReason = next((r for r in LAB_REASONS if r == problem.reason), "invalid")
        raise LabGridProblem(reason, problem.message) from problem


def read_lab_grid(path: Path) -> LabGrid:
    """The grid at `path`, or LabGridProblem saying what is wrong with the file."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_RECORDING_BYTES + 1)
    except FileNotFoundError as error:
        raise LabGridProblem("missing", f"There is no lab grid at {path}. {LAB_REMEDY}") from error
    except OSError as error:
        raise LabGridProblem(
            "unreadable", f"The lab grid {path} cannot be read ({error.strerror}). {LAB_REMEDY}"
        ) from error
    if len(raw) > MAX_RECORDING_BYTES:
        raise LabGridProblem(
            "too_large",
            f"The lab grid {path} is over {MAX_RECORDING_BYTES // (1024 * 1024)} MiB; it is "
            f"not a lab grid. {LAB_REMEDY}",
        )
    return parse_lab_grid(raw, str(path))


def lab_grid_runs(grid: LabGrid) -> Runs:
    """The lab grid as a file of runs of the lab plan (what record-runs --lab writes)."""
    base = RunConfig.model_validate(
        {**grid.base.model_dump(), "depth": LAB_DEPTH, "init": LAB_INIT}
    )
    first_seed = grid.offered.seeds[0]
    return runs_file(
        LESSON,
        LabPlan(
            kind="lab_grid",
            base=base,
            first={
                "depth": LAB_DEPTH,
                "init": LAB_INIT,
                "layernorm": True,
                "residual": True,
                "eps": LAB_EPS,
                "seed": first_seed,
            },
            trimmed=grid.trimmed,
            **grid.offered.model_dump(),
        ),
        [grid.provenance],
        [
            Run(
                config=settings_at(base, **like_named(cell, *POINT)),
                curve=[RunPoint.model_validate(point.model_dump()) for point in cell.curve],
                final=RunFinal.model_validate(cell.final.model_dump()),
                wall_s=cell.wall_s,
            )
            for cell in grid.cells
        ],
    )


def lab_grid_view(runs: Runs) -> LabGrid:
    """A file of the lab plan as the grid the lab panel reads."""
    plan = runs.plan_as(LabPlan)
    return LabGrid(
        format_version=LAB_FORMAT_VERSION,
        kind=LAB_KIND,
        base=LabBase.model_validate(plan.base.model_dump(include=set(LabBase.model_fields))),
        offered=LabOffered.model_validate(plan.model_dump(include=set(LabOffered.model_fields))),
        trimmed=plan.trimmed,
        cells=[_run_cell(run) for run in runs.runs],
        provenance=runs.provenance[0],
    )


def _run_cell(run: Run) -> LabCell:
    """A run as a lab cell: its point, the lab's figures of its curve, where it ended."""
    curve = [point.model_dump(include=set(LabPoint.model_fields)) for point in run.curve]
    final = run.final.model_dump(include=set(LabFinal.model_fields))
    point = run.config.model_dump(include=set(POINT))
    return LabCell.model_validate({**point, "curve": curve, "final": final, "wall_s": run.wall_s})


def legacy_lab_grid(data: dict[str, Any]) -> Runs:
    """A lab grid of format_version 1 (the grid's own format) as runs."""
    return lab_grid_runs(LabGrid.model_validate(data))
