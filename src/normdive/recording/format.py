"""The pieces every run of the recording format shares: its settings (`RunConfig`), the
ablation's rows (`RowKey`), curve figures (`Measure`), block gradient norms and provenance.
The file itself is a file of runs (recording/runs.py). Torch-free on purpose: the web app
reads these models, and it never imports torch.

JSON has no NaN or infinity, and a diverged run is a result worth showing, so every measured
figure is a `Measure`: a number when finite, otherwise one of the strings "nan", "inf",
"-inf". Nothing non-finite is ever dropped.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

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


def recorded(value: float | str | None) -> float:
    """A figure the file's plan records (the ablation's and the sweep's exact match), as a
    float; ValueError for one left unrecorded, which the plan refuses when it is read."""
    if value is None:
        raise ValueError("a figure the plan records is missing")
    return as_float(value)


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


class BlockGradNorms(_Model):
    """Each block's gradient norm (before clipping) at one update, first block first."""

    step: int = Field(ge=1, description="The update whose gradient this is (1 = the first).")
    norms: list[Measure]


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
