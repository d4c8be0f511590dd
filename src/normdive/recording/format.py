"""The ablation as the player reads it (`Recording`: the four rows at each seed), and the
pieces every run of the one format shares: its settings (`RunConfig`), curve figures
(`Measure`), block gradient norms and provenance.

The file `record-runs` writes is a file of runs (recording/runs.py); recording/plans.py turns
one of the ablation plan into this `Recording` and back. A file of format_version 1 is a
`Recording` as written, and is still read (recording/reader.py). Torch-free on purpose: the
web app reads these models, and it never imports torch.

JSON has no NaN or infinity, and a diverged run is a result worth showing, so every measured
figure is a `Measure`: a number when finite, otherwise one of the strings "nan", "inf",
"-inf". Nothing non-finite is ever dropped.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from normdive.recording.selection import Setting, select_one

FORMAT_VERSION = 1

RowKey = Literal["both", "residual_only", "layernorm_only", "neither"]
# The page's order: the full block first, then each single component, then neither.
ROW_KEYS: tuple[RowKey, ...] = ("both", "residual_only", "layernorm_only", "neither")
# Which of the two components each row keeps: (layernorm, residual).
ROW_SWITCHES: dict[RowKey, tuple[bool, bool]] = {
    "both": (True, True),
    "residual_only": (False, True),
    "layernorm_only": (True, False),
    "neither": (False, False),
}

# The seeds of the shipped recording; the first is the one the page plays.
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
# A row's curve holds at most this many points (the file stays well under 1 MB).
MAX_CURVE_POINTS = 200

InitScheme = Literal["gpt2", "pytorch"]
NonFinite = Literal["nan", "inf", "-inf"]


NON_FINITE_MARKERS = ("nan", "inf", "-inf")


def non_finite_marker(value: float) -> NonFinite:
    """The marker JSON can hold for a non-finite float: "nan", "inf" or "-inf"."""
    if math.isnan(value):
        return "nan"
    return "inf" if value > 0 else "-inf"


def _mark_non_finite(value: object) -> object:
    """Turn a non-finite float into its explicit marker; refuse any other string (one clear
    error instead of one per branch of the union); leave the rest to pydantic."""
    if isinstance(value, float) and not math.isfinite(value):
        return non_finite_marker(value)
    if isinstance(value, str) and value not in NON_FINITE_MARKERS:
        raise ValueError(f"expected a number or one of 'nan', 'inf', '-inf', got {value!r}")
    return value


Measure = Annotated[float | NonFinite, BeforeValidator(_mark_non_finite)]


def as_float(value: float | str) -> float:
    """A Measure back as a Python float (the markers become nan / inf / -inf)."""
    return float(value)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunConfig(_Model):
    """Everything that decides a row's numbers, resolved (no field left to a default elsewhere).

    The defaults are the shipped recording's settings; docs/recording.md says why each was
    chosen and what it traded for the 15-minute budget on a 2-core laptop-class CPU."""

    depth: int = Field(default=8, ge=1, le=64, description="Transformer blocks in the stack.")
    copy_length: int = Field(default=16, ge=1, le=256, description="Symbols to copy.")
    vocab_size: int = Field(
        default=16, ge=2, le=1024, description="Distinct symbols; the separator is one more."
    )
    d_model: int = Field(default=64, ge=4, le=4096, description="Width of the residual stream.")
    n_heads: int = Field(default=4, ge=1, le=64, description="Attention heads per block.")
    mlp_ratio: int = Field(default=4, ge=1, le=16, description="MLP hidden width / d_model.")
    init: InitScheme = Field(
        default="gpt2",
        description=(
            "gpt2: N(0, 0.02) weights, zero biases, attention-output and second-MLP weights "
            "scaled by 1/sqrt(2 x depth). pytorch: the library's own defaults. "
            "The residuals-only row depends on it."
        ),
    )
    steps: int = Field(default=600, ge=1, le=1_000_000, description="Optimiser updates per row.")
    batch_size: int = Field(default=64, ge=1, le=65_536, description="Sequences per update.")
    learning_rate: float = Field(default=1e-3, gt=0, le=1.0, description="AdamW peak rate.")
    warmup_steps: int = Field(default=50, ge=0, description="Linear warm-up from 0 to the peak.")
    min_lr_ratio: float = Field(
        default=0.1, ge=0, le=1, description="Cosine decay ends at this fraction of the peak."
    )
    weight_decay: float = Field(default=0.01, ge=0, le=1, description="AdamW weight decay.")
    grad_clip: float | None = Field(
        default=1.0, gt=0, description="Clip the global gradient norm to this; null: no clip."
    )
    eval_every: int = Field(default=20, ge=1, description="Held-out evaluation every k steps.")
    heldout_size: int = Field(default=256, ge=1, le=65_536, description="Held-out sequences.")
    heldout_seed: int = Field(
        default=20_240_905,
        ge=0,
        description="Seed of the held-out set's own generator: one fixed set for every row.",
    )
    grad_norm_points: int = Field(
        default=10,
        ge=2,
        le=1000,
        description="How many updates (roughly log-spaced, first and last included) record "
        "each block's gradient norm.",
    )

    @property
    def sequence_length(self) -> int:
        """Positions the model sees: the symbols, the separator, the copy minus its last."""
        return 2 * self.copy_length

    @model_validator(mode="after")
    def _heads_divide_width(self) -> RunConfig:
        check_heads(self.d_model, self.n_heads)
        return self


def check_heads(d_model: int, n_heads: int) -> None:
    """Raise ValueError unless the width splits evenly over the heads (E = D / H)."""
    if d_model % n_heads:
        raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")


class CurvePoint(_Model):
    """One evaluation along a row's training curve."""

    step: int = Field(ge=0, description="Updates done; 0 is the untrained model.")
    train_loss: Measure | None = Field(
        description="Mean training loss over the updates since the previous point; null at 0."
    )
    grad_norm: Measure | None = Field(
        description="Mean global gradient norm (before clipping) over the same updates."
    )
    heldout_loss: Measure = Field(description="Cross-entropy on the copied half, held out.")
    heldout_accuracy: Measure = Field(description="Per-token copy accuracy, held out (0..1).")
    heldout_exact_match: Measure = Field(description="Whole sequences copied exactly (0..1).")


class BlockGradNorms(_Model):
    """Each block's gradient norm (before clipping) at one update, first block first."""

    step: int = Field(ge=1, description="The update whose gradient this is (1 = the first).")
    norms: list[Measure]


class FinalFigures(_Model):
    """Where the row ended: the held-out figures after the last update."""

    step: int = Field(ge=0)
    heldout_loss: Measure
    heldout_accuracy: Measure
    heldout_exact_match: Measure
    first_step_at_full_accuracy: int | None = Field(
        description="First evaluated step with every held-out copied token right; null: never."
    )


class Row(_Model):
    """One training run: one combination of the two switches at one seed."""

    key: RowKey
    seed: int = Field(ge=0)
    layernorm: bool
    residual: bool
    curve: list[CurvePoint] = Field(min_length=1, max_length=MAX_CURVE_POINTS)
    block_grad_norms: list[BlockGradNorms] = Field(min_length=1)
    final: FinalFigures
    wall_s: float = Field(ge=0, description="Seconds this row took to train and evaluate.")

    @model_validator(mode="after")
    def _switches_match_key(self) -> Row:
        if (self.layernorm, self.residual) != ROW_SWITCHES[self.key]:
            raise ValueError(
                f"row {self.key!r} must have layernorm={ROW_SWITCHES[self.key][0]} and "
                f"residual={ROW_SWITCHES[self.key][1]}"
            )
        return self


class Provenance(_Model):
    """Where the file came from, so a course author can make it again."""

    script: str = Field(description="The program that wrote the file.")
    normdive_version: str
    git_commit: str | None = Field(description="HEAD of the working tree, when known.")
    git_dirty: bool | None = Field(description="Uncommitted changes at recording time.")
    command: str = Field(description="The command line, as typed.")
    python_version: str
    torch_version: str
    platform: str
    device: str = Field(description="What trained the rows (CPU model or CUDA device name).")
    jobs: int = Field(ge=1, description="Rows trained at once.")
    threads_per_job: int = Field(ge=1)
    created_at: str = Field(description="When the file was written (ISO 8601, UTC).")
    wall_s: float = Field(ge=0, description="Wall time of the command that wrote the file.")
    rows_resumed: int = Field(ge=0, description="Rows kept from an interrupted earlier run.")


class Recording(_Model):
    """The 8.5 lesson's recording with the D9 ablation rows in it."""

    format_version: Literal[1]
    lesson: str = Field(description="The lesson this recording belongs to.")
    provenance: Provenance
    config: RunConfig
    seeds: list[int] = Field(description="Every seed recorded; the others give the spread.")
    page_seed: int = Field(description="The seed whose rows the page plays.")
    rows: list[Row] = Field(default_factory=list, description="Keyed by (key, seed).")

    @model_validator(mode="after")
    def _rows_consistent(self) -> Recording:
        if self.page_seed not in self.seeds:
            raise ValueError(f"page_seed {self.page_seed} is not among seeds {self.seeds}")
        seen: set[tuple[str, int]] = set()
        for row in self.rows:
            where = f"row {row.key!r} seed {row.seed}"
            if (row.key, row.seed) in seen:
                raise ValueError(f"{where} appears twice")
            seen.add((row.key, row.seed))
            if row.seed not in self.seeds:
                raise ValueError(f"{where}: seed is not among seeds {self.seeds}")
            for point in row.block_grad_norms:
                if len(point.norms) != self.config.depth:
                    raise ValueError(
                        f"{where}: {len(point.norms)} block gradient norms at step "
                        f"{point.step}, expected depth {self.config.depth}"
                    )
        return self

    def row(self, key: RowKey, seed: int | None = None) -> Row | None:
        """The row with this key at this seed (default: the page's seed), if recorded."""
        layernorm, residual = ROW_SWITCHES[key]
        wanted = self.page_seed if seed is None else seed
        return select_one(
            self.rows, row_settings, layernorm=layernorm, residual=residual, seed=wanted
        )


def row_settings(row: Row) -> dict[str, Setting]:
    """What a row's configuration adds to its file's: its switches and seed."""
    return {"layernorm": row.layernorm, "residual": row.residual, "seed": row.seed}
