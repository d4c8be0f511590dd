"""The exact values a learner's six numbers are graded against, in integers (_Window), and the
classic slips: what a learner who made one mistake would type, matched in SLIPS order."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction
from typing import Literal

from normdive.numeric.answers import Ratio, within_tolerance

Step = Literal["mean", "variance", "denominator"]
STEPS: tuple[Step, ...] = ("mean", "variance", "denominator")
# An error near 1e-50 decides |typed - exact| <= 1e-3 right for any answer under 45 digits.
SQRT_DIGITS = 50

Exact = int | Fraction | Decimal

SLIPS = (
    "mean_not_divided",
    "mean_divided_by_n_minus_1",
    "variance_n_minus_1",
    "variance_not_divided",
    "variance_is_std",
    "denominator_no_sqrt",
    "denominator_n_minus_1",
    "denominator_not_divided",
    # Sign flips last in each step, so a classic slip of the same value is named first.
    "mean_sign_flipped",
    "variance_negative",
    "denominator_negative",
)
SLIPS_BY_STEP: dict[Step, tuple[str, ...]] = {
    step: tuple(slip for slip in SLIPS if slip.startswith(step)) for step in STEPS
}


@dataclass(frozen=True)
class ExactSteps:
    mean: Fraction
    variance: Fraction
    denominator: Fraction  # sqrt(variance + eps) to SQRT_DIGITS significant digits (Decimal)


@dataclass(frozen=True)
class Grade:
    right: bool
    slip: str | None  # the slip the wrong answer matches (within tolerance), if any


def _sqrt(value: Fraction) -> Fraction:
    context = Context(prec=SQRT_DIGITS)
    quotient = context.divide(Decimal(value.numerator), Decimal(value.denominator))
    return Fraction(context.sqrt(quotient))


def _exact_row(row: Sequence[Exact]) -> tuple[Fraction, ...]:
    values = tuple(Fraction(x) for x in row)  # (n,)
    if not values:
        raise ValueError("a row needs at least one number")
    return values


def _exact_eps(eps: Exact) -> Fraction:
    value = Fraction(eps)
    if value < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    return value


def _squared_deviations(values: tuple[Fraction, ...]) -> Fraction:
    mean = sum(values, Fraction(0)) / len(values)
    return sum(((x - mean) ** 2 for x in values), Fraction(0))


def exact_steps(row: Sequence[Exact], eps: Exact) -> ExactSteps:
    values = _exact_row(row)
    n = len(values)
    variance = _squared_deviations(values) / n
    return ExactSteps(
        mean=sum(values, Fraction(0)) / n,
        variance=variance,
        denominator=_sqrt(variance + _exact_eps(eps)),
    )


def slip_values(row: Sequence[Exact], eps: Exact, step: Step) -> dict[str, Fraction]:
    """What a learner who made each slip would type, in SLIPS order (none by n - 1 for n = 1)."""
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}; the steps are {', '.join(STEPS)}")
    values = _exact_row(row)
    eps_value = _exact_eps(eps)
    n = len(values)
    total = sum(values, Fraction(0))
    squares = _squared_deviations(values)
    variance = squares / n
    candidates: dict[str, Callable[[], Fraction]] = {
        "mean_not_divided": lambda: total,
        "mean_divided_by_n_minus_1": lambda: total / (n - 1),
        "variance_n_minus_1": lambda: squares / (n - 1),
        "variance_not_divided": lambda: squares,
        "variance_is_std": lambda: _sqrt(variance),
        "denominator_no_sqrt": lambda: variance + eps_value,
        "denominator_n_minus_1": lambda: _sqrt(squares / (n - 1) + eps_value),
        "denominator_not_divided": lambda: _sqrt(squares + eps_value),
        "mean_sign_flipped": lambda: -total / n,
        "variance_negative": lambda: -variance,
        "denominator_negative": lambda: -_sqrt(variance + eps_value),
    }
    return {
        slip: candidates[slip]() for slip in SLIPS_BY_STEP[step] if n > 1 or "n_minus_1" not in slip
    }


def exact_value(row: Sequence[Exact], eps: Exact, step: Step) -> Fraction:
    steps = exact_steps(row, eps)
    if step == "mean":
        return steps.mean
    if step == "variance":
        return steps.variance
    if step == "denominator":
        return steps.denominator
    raise ValueError(f"unknown step {step!r}; the steps are {', '.join(STEPS)}")


@dataclass(frozen=True)
class _Window:
    """|n/d - p/q| <= a/b multiplied through by d*q*b > 0: three integer products, no division."""

    scaled_denominator: int  # q*b
    scaled_numerator: int  # p*b
    scaled_tolerance: int  # a*q

    @classmethod
    def around(cls, target: Fraction, tolerance: Fraction) -> _Window:
        return cls(
            scaled_denominator=target.denominator * tolerance.denominator,
            scaled_numerator=target.numerator * tolerance.denominator,
            scaled_tolerance=tolerance.numerator * target.denominator,
        )

    def holds(self, value: Ratio) -> bool:
        denominator = value.denominator
        distance = value.numerator * self.scaled_denominator - self.scaled_numerator * denominator
        return abs(distance) <= self.scaled_tolerance * denominator


@dataclass(frozen=True)
class _Targets:
    """The exact answer's window, and each slip's that is further than the tolerance from it."""

    exact: _Window
    slips: tuple[tuple[str, _Window], ...]


@functools.lru_cache(maxsize=256)
def _targets(row: tuple[Exact, ...], eps: Exact, step: Step, tolerance: Exact) -> _Targets:
    """Cached: exact roots cost a fraction of a millisecond, and every check asks for the same
    few rows (bench/RESULTS.md, "Load")."""
    exact = exact_value(row, eps, step)
    allowed = Fraction(tolerance)
    if allowed < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    slips = tuple(
        (slip, _Window.around(value, allowed))
        for slip, value in slip_values(row, eps, step).items()
        if not within_tolerance(value, exact, allowed)
    )
    return _Targets(exact=_Window.around(exact, allowed), slips=slips)


def grade(value: Ratio, row: Sequence[Exact], eps: Exact, step: Step, tolerance: Exact) -> Grade:
    """Right within tolerance; else the first slip in SLIPS order that the value matches."""
    targets = _targets(tuple(row), eps, step, tolerance)
    if targets.exact.holds(value):
        return Grade(right=True, slip=None)
    for slip, window in targets.slips:
        if window.holds(value):
            return Grade(right=False, slip=slip)
    return Grade(right=False, slip=None)
