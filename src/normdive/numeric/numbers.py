"""A number as a learner types it, for answers.py and rows.py (static/layernorm.js twins it):
superscripts refused (NFKC reads "3²" as 32), then NFKC (UAX #15) and Arabic-script digits as
ASCII; a decimal, or a fraction of two plain decimals around a slash ("-1.5/4")."""

from __future__ import annotations

import re
import unicodedata
from enum import Enum
from typing import Final, Literal

NORMAL_FORM: Final[Literal["NFKC"]] = "NFKC"
UNICODE_MINUS = "\u2212"
# What NFKC turns into a digit, a sign or an exponent's "e" (Unicode 14's <super> and <sub>;
# tests/test_numeric_rows.py checks the list against unicodedata).
RAISED_OR_LOWERED = "\u00b2\u00b3\u00b9\u1d31\u1d49\u2070\u2074-\u207b\u2080-\u208b\u2091"
_RAISED_OR_LOWERED = re.compile(f"[{RAISED_OR_LOWERED}]")
# float64 spans 1e-324 to 1e308, and a 64-character mantissa moves it 64 decades more.
MAX_ABS_EXPONENT = 400
DECIMAL = re.compile(
    r"(?P<sign>[+-]?)(?P<mantissa>[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE](?P<exponent>[+-]?[0-9]+))?"
)
NON_FINITE_WORDS = frozenset({"nan", "inf", "infinity", "∞"})
FRACTION_SLASH = "/"
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


# (negative, digits, exponent): (-1)**negative * int(digits) * 10**exponent, digits without
# leading or trailing zeros ("" for 0). A plain tuple: a named one costs as much as the parse.
TypedDecimal = tuple[bool, str, int]


def raised_or_lowered(text: str) -> str | None:
    found = _RAISED_OR_LOWERED.search(text)
    return None if found is None else found.group()


def nfkc(text: str) -> str:
    """`text` in NFKC, Arabic script's digits and separators as ASCII (after raised_or_lowered)."""
    return unicodedata.normalize(NORMAL_FORM, text).translate(ARABIC_FORMS)


def normalised(text: str) -> str:
    return nfkc(text).replace(UNICODE_MINUS, "-")


def is_non_finite(text: str) -> bool:
    body = text[1:] if text[:1] in ("+", "-") else text
    return body.lower() in NON_FINITE_WORDS


def ratio(number: TypedDecimal) -> tuple[int, int]:
    negative, digits, exponent = number
    numerator = -int(digits or "0") if negative else int(digits or "0")
    if exponent >= 0:
        return numerator * 10**exponent, 1
    return numerator, 10**-exponent


def decimal_of(match: re.Match[str], *, in_fraction: bool = False) -> TypedDecimal:
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
    match = DECIMAL.fullmatch(text)
    if match is None:
        raise NotANumber(Problem.NOT_A_NUMBER)
    return decimal_of(match, in_fraction=in_fraction)


def parse_fraction(text: str) -> tuple[int, int]:
    """ "2/3", "-1.5/4", "+2 / 3" as (numerator, denominator > 0), not in lowest terms."""
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
