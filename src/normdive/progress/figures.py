"""How the ablation's figures read in a sentence: percentages, losses and shares.

Measured figures (a row's final accuracy) get one decimal: the held-out set has 256 x 16 =
4,096 copied tokens, so one step of accuracy is about 0.02 %, and one decimal is as much as a
learner can use at a glance. Exact figures the lesson states (band edges) are written exactly,
with no trailing zeros: 90 %, 12.5 %, 6.25 %. Shares of learners are whole percentages.
Non-finite values are spelled in words, as everywhere on the page (normdive.numeric.display).
A space separates a number from its percent sign, as the course writes "15-25 %".
Each figure is written in the current locale (i18n.numbers.shown_in: "21,3 %" in German);
exports for machines do not come here.
"""

from __future__ import annotations

import math
from decimal import Decimal

from normdive.i18n.numbers import shown, shown_in
from normdive.numeric.display import non_finite_words

# Decimals of a measured percentage and of a loss.
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
