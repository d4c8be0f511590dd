"""How numbers are shown: computed ones with six decimals, rounded once from the exact value,
ties to even (static/layernorm.js too, in BigInt); typed ones as ECMAScript's Number::toString
(ECMA-262, 6.1.6.1.20); non-finite ones in words, for screen readers."""

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
ZERO = f"{0:.{DECIMALS}f}"
_SCALE: int = 10**DECIMALS

# Number::toString is positional for decimal exponents n in (-6, 21], scientific beyond.
_POSITIONAL_MAX_EXPONENT = 21
_POSITIONAL_MIN_EXPONENT = -6


def non_finite_words(x: float) -> str:
    if math.isnan(x):
        return NOT_A_NUMBER
    return INFINITY if x > 0 else MINUS_INFINITY


Shown = float | Fraction | Root | None  # None: 0/0


def _units_text(units: int, negative: bool) -> str:
    if units == 0:
        return ZERO
    digits = str(units).rjust(DECIMALS + 1, "0")
    return f"{'-' if negative else ''}{digits[:-DECIMALS]}.{digits[-DECIMALS:]}"


def _rational_units(value: Fraction) -> int:
    quotient, remainder = divmod(abs(value.numerator) * _SCALE, value.denominator)
    twice = 2 * remainder
    if twice > value.denominator or (twice == value.denominator and quotient % 2 == 1):
        quotient += 1
    return quotient


def _root_units(square: Fraction) -> int:
    """round(sqrt(square) * 10**DECIMALS), ties to even: with a/b = square * 10**12 and
    k = isqrt(a // b), it rounds up when 4a > b(2k + 1)**2; equality is a tie."""
    a, b = square.numerator * _SCALE * _SCALE, square.denominator
    k = math.isqrt(a // b)
    beyond = 4 * a - b * (2 * k + 1) ** 2
    return k + 1 if beyond > 0 or (beyond == 0 and k % 2 == 1) else k


def format_number(x: Shown) -> str:
    if x is None:
        return NOT_A_NUMBER
    if isinstance(x, Root):
        return _units_text(_root_units(x.square), x.negative)
    if isinstance(x, Fraction):
        return _units_text(_rational_units(x), x < 0)
    if not math.isfinite(x):
        return non_finite_words(x)
    text = f"{x:.{DECIMALS}f}"
    # -0.0 and -1e-9 round to "-0.000000": a zero has no sign on the page.
    return ZERO if text == "-" + ZERO else text


def format_row(xs: Sequence[Shown]) -> str:
    return "[" + ", ".join(format_number(x) for x in xs) + "]"


def variance_too_small_to_show(steps: LayerNormSteps) -> bool:
    """Said on the page, or a learner reads a 0/0 that is not one (a row like 1e-7, 2e-7)."""
    return steps.variance != 0 and format_number(steps.variance) == ZERO


def format_input_number(x: float | int | Decimal | Fraction) -> str:
    """As String(x) writes it (3, 2.5, 1e-7, 1.5e+300); a Decimal with every digit it has."""
    if isinstance(x, Fraction):
        return str(x)
    if isinstance(x, float) and not math.isfinite(x):
        return non_finite_words(x)
    if x == 0:
        return "0"  # also -0, like String(-0)
    # repr gives a float's shortest digits that round-trip, as ECMAScript's algorithm requires.
    sign, digit_tuple, exponent = Decimal(repr(x) if isinstance(x, float) else x).as_tuple()
    assert isinstance(exponent, int)
    written = "".join(str(d) for d in digit_tuple)
    # Not Decimal.normalize, which would round to its context's 28 digits.
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
    return "[" + ", ".join(format_input_number(x) for x in xs) + "]"
