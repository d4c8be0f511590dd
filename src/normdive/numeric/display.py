"""How numbers are shown to a learner.

Computed numbers get six decimals, fixed, rounded from the exact binary value with ties to even
(what Python's `format` does; static/layernorm.js reproduces it with BigInt arithmetic because
JavaScript's `toFixed` breaks ties away from zero). Non-finite values are spelled in words so a
screen reader says them properly, and a negative zero never shows its sign.

Rows a learner typed are shown the way they were meant: integers without decimals, other
numbers in their shortest round-trip form, following ECMAScript's Number::toString layout
(ECMA-262, section 6.1.6.1.20) so the browser's `String(x)` gives the same text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

DECIMALS = 6
NOT_A_NUMBER = "not a number"
INFINITY = "infinity"
MINUS_INFINITY = "minus infinity"
ZERO = f"{0:.{DECIMALS}f}"  # "0.000000"

# ECMAScript's Number::toString writes positional notation for decimal exponents n in
# (-6, 21] (value = 0.d1d2... x 10**n) and scientific notation outside that range.
_POSITIONAL_MAX_EXPONENT = 21
_POSITIONAL_MIN_EXPONENT = -6


def non_finite_words(x: float) -> str:
    """A non-finite value in words: "not a number", "infinity", "minus infinity"."""
    if math.isnan(x):
        return NOT_A_NUMBER
    return INFINITY if x > 0 else MINUS_INFINITY


def format_number(x: float) -> str:
    """Six decimals fixed: 0.816503, -1.224736; "not a number", "infinity", "minus infinity"."""
    if not math.isfinite(x):
        return non_finite_words(x)
    text = f"{x:.{DECIMALS}f}"
    # -0.0 and tiny negatives like -1e-9 round to "-0.000000": a zero has no sign on the page.
    return ZERO if text == "-" + ZERO else text


def format_row(xs: Sequence[float]) -> str:
    """ "[-1.224736, 0.000000, 1.224736]"."""
    return "[" + ", ".join(format_number(x) for x in xs) + "]"


def format_input_number(x: float) -> str:
    """A typed number as JavaScript's String(x) writes it: 3, 2.5, 0.001, 1e-7, 1.5e+300."""
    if not math.isfinite(x):
        return non_finite_words(x)
    if x == 0:
        return "0"  # also -0, like String(-0)
    # repr gives the shortest digits that round-trip, as ECMAScript's algorithm requires.
    sign, digit_tuple, exponent = Decimal(repr(x)).normalize().as_tuple()
    assert isinstance(exponent, int)  # finite, so never 'n' / 'N' / 'F'
    digits = "".join(str(d) for d in digit_tuple)
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


def format_input_row(xs: Sequence[float]) -> str:
    """ "[1, 2, 3]", "[2.5, -1, 1e-7]": the row as the learner would have typed it."""
    return "[" + ", ".join(format_input_number(x) for x in xs) + "]"
