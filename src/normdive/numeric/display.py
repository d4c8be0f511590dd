"""How numbers are shown to a learner.

Computed numbers get six decimals, fixed, rounded once from the exact value with ties to even:
a rational (layernorm's mean and variance, a Fraction), an exact square root (layernorm.Root)
or a float's exact binary value (what Python's `format` does). static/layernorm.js does the same
with BigInt arithmetic (JavaScript's `toFixed` breaks ties away from zero). Non-finite values
are spelled in words so a screen reader says them properly, and a negative zero never shows its
sign.

Rows a learner typed are shown the way they were meant: integers without decimals, other
numbers with the digits typed (a float with its shortest round-trip digits), following
ECMAScript's Number::toString layout (ECMA-262, section 6.1.6.1.20), so that for a float the
browser's `String(x)` gives the same text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

from normdive.numeric.layernorm import LayerNormSteps, Root

DECIMALS = 6
NOT_A_NUMBER = "not a number"
INFINITY = "infinity"
MINUS_INFINITY = "minus infinity"
ZERO = f"{0:.{DECIMALS}f}"  # "0.000000"
_SCALE: int = 10**DECIMALS

# ECMAScript's Number::toString writes positional notation for decimal exponents n in
# (-6, 21] (value = 0.d1d2... x 10**n) and scientific notation outside that range.
_POSITIONAL_MAX_EXPONENT = 21
_POSITIONAL_MIN_EXPONENT = -6


def non_finite_words(x: float) -> str:
    """A non-finite value in words: "not a number", "infinity", "minus infinity"."""
    if math.isnan(x):
        return NOT_A_NUMBER
    return INFINITY if x > 0 else MINUS_INFINITY


# A value the page shows: a float, a rational, an exact square root, or None for 0/0.
Shown = float | Fraction | Root | None


def _units_text(units: int, negative: bool) -> str:
    """|value| * 10**DECIMALS, rounded, as text: 1224736 -> "1.224736"."""
    if units == 0:
        return ZERO  # also -0 and tiny negatives: a zero has no sign on the page
    digits = str(units).rjust(DECIMALS + 1, "0")
    return f"{'-' if negative else ''}{digits[:-DECIMALS]}.{digits[-DECIMALS:]}"


def _rational_units(value: Fraction) -> int:
    """round(|value| * 10**DECIMALS), ties to even."""
    quotient, remainder = divmod(abs(value.numerator) * _SCALE, value.denominator)
    twice = 2 * remainder
    if twice > value.denominator or (twice == value.denominator and quotient % 2 == 1):
        quotient += 1
    return quotient


def _root_units(square: Fraction) -> int:
    """round(sqrt(square) * 10**DECIMALS), ties to even, in integers: with a/b = square * 10**12
    and k = isqrt(a // b) = floor(sqrt(a/b)), the root rounds up when a/b > (k + 1/2)**2, that
    is 4a > b(2k + 1)**2; equality is a tie (the root is then rational)."""
    a, b = square.numerator * _SCALE * _SCALE, square.denominator
    k = math.isqrt(a // b)
    beyond = 4 * a - b * (2 * k + 1) ** 2
    return k + 1 if beyond > 0 or (beyond == 0 and k % 2 == 1) else k


def format_number(x: Shown) -> str:
    """Six decimals fixed: 0.816503, -1.224736; "not a number", "infinity", "minus infinity"."""
    if x is None:
        return NOT_A_NUMBER
    if isinstance(x, Root):
        return _units_text(_root_units(x.square), x.negative)
    if isinstance(x, Fraction):
        return _units_text(_rational_units(x), x < 0)
    if not math.isfinite(x):
        return non_finite_words(x)
    text = f"{x:.{DECIMALS}f}"
    # -0.0 and tiny negatives like -1e-9 round to "-0.000000": a zero has no sign on the page.
    return ZERO if text == "-" + ZERO else text


def format_row(xs: Sequence[Shown]) -> str:
    """ "[-1.224736, 0.000000, 1.224736]"."""
    return "[" + ", ".join(format_number(x) for x in xs) + "]"


def variance_too_small_to_show(steps: LayerNormSteps) -> bool:
    """The variance is above 0 but shows as 0.000000 (a row like 1e-7, 2e-7): the page says so,
    or a learner reads a 0/0 that is not one."""
    return steps.variance != 0 and format_number(steps.variance) == ZERO


def format_input_number(x: float | int | Decimal | Fraction) -> str:
    """A typed number as JavaScript's String(x) writes it: 3, 2.5, 0.001, 1e-7, 1.5e+300. A
    Decimal keeps every digit it has, in the same layout: 0.10000000000000000001. A typed
    fraction is written in lowest terms: 2/3, -3/8, 2 (static/layernorm.js writes the same)."""
    if isinstance(x, Fraction):
        return str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return non_finite_words(x)
    if x == 0:
        return "0"  # also -0, like String(-0)
    # repr gives a float's shortest digits that round-trip, as ECMAScript's algorithm requires.
    sign, digit_tuple, exponent = Decimal(repr(x) if isinstance(x, float) else x).as_tuple()
    assert isinstance(exponent, int)  # finite, so never 'n' / 'N' / 'F'
    written = "".join(str(d) for d in digit_tuple)
    # Without the trailing zeros (Decimal.normalize would also round to its context's 28 digits).
    digits = written.rstrip("0")
    exponent += len(written) - len(digits)
    k = len(digits)
    n = exponent + k  # value = 0.digits x 10**n
    if k <= n <= _POSITIONAL_MAX_EXPONENT:
        body = digits + "0" * (n - k)
    elif 0 < n <= _POSITIONAL_MAX_EXPONENT:
        body = digits[:n] + "." + digits[n:]
    elif _POSITIONAL_MIN_EXPONENT < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"
    return ("-" if sign else "") + body


def format_input_row(xs: Sequence[float | int | Decimal | Fraction]) -> str:
    """ "[1, 2, 3]", "[2.5, -1, 1e-7]": the row as the learner would have typed it."""
    return "[" + ", ".join(format_input_number(x) for x in xs) + "]"
