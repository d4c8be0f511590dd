"""A number as a learner types it: one set of rules for a typed answer (answers.py) and for
each entry of "Try your own row" (rows.py; static/layernorm.js `parseRow` is the row's twin in
the browser, with the same rules).

- No superscript or subscript characters: NFKC would read "3²" as 32 and "1e⁻³" as 1e−3, a
  different number from the one meant, without a word.
- The text is then normalised to Unicode's NFKC form (UAX #15), so full-width digits, signs,
  points, commas and slashes ("３．５", "－１", "２／３") read as their ASCII forms, as a learner
  typing them on an East Asian keyboard means; the Unicode minus U+2212 is a minus.
- NFKC leaves the digits of Arabic script as they are, so they are mapped here (ARABIC_FORMS),
  in every locale: the Arabic-Indic digits ٠ to ٩ (U+0660 to U+0669) and the Extended
  Arabic-Indic ۰ to ۹ (U+06F0 to U+06F9, Persian and Urdu keyboards) are 0 to 9, the Arabic
  decimal separator ٫ (U+066B) is a point, and the Arabic comma ، (U+060C) a comma:
  "١٫٥" is 1.5, "٢/٣" is 2/3.
- A number is a decimal, with an optional sign and an optional exponent (2, -1.5, .5, 3., 1e-3,
  6.02E23), or a fraction: one optional sign, then two plain decimals around a slash, neither
  with a sign or an exponent (2/3, -1.5/4, 2 / 3), whose lower number is not 0.
- nan, inf, infinity and ∞, in any case and with any sign, are named as not finite.

What stays each context's own: how long the text may be, what separates a row's entries, and
the range a value may have (an answer within float64's, a row's entry within 1e-100 to 1e100:
rows.py).

Guards against hostile input come before any arithmetic: an exponent's size is checked on its
digits (a string like "1e999999999" would otherwise build a billion-digit integer).
"""

from __future__ import annotations

import re
import unicodedata
from enum import Enum
from typing import Final, Literal

NORMAL_FORM: Final[Literal["NFKC"]] = "NFKC"
UNICODE_MINUS = "\u2212"
# The superscripts and subscripts that NFKC turns into a digit, a sign or an exponent's "e"
# (Unicode 14: every character with a <super> or <sub> decomposition to one of those;
# tests/test_numeric_rows.py checks the list against unicodedata).
RAISED_OR_LOWERED = "\u00b2\u00b3\u00b9\u1d31\u1d49\u2070\u2074-\u207b\u2080-\u208b\u2091"
_RAISED_OR_LOWERED = re.compile(f"[{RAISED_OR_LOWERED}]")
# |exponent| beyond this is refused before a number is built: float64 spans about 1e-324 to
# 1e308, and a 64-character mantissa moves the value by at most 64 more decades.
MAX_ABS_EXPONENT = 400
DECIMAL = re.compile(
    r"(?P<sign>[+-]?)(?P<mantissa>[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE](?P<exponent>[+-]?[0-9]+))?"
)
# What is named as not finite, with one sign or none, in any case (lowered as JavaScript's
# toLowerCase lowers it too).
NON_FINITE_WORDS = frozenset({"nan", "inf", "infinity", "∞"})
FRACTION_SLASH = "/"
# The characters of Arabic script that stand for a digit, the decimal point or a comma, as
# str.translate takes them (static/layernorm.js, ARABIC_FORMS, maps the same).
ARABIC_DECIMAL_SEPARATOR = "\u066b"
ARABIC_COMMA = "\u060c"
ARABIC_FORMS: Final = {
    **{0x0660 + digit: str(digit) for digit in range(10)},
    **{0x06F0 + digit: str(digit) for digit in range(10)},
    ord(ARABIC_DECIMAL_SEPARATOR): ".",
    ord(ARABIC_COMMA): ",",
}


class Problem(Enum):
    """Why a text is not a number; each context words it for its own subject."""

    NOT_A_NUMBER = "not a number"
    # A fraction whose sides are not plain decimals ("2/-3", "1e2/3", "1/2/3").
    FRACTION_FORM = "fraction form"
    DIVIDES_BY_ZERO = "divides by zero"
    EXPONENT_OUT_OF_RANGE = "exponent out of range"


class NotANumber(Exception):
    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.value)
        self.problem = problem


# One typed decimal as (negative, digits, exponent): the value is (-1)**negative * int(digits) *
# 10**exponent, and digits has neither leading nor trailing zeros ("" for zero). A plain tuple:
# it lives for one parse, and building a named one costs as much as the rest of the parse.
TypedDecimal = tuple[bool, str, int]


def raised_or_lowered(text: str) -> str | None:
    """The first superscript or subscript character in `text`, or None."""
    found = _RAISED_OR_LOWERED.search(text)
    return None if found is None else found.group()


def nfkc(text: str) -> str:
    """`text` in NFKC, Arabic script's digits, decimal separator and comma as ASCII
    (ARABIC_FORMS; check raised_or_lowered first)."""
    return unicodedata.normalize(NORMAL_FORM, text).translate(ARABIC_FORMS)


def normalised(text: str) -> str:
    """`text` in NFKC, the Unicode minus as "-" (check raised_or_lowered first)."""
    return nfkc(text).replace(UNICODE_MINUS, "-")


def is_non_finite(text: str) -> bool:
    body = text[1:] if text[:1] in ("+", "-") else text
    return body.lower() in NON_FINITE_WORDS


def ratio(number: TypedDecimal) -> tuple[int, int]:
    """(numerator, denominator > 0) of a decimal: its digits over a power of ten."""
    negative, digits, exponent = number
    numerator = -int(digits or "0") if negative else int(digits or "0")
    if exponent >= 0:
        return numerator * 10**exponent, 1
    return numerator, 10**-exponent


def decimal_of(match: re.Match[str], *, in_fraction: bool = False) -> TypedDecimal:
    """The decimal a full match of DECIMAL stands for, or NotANumber."""
    sign, mantissa, exponent = match.group("sign", "mantissa", "exponent")
    if in_fraction and (exponent is not None or sign):
        # Keeps a fraction's text short and its sign in one place.
        raise NotANumber(Problem.FRACTION_FORM)
    # Checked on the digits before int() runs: this is the DoS guard.
    if exponent is not None:
        digits = exponent.lstrip("+-").lstrip("0")
        if len(digits) > len(str(MAX_ABS_EXPONENT)) or int(digits or "0") > MAX_ABS_EXPONENT:
            raise NotANumber(Problem.EXPONENT_OUT_OF_RANGE)
    whole, _, decimals = mantissa.partition(".")
    significant = (whole + decimals).lstrip("0")
    trimmed = significant.rstrip("0")
    shift = len(significant) - len(trimmed) - len(decimals)  # trailing zeros less decimals
    return sign == "-", trimmed, (int(exponent) if exponent else 0) + shift


def parse_decimal(text: str, *, in_fraction: bool = False) -> TypedDecimal:
    """One decimal number, exactly, or NotANumber."""
    match = DECIMAL.fullmatch(text)
    if match is None:
        raise NotANumber(Problem.NOT_A_NUMBER)
    return decimal_of(match, in_fraction=in_fraction)


def parse_fraction(text: str) -> tuple[int, int]:
    """ "2/3", "-1.5/4", "+2 / 3": plain decimals on both sides, one optional sign in front.
    Returns (numerator, denominator > 0), not in lowest terms, or NotANumber."""
    top, _, bottom = text.partition(FRACTION_SLASH)
    negative = top.startswith("-")
    top = top.removeprefix("-" if negative else "+").strip()
    bottom = bottom.strip()
    if FRACTION_SLASH in bottom:
        raise NotANumber(Problem.FRACTION_FORM)
    numerator = parse_decimal(top, in_fraction=True)
    denominator = parse_decimal(bottom, in_fraction=True)
    if not denominator[1]:
        raise NotANumber(Problem.DIVIDES_BY_ZERO)
    # (a / 10**i) / (b / 10**j) = (a * 10**j) / (b * 10**i); b > 0, as neither side has a sign.
    top_numerator, top_denominator = ratio(numerator)
    bottom_numerator, bottom_denominator = ratio(denominator)
    value = top_numerator * bottom_denominator
    return -value if negative else value, top_denominator * bottom_numerator
