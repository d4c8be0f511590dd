"""The independent reference for grading a typed answer: every value a Fraction, every
comparison exact rational arithmetic, as numeric/answers.py and numeric/targets.py graded before
they compared scaled integers. tests/test_numeric_grading.py holds the two to the same verdicts
and texts for every input; bench/RESULTS.md ("Retired experiments": grading.py) gives what
timing one against the other found.

A decimal is Python's own Decimal(text), its canonical text Decimal.normalize() formatted; a
fraction is Fraction(top) / Fraction(bottom). Only what a valid answer is worth is modelled
here: the format errors' texts are held by tests/test_numeric_answers.py.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
from decimal import Context, Decimal
from fractions import Fraction

from normdive.numeric.answers import MAX_ANSWER_CHARS
from normdive.numeric.targets import Exact, Grade, Step, exact_value, slip_values

# Decimal.normalize() rounds to its context's precision: this one keeps every typed digit.
EXACT_CONTEXT = Context(prec=MAX_ANSWER_CHARS)
# Canonical text is positional while the decimal exponent stays within this many decades.
CANONICAL_POSITIONAL_DECADES = 30


def canonical_decimal(number: Decimal) -> str:
    if number == 0:
        return "0"
    normal = number.normalize(EXACT_CONTEXT)
    if abs(normal.adjusted()) <= CANONICAL_POSITIONAL_DECADES:
        return format(normal, "f")
    return format(normal, "E")


def reference_parse(text: str) -> tuple[Fraction, str]:
    """(value, canonical text) of an answer that numeric.answers accepts; the caller checks
    that it is accepted (Decimal reads more than the lesson's answers allow)."""
    cleaned = unicodedata.normalize("NFKC", text).strip().replace("\u2212", "-")
    if "/" not in cleaned:
        number = Decimal(cleaned)
        return Fraction(number), canonical_decimal(number)
    top, _, bottom = cleaned.partition("/")
    negative = top.startswith("-")
    top = top.removeprefix("-" if negative else "+").strip()
    value = Fraction(Decimal(top)) / Fraction(Decimal(bottom.strip()))
    value = -value if negative else value
    return value, str(value)


def reference_within(value: Fraction, exact: Fraction, tolerance: Fraction) -> bool:
    return abs(value - exact) <= tolerance


@functools.lru_cache(maxsize=256)
def _targets(
    row: tuple[Exact, ...], eps: Exact, step: Step
) -> tuple[Fraction, tuple[tuple[str, Fraction], ...]]:
    """Computed once per process, as the graded targets are: the reference pays for the
    comparisons, not for square roots."""
    return exact_value(row, eps, step), tuple(slip_values(row, eps, step).items())


def reference_grade(
    value: Fraction, row: Sequence[Exact], eps: Exact, step: Step, tolerance: Exact
) -> Grade:
    """Right when |value - exact| <= tolerance; otherwise the first slip in SLIPS order within
    tolerance of the value, among slips further than the tolerance from the exact answer."""
    exact, slips = _targets(tuple(row), eps, step)
    allowed = Fraction(tolerance)
    if reference_within(value, exact, allowed):
        return Grade(right=True, slip=None)
    for slip, slip_value in slips:
        distinct = not reference_within(slip_value, exact, allowed)
        if distinct and reference_within(value, slip_value, allowed):
            return Grade(right=False, slip=slip)
    return Grade(right=False, slip=None)
