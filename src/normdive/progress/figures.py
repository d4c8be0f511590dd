"""How the ablation's figures read in a sentence, in the current locale. A measured figure gets
one decimal: 256 x 16 held-out tokens make a step of about 0.02 %, and one decimal is what a
learner can use at a glance. Band edges are exact; a space before "%", as in "15-25 %"."""

from __future__ import annotations

import math
from decimal import Decimal

from normdive.i18n.numbers import shown, shown_in
from normdive.numeric.display import non_finite_words

PERCENT_DECIMALS = 1
LOSS_DECIMALS = 3


def percent(fraction: float) -> str:
    """A measured fraction as a percentage: 0.2134 -> "21.3 %", 1.0 -> "100.0 %"."""
    if not math.isfinite(fraction):
        return shown(non_finite_words(fraction))
    text = f"{fraction * 100:.{PERCENT_DECIMALS}f}"
    return shown_in(f"{'0.0' if text == '-0.0' else text} %")


def exact_percent(fraction: Decimal) -> str:
    """An exact fraction as a percentage without trailing zeros: 0.0625 -> "6.25 %"."""
    scaled = (fraction * 100).normalize()
    # normalize() writes 100 as 1E+2; quantize back to a plain integer when it is one.
    if scaled == scaled.to_integral_value():
        scaled = scaled.quantize(Decimal(1))
    return shown_in(f"{scaled:f} %")


def loss(value: float) -> str:
    """A loss to three decimals: 0.01234 -> "0.012"; non-finite in words."""
    if not math.isfinite(value):
        return shown(non_finite_words(value))
    return shown_in(f"{value:.{LOSS_DECIMALS}f}")


def share(count: int, total: int) -> str:
    """count / total as a whole percentage: (3, 7) -> "43 %"; (0, 0) -> "0 %"."""
    if total <= 0:
        return "0 %"
    return f"{round(100 * count / total)} %"
