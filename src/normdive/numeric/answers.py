"""Parsing a typed answer, PrairieLearn style: the raw text and the parsed value are kept apart,
and a format error costs the learner nothing.

The value is exact: a decimal goes through `Decimal(text)` and a fraction through integer or
decimal parts, never through a float, so "0.501" is exactly 501/1000 and lands within 0.001 of
0.5 (inclusive), while "0.5011" does not.

Guards against hostile input come before any arithmetic: the length limit first, then the
exponent's size (a string like "1e999999999" would otherwise build a billion-digit integer).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction

MAX_ANSWER_CHARS = 64
# |exponent| beyond this is rejected before building a number: float64 spans about 1e-324 to
# 1e308, and a 64-character mantissa moves the value by at most 64 more decades.
MAX_ABS_EXPONENT = 400
# Beyond float64's range the page could never show or compare the value sensibly.
LARGEST_VALUE = Fraction(sys.float_info.max)
# Canonical text is positional while the decimal exponent stays within this many decades.
_CANONICAL_POSITIONAL_DECADES = 30
# normalize() rounds to its context's precision (28 digits by default); an answer holds at most
# MAX_ANSWER_CHARS digits, so this context keeps every one and the canonical text stays exact.
_EXACT_CONTEXT = Context(prec=MAX_ANSWER_CHARS)

UNICODE_MINUS = "\u2212"
_DECIMAL = re.compile(
    r"(?P<sign>[+-]?)(?P<mantissa>[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE](?P<exponent>[+-]?[0-9]+))?"
)
_COMMA_DECIMAL = re.compile(r"[+-]?[0-9]*,[0-9]+")
_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity|∞)", re.IGNORECASE)
_EXAMPLES = "Write a number such as 0.667, -1.5, 2/3 or 1e-3."
_FRACTION_HELP = "Write a fraction as one plain number over another, like 2/3 or -1.5/4."


@dataclass(frozen=True)
class ParsedAnswer:
    """What the learner typed, and the exact value it stands for."""

    raw: str
    value: Fraction  # exact value of what was typed ("2/3" -> Fraction(2, 3))
    canonical: str  # normalised text of the value: "0.6667", "2/3", "-1.5", "1E-40"


@dataclass(frozen=True)
class FormatError:
    """Why the text is not a number we can grade, and how to write it."""

    raw: str
    message: str  # what is wrong and how to write it, for a learner


class _Unparseable(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _parse_decimal(text: str, *, in_fraction: bool = False) -> Decimal:
    """One decimal number, exactly, or _Unparseable with a learner-facing message."""
    match = _DECIMAL.fullmatch(text)
    if match is None:
        raise _Unparseable(f"That is not a number. {_EXAMPLES}")
    exponent = match.group("exponent")
    if in_fraction and (exponent is not None or match.group("sign")):
        # Keeps the canonical "p/q" short and the sign in one place.
        raise _Unparseable(_FRACTION_HELP)
    # Checked on the digits before int() and Decimal() run: this is the DoS guard.
    if exponent is not None:
        digits = exponent.lstrip("+-").lstrip("0")
        if len(digits) > len(str(MAX_ABS_EXPONENT)) or int(digits or "0") > MAX_ABS_EXPONENT:
            raise _Unparseable(
                f"That exponent is out of range: keep it between -{MAX_ABS_EXPONENT} and "
                f"{MAX_ABS_EXPONENT}."
            )
    return Decimal(text)


def _parse_fraction(text: str) -> Fraction:
    """ "2/3", "-1.5/4", "+2 / 3": plain decimals on both sides, one optional sign in front."""
    top, _, bottom = text.partition("/")
    negative = top.startswith("-")
    top = top.removeprefix("-" if negative else "+").strip()
    bottom = bottom.strip()
    if "/" in bottom:
        raise _Unparseable(_FRACTION_HELP)
    numerator = _parse_decimal(top, in_fraction=True)
    denominator = _parse_decimal(bottom, in_fraction=True)
    if denominator == 0:
        raise _Unparseable("That divides by zero: the number under the / cannot be 0.")
    value = Fraction(numerator) / Fraction(denominator)
    return -value if negative else value


def _canonical_decimal(number: Decimal) -> str:
    if number == 0:
        return "0"
    normal = number.normalize(_EXACT_CONTEXT)
    if abs(normal.adjusted()) <= _CANONICAL_POSITIONAL_DECADES:
        return format(normal, "f")
    return format(normal, "E")


def parse_answer(raw: str) -> ParsedAnswer | FormatError:
    """Parse " 2 ", "+2", "−1.5", "2/3", "6.67E-1" exactly; anything unusable -> FormatError."""
    if len(raw) > MAX_ANSWER_CHARS:
        return FormatError(
            raw,
            f"That is too long: an answer can be at most {MAX_ANSWER_CHARS} characters "
            f"(this one has {len(raw)}).",
        )
    text = raw.strip().replace(UNICODE_MINUS, "-")
    if not text:
        return FormatError(raw, f"Type a number first. {_EXAMPLES}")
    if _NON_FINITE.fullmatch(text):
        lowered = text.lstrip("+-").lower()
        what = "not a number (NaN)" if lowered == "nan" else "infinite"
        return FormatError(raw, f"That is {what}; the answer is a finite number. {_EXAMPLES}")
    if _COMMA_DECIMAL.fullmatch(text):
        return FormatError(
            raw, f"Use a point for the decimals, not a comma: {text.replace(',', '.')}."
        )
    try:
        if "/" in text:
            value = _parse_fraction(text)
            canonical = str(value)  # lowest terms: "4/6" -> "2/3", "4/2" -> "2"
        else:
            number = _parse_decimal(text)
            value = Fraction(number)
            canonical = _canonical_decimal(number)
    except _Unparseable as problem:
        return FormatError(raw, problem.message)
    if abs(value) > LARGEST_VALUE:
        return FormatError(raw, f"That number is too large to work with here. {_EXAMPLES}")
    return ParsedAnswer(raw=raw, value=value, canonical=canonical)


def within_tolerance(value: Fraction, exact: Fraction, tolerance: Fraction) -> bool:
    """|value - exact| <= tolerance, inclusive, in exact rational arithmetic."""
    return abs(value - exact) <= tolerance
