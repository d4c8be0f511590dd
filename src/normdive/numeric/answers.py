"""Parsing a typed answer, PrairieLearn style: the raw text kept apart from its exact value
(two integers, never a float); a format error is a code and arguments, worded when shown."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType
from typing import Any, Protocol

from normdive.i18n.catalogues import gettext
from normdive.numeric.numbers import (
    DECIMAL,
    FRACTION_SLASH,
    MAX_ABS_EXPONENT,
    NotANumber,
    Problem,
    TypedDecimal,
    decimal_of,
    is_non_finite,
    normalised,
    parse_fraction,
    raised_or_lowered,
    ratio,
)

MAX_ANSWER_CHARS = 64
# Beyond float64's range the page could never show or compare the value sensibly.
LARGEST_VALUE = Fraction(sys.float_info.max)
# float64's largest value is a whole number (2**1024 - 2**971).
_LARGEST_INTEGER = int(sys.float_info.max)
_CANONICAL_POSITIONAL_DECADES = 30

_COMMA_DECIMAL = re.compile(r"[+-]?[0-9]*,[0-9]+")
DECIMAL_COMMA = ","


class FormatCode(StrEnum):
    TOO_LONG = "too_long"
    RAISED_OR_LOWERED = "raised_or_lowered"
    EMPTY = "empty"
    NOT_A_NUMBER = "not_a_number"
    NAN = "nan"
    INFINITE = "infinite"
    DECIMAL_COMMA = "decimal_comma"
    FRACTION_FORM = "fraction_form"
    DIVIDES_BY_ZERO = "divides_by_zero"
    EXPONENT_OUT_OF_RANGE = "exponent_out_of_range"
    TOO_LARGE = "too_large"


_BY_PROBLEM = {
    Problem.NOT_A_NUMBER: FormatCode.NOT_A_NUMBER,
    Problem.FRACTION_FORM: FormatCode.FRACTION_FORM,
    Problem.DIVIDES_BY_ZERO: FormatCode.DIVIDES_BY_ZERO,
    Problem.EXPONENT_OUT_OF_RANGE: FormatCode.EXPONENT_OUT_OF_RANGE,
}


def _examples() -> str:
    return gettext("Write a number such as 0.667, -1.5, 2/3 or 1e-3.")


def format_words(code: str, args: Mapping[str, Any]) -> str | None:
    """What is wrong and how to write it, in the current locale; None for an unknown code."""
    match code:
        case FormatCode.TOO_LONG:
            return gettext(
                "That is too long: an answer can be at most %(limit)d characters "
                "(this one has %(length)d)."
            ) % {"limit": int(args.get("limit", MAX_ANSWER_CHARS)), "length": int(args["length"])}
        case FormatCode.RAISED_OR_LOWERED:
            return gettext(
                "“%(character)s” is a raised or lowered character: write the number on the "
                "line, with powers of ten as in 1e-3."
            ) % {"character": str(args["character"])}
        case FormatCode.EMPTY:
            return gettext("Type a number first.") + " " + _examples()
        case FormatCode.NOT_A_NUMBER:
            return gettext("That is not a number.") + " " + _examples()
        case FormatCode.NAN:
            return (
                gettext("That is not a number (NaN); the answer is a finite number.")
                + " "
                + _examples()
            )
        case FormatCode.INFINITE:
            return gettext("That is infinite; the answer is a finite number.") + " " + _examples()
        case FormatCode.DECIMAL_COMMA:
            return gettext("Use a point for the decimals, not a comma: %(number)s.") % {
                "number": str(args["number"])
            }
        case FormatCode.FRACTION_FORM:
            return gettext("Write a fraction as one plain number over another, like 2/3 or -1.5/4.")
        case FormatCode.DIVIDES_BY_ZERO:
            return gettext("That divides by zero: the number under the / cannot be 0.")
        case FormatCode.EXPONENT_OUT_OF_RANGE:
            return gettext(
                "That exponent is out of range: keep it between -%(limit)d and %(limit)d."
            ) % {"limit": int(args.get("limit", MAX_ABS_EXPONENT))}
        case FormatCode.TOO_LARGE:
            return gettext("That number is too large to work with here.") + " " + _examples()
    return None


class Ratio(Protocol):
    """numerator / denominator > 0: a Fraction, an int or a ParsedAnswer (not in lowest terms)."""

    @property
    def numerator(self) -> int: ...

    @property
    def denominator(self) -> int: ...


@dataclass(frozen=True)
class ParsedAnswer:
    raw: str
    numerator: int
    denominator: int  # > 0, not always in lowest terms: "0.6667" -> 10**4, "-1.5/4" -> 40
    canonical: str  # normalised text of the value: "0.6667", "2/3", "-1.5", "1E-40"

    @property
    def value(self) -> Fraction:
        return Fraction(self.numerator, self.denominator)

    def same_value(self, other: ParsedAnswer) -> bool:
        return self.numerator * other.denominator == other.numerator * self.denominator


@dataclass(frozen=True)
class FormatError:
    raw: str
    code: FormatCode
    args: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def message(self) -> str:
        return format_words(self.code, self.args) or ""


def _canonical(number: TypedDecimal) -> str:
    """As Decimal(text).normalize() writes it: "0.6667", "-1.5", "100", "1E-40"; "0" for zero."""
    negative, digits, exponent = number
    if not digits:
        return "0"
    sign = "-" if negative else ""
    adjusted = exponent + len(digits) - 1  # the decade of the leading digit
    if abs(adjusted) > _CANONICAL_POSITIONAL_DECADES:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}E{adjusted:+d}"
    if exponent >= 0:
        return f"{sign}{digits}{'0' * exponent}"
    point = len(digits) + exponent
    if point > 0:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}0.{'0' * -point}{digits}"


def _lowest_terms_text(numerator: int, denominator: int) -> str:
    common = math.gcd(numerator, denominator)
    numerator, denominator = numerator // common, denominator // common
    return str(numerator) if denominator == 1 else f"{numerator}/{denominator}"


def parse_answer(raw: str, *, decimal_comma: bool = False) -> ParsedAnswer | FormatError:
    """Parse " 2 ", "−1.5", "2/3", "6.67E-1", "２／３" exactly, or a FormatError. With
    `decimal_comma`, a text without a point reads its comma as one ("1,224" is 1.224)."""
    if len(raw) > MAX_ANSWER_CHARS:
        return FormatError(
            raw, FormatCode.TOO_LONG, {"limit": MAX_ANSWER_CHARS, "length": len(raw)}
        )
    raised = raised_or_lowered(raw)
    if raised is not None:
        return FormatError(raw, FormatCode.RAISED_OR_LOWERED, {"character": raised})
    text = normalised(raw).strip()
    if not text:
        return FormatError(raw, FormatCode.EMPTY)
    if decimal_comma and DECIMAL_COMMA in text and "." not in text:
        text = text.replace(DECIMAL_COMMA, ".")
    try:
        match = DECIMAL.fullmatch(text)
        if match is not None:  # the usual answer, one decimal: no other pattern can match it
            number = decimal_of(match)
            numerator, denominator = ratio(number)
            return _within_range(raw, numerator, denominator, _canonical(number))
        if is_non_finite(text):
            lowered = text.lstrip("+-").lower()
            return FormatError(raw, FormatCode.NAN if lowered == "nan" else FormatCode.INFINITE)
        if _COMMA_DECIMAL.fullmatch(text):
            return FormatError(raw, FormatCode.DECIMAL_COMMA, {"number": text.replace(",", ".")})
        if FRACTION_SLASH not in text:
            return FormatError(raw, FormatCode.NOT_A_NUMBER)
        numerator, denominator = parse_fraction(text)
    except NotANumber as refused:
        code = _BY_PROBLEM[refused.problem]
        if code is FormatCode.EXPONENT_OUT_OF_RANGE:
            return FormatError(raw, code, {"limit": MAX_ABS_EXPONENT})
        return FormatError(raw, code)
    return _within_range(raw, numerator, denominator, _lowest_terms_text(numerator, denominator))


def _within_range(
    raw: str, numerator: int, denominator: int, canonical: str
) -> ParsedAnswer | FormatError:
    if abs(numerator) > _LARGEST_INTEGER * denominator:  # |value| > LARGEST_VALUE
        return FormatError(raw, FormatCode.TOO_LARGE)
    return ParsedAnswer(raw=raw, numerator=numerator, denominator=denominator, canonical=canonical)


def within_tolerance(value: Ratio, exact: Ratio, tolerance: Ratio) -> bool:
    """|a/b - c/d| <= e/f exactly, multiplied through by b*d*f > 0: |a*d*f - c*b*f| <= e*b*d."""
    a, b = value.numerator, value.denominator
    c, d = exact.numerator, exact.denominator
    e, f = tolerance.numerator, tolerance.denominator
    return abs((a * d - c * b) * f) <= e * b * d
