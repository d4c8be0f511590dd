"""Layer norm as the steps a learner does by hand, exactly: rationals, square roots kept as
their squares, nothing rounded until display.py (static/layernorm.js does the same in BigInt).
So equal entries have a variance of exactly 0, where floats give +-1 (3 x 0.1 / 3 != 0.1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

# Exact numbers only: Fraction(0.1) is not one tenth.
Exact = int | Fraction | Decimal


@dataclass(frozen=True)
class Root:
    square: Fraction  # >= 0
    negative: bool = False


@dataclass(frozen=True)
class LayerNormSteps:
    row: tuple[Fraction, ...]  # (n,)
    eps: Fraction
    mean: Fraction
    variance: Fraction  # population: sum((x - mean)**2) / n
    denominator: Root  # sqrt(variance + eps)
    normalised: tuple[Root | None, ...]  # (n,)  (x - mean) / denominator; None: 0/0


def _exact(x: Exact) -> Fraction:
    if isinstance(x, float):
        raise TypeError(f"layer norm takes exact numbers (int, Decimal, Fraction), not {x!r}")
    if isinstance(x, Decimal) and not x.is_finite():
        raise ValueError(f"every number must be finite, got {x}")
    return Fraction(x)


def layer_norm_steps(row: Sequence[Exact], eps: Exact) -> LayerNormSteps:
    """Normalise one row step by step. Raises ValueError for an empty row or a bad eps."""
    values = tuple(_exact(x) for x in row)  # (n,)
    n = len(values)
    if n == 0:
        raise ValueError("layer norm needs at least one number in the row")
    eps_value = _exact(eps)
    if eps_value < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps}")
    mean = sum(values, Fraction(0)) / n
    deviations = tuple(x - mean for x in values)  # (n,)
    variance = sum((d * d for d in deviations), Fraction(0)) / n
    under_root = variance + eps_value
    normalised = tuple(
        None if under_root == 0 else Root(square=d * d / under_root, negative=d < 0)
        for d in deviations
    )
    return LayerNormSteps(
        row=values,
        eps=eps_value,
        mean=mean,
        variance=variance,
        denominator=Root(square=under_root),
        normalised=normalised,
    )
