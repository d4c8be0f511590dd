"""Layer norm as the steps a learner does by hand, in float64.

The order of operations is fixed, and static/layernorm.js repeats it line for line, so that the
browser and the server produce bit-identical numbers:

    total       = ((0 + x0) + x1) + ... + x(n-1)          left to right, no compensation
    mean        = total / n
    squares     = ((0 + d0*d0) + d1*d1) + ...             d = x - mean, left to right
    variance    = squares / n                             population variance (divide by n)
    denominator = sqrt(variance + eps)                    IEEE sqrt, correctly rounded
    normalised  = (x - mean) / denominator                IEEE division: 0/0 is NaN

Every step is a single IEEE 754 binary64 operation (+, -, *, /, sqrt), each correctly rounded
in both Python and JavaScript, so the two languages cannot drift apart. Two Python pitfalls are
avoided on purpose: `sum()` of floats is compensated from Python 3.12 on (JavaScript has no
such thing), and `d ** 2` raises OverflowError where `d * d` gives infinity like JavaScript.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LayerNormSteps:
    """The four results a learner reads, plus what they were computed from."""

    row: tuple[float, ...]  # (n,)
    eps: float
    mean: float  # sum(row) / n, summed left to right
    variance: float  # population: sum((x - mean)**2) / n, left to right
    denominator: float  # math.sqrt(variance + eps)
    normalised: tuple[float, ...]  # (n,)  (x - mean) / denominator; NaN when 0/0


def ieee_divide(numerator: float, denominator: float) -> float:
    """`numerator / denominator` with IEEE 754 semantics, as JavaScript computes it.

    Python raises ZeroDivisionError for a zero divisor; IEEE 754 (section 7.3) gives NaN for
    0/0 and a signed infinity for a nonzero finite value over zero.
    """
    if denominator != 0.0:
        return numerator / denominator
    if numerator == 0.0 or math.isnan(numerator):
        return math.nan
    # Sign of the result: exclusive or of the two signs (a zero divisor keeps its sign bit).
    negative = (math.copysign(1.0, numerator) < 0) != (math.copysign(1.0, denominator) < 0)
    return -math.inf if negative else math.inf


def layer_norm_steps(row: Sequence[float], eps: float) -> LayerNormSteps:
    """Normalise one row step by step. Raises ValueError for an empty row or a bad eps."""
    values = tuple(float(x) for x in row)  # (n,)
    n = len(values)
    if n == 0:
        raise ValueError("layer norm needs at least one number in the row")
    eps = float(eps)
    if not (math.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")

    total = 0.0
    for x in values:
        total += x
    mean = total / n  # n is an int, converted exactly; n >= 1 so no zero division

    squares = 0.0
    for x in values:
        deviation = x - mean
        squares += deviation * deviation
    variance = squares / n

    # variance is a sum of squares (>= 0 or NaN) and eps >= 0, so sqrt never sees a negative.
    denominator = math.sqrt(variance + eps)
    normalised = tuple(ieee_divide(x - mean, denominator) for x in values)  # (n,)
    return LayerNormSteps(
        row=values,
        eps=eps,
        mean=mean,
        variance=variance,
        denominator=denominator,
        normalised=normalised,
    )
