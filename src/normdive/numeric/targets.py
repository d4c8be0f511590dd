"""The exact values a learner's six numbers are graded against, and the classic slips.

Mean and variance are exact rationals. The denominator sqrt(variance + eps) is irrational in
general, so it is computed with 50 significant digits of Decimal arithmetic and then converted
to a Fraction exactly; 50 digits leave an error near 1e-50, negligible against a tolerance of
1e-3, so the inclusive boundary test |typed - exact| <= tolerance is decided correctly for any
typed text shorter than 45 significant digits (answers are capped at 64 characters).

Grading a typed value compares integers, never Fractions: for each target p/q and the
tolerance a/b, the products q*b, p*b and a*q are worked out once per process (_Window), and a
typed n/d (a decimal's digits over its power of ten) is within tolerance exactly when
|n*q*b - p*b*d| <= a*q*d, the inequality |n/d - p/q| <= a/b multiplied through by d*q*b > 0.
That is the same verdict exact rational arithmetic gives, for every input, at a fraction of its
cost: no gcd, no new Fraction per comparison (bench/RESULTS.md, "Retired experiments":
grading.py).

A slip is what a learner who made one classic mistake would type for a step: the sum left
undivided, n-1 in place of n, the square root forgotten, a stray minus sign, and so on. A wrong
answer is matched against the slips of its step in SLIPS order, and the first one within
tolerance is reported, so a row where two slips give the same value (n = 2: dividing by n-1 is
not dividing at all) always gets the same feedback. A slip whose value lies within tolerance of
the exact answer is never reported: typing it is simply right.
"""

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
SQRT_DIGITS = 50

# Numbers the targets accept: exact ones only (a float would bring its binary error in).
Exact = int | Fraction | Decimal

SLIPS = (
    "mean_not_divided",  # the sum of the entries, never divided by n
    "mean_divided_by_n_minus_1",  # the sum divided by n - 1
    "variance_n_minus_1",  # the sample variance: squared deviations summed, divided by n - 1
    "variance_not_divided",  # the squared deviations summed, never divided
    "variance_is_std",  # the square root of the variance (the standard deviation)
    "denominator_no_sqrt",  # variance + eps, the square root forgotten
    "denominator_n_minus_1",  # sqrt(sample variance + eps)
    "denominator_not_divided",  # sqrt(sum of squared deviations + eps), n forgotten earlier
    # The right size with a minus sign (a stray "-" or "−"): last in each step, so a classic
    # slip of the same value is named first.
    "mean_sign_flipped",  # -mean
    "variance_negative",  # -variance: a variance is never negative
    "denominator_negative",  # -sqrt(variance + eps): the root is the positive one
)
# Which slips belong to which step, in SLIPS order.
SLIPS_BY_STEP: dict[Step, tuple[str, ...]] = {
    step: tuple(slip for slip in SLIPS if slip.startswith(step)) for step in STEPS
}


@dataclass(frozen=True)
class ExactSteps:
    """The three step results of one row at one eps, exactly (the root to 50 digits)."""

    mean: Fraction
    variance: Fraction  # population, exact
    denominator: Fraction  # sqrt(variance + eps) to SQRT_DIGITS significant digits (Decimal)


@dataclass(frozen=True)
class Grade:
    """The verdict on one typed value for one step."""

    right: bool
    slip: str | None  # the slip the wrong answer matches (within tolerance), if any


def _sqrt(value: Fraction) -> Fraction:
    """sqrt(value) to SQRT_DIGITS significant digits, as an exact Fraction of that Decimal."""
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
    """Mean, population variance and sqrt(variance + eps) of a row, exactly."""
    values = _exact_row(row)
    n = len(values)
    variance = _squared_deviations(values) / n
    return ExactSteps(
        mean=sum(values, Fraction(0)) / n,
        variance=variance,
        denominator=_sqrt(variance + _exact_eps(eps)),
    )


def slip_values(row: Sequence[Exact], eps: Exact, step: Step) -> dict[str, Fraction]:
    """What a learner who made each slip would type for this step of this row.

    Keys are in SLIPS order. Slips that divide by n - 1 are left out for a one-entry row.
    """
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
    """The exact result of one step."""
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
    """|n/d - p/q| <= a/b for a target p/q and a tolerance a/b (q, b > 0), multiplied through
    by d*q*b so that each typed n/d (d > 0) costs three integer products and no division."""

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
    """One step of one row at one eps and tolerance, ready to grade: the exact answer's window,
    and the window of each slip that differs from the exact answer by more than the tolerance,
    in SLIPS order (a slip within tolerance of the answer is never reported)."""

    exact: _Window
    slips: tuple[tuple[str, _Window], ...]


@functools.lru_cache(maxsize=256)
def _targets(row: tuple[Exact, ...], eps: Exact, step: Step, tolerance: Exact) -> _Targets:
    """Exact square roots cost a fraction of a millisecond each, and every check of the six
    numbers asks for the same few rows of the lesson at one tolerance, so each step's targets
    are computed once per process (bench/RESULTS.md, "Load")."""
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
    """Right when |value - exact| <= tolerance; otherwise the first slip in SLIPS order that the
    value matches within tolerance, among slips that differ from the exact answer by more.
    The value is any exact n/d: a Fraction, an int, or a ParsedAnswer as typed."""
    targets = _targets(tuple(row), eps, step, tolerance)
    if targets.exact.holds(value):
        return Grade(right=True, slip=None)
    for slip, window in targets.slips:
        if window.holds(value):
            return Grade(right=False, slip=slip)
    return Grade(right=False, slip=None)
