"""Layer norm as the steps a learner does by hand, exactly.

A row is decimals (what a learner types, what the lesson holds), so its steps are rationals,
computed here without any rounding:

    mean        = (x0 + x1 + ... + x(n-1)) / n
    variance    = (d0*d0 + d1*d1 + ...) / n              d = x - mean, population variance
    denominator = sqrt(variance + eps)
    normalised  = d / denominator                        0/0 when variance + eps is 0

The square roots are kept as their squares: the denominator as variance + eps, each output
as d*d / (variance + eps) with d's sign. Nothing is rounded until display.py writes a value
with six decimals, once, from the exact value. So a row of equal entries has a variance of
exactly 0 (0.1, 0.1, 0.1 as well as 4, 4, 4, 4: in binary floating point the mean of three
0.1s is not 0.1, and the residue divided by its own root gave +-1), and without the epsilon
every output is 0/0, not a number. static/layernorm.js computes the same rationals with BigInt,
so the two twins show the same text, digit for digit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

# The numbers a row and an epsilon may be: exact ones only (a float would bring its binary
# rounding in: Fraction(0.1) is not one tenth).
Exact = int | Fraction | Decimal


@dataclass(frozen=True)
class Root:
    """A square root, exactly: sqrt(square), or -sqrt(square) when negative."""

    square: Fraction  # >= 0
    negative: bool = False


@dataclass(frozen=True)
class LayerNormSteps:
    """The four results a learner reads, plus what they were computed from, all exact."""

    row: tuple[Fraction, ...]  # (n,)
    eps: Fraction
    mean: Fraction  # sum(row) / n
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
    # variance + eps is 0 only when every deviation is 0 and eps is 0: each output is 0/0.
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
