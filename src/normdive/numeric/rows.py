"""Parsing the row a learner types in "Try your own row": entries by numbers.py's rules, parted
by commas and/or spaces (semicolons where a comma is the decimal point), each 0 or within
MIN_MAGNITUDE to MAX_MAGNITUDE, decided on the typed digits. static/layernorm.js parseRow twins
it, message for message; characters come from explicit ASCII sets, as `\\d` and `\\s` differ
between Python and JavaScript."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from normdive.i18n.catalogues import N_, gettext
from normdive.numeric.numbers import (
    DECIMAL,
    FRACTION_SLASH,
    UNICODE_MINUS,
    NotANumber,
    Problem,
    is_non_finite,
    nfkc,
    parse_fraction,
    raised_or_lowered,
)

MAX_ROW_LENGTH = 16
MAX_ROW_CHARS = 400
MAX_QUOTED_CHARS = 20
# Shown numbers stay readable, and the row's floats' squares neither overflow nor reach 0.
MAX_MAGNITUDE = 1e100
MIN_MAGNITUDE = 1e-100
MAX_MAGNITUDE_EXPONENT = 100
MIN_MAGNITUDE_EXPONENT = -100
# A longer exponent is out of range for any row, and never built as an integer.
MAX_EXPONENT_DIGITS = 6

# Phones paste the no-break spaces (NFKC makes them plain; listed for clarity).
SPACES = " \t\n\r\u00a0\u202f"
_SEPARATOR = re.compile(f"[{SPACES},]+")
_EMPTY_BETWEEN_COMMAS = re.compile(f",[{SPACES}]*,")
_SEMICOLON_SEPARATOR = re.compile(f"[{SPACES};]+")
_EMPTY_BETWEEN_SEMICOLONS = re.compile(f";[{SPACES}]*;")
DECIMAL_COMMA = ","
_SPACES_ONLY = re.compile(f"[{SPACES}]+")
_SPACED_SLASH = re.compile(f"[{SPACES}]*{FRACTION_SLASH}[{SPACES}]*")
_DECIMAL_COMMA_GROUP = re.compile(r"[+\-\u2212]?[0-9]*[0-9],[0-9]+")
# Anything else is not a number, before parse_fraction (which strips spaces) reads it.
_FRACTION_ALPHABET = re.compile(r"[0-9+\-.eE/]+")
# Whole sentences; "%(entry)s" is the offending entry, quoted by the sentence.
TOO_LONG = N_(
    "That is too long: a row can be at most %(limit)d characters (this one has %(length)d)."
)
RAISED = N_(
    "“%(entry)s” is a raised or lowered character: write every entry on the line, with powers "
    "of ten as in 1e-3."
)
BRACKETS = N_("Put square brackets on both ends of the row, or leave both out.")
LOOKS_LIKE_DECIMAL_COMMA = N_(
    "“%(entry)s” looks like a decimal comma: write decimals with a point, as in 0.5, and part "
    "the entries with commas or spaces."
)
EMPTY_BETWEEN = N_("There are two commas with no number between them.")
EMPTY_BETWEEN_SEMICOLONS = N_("There are two semicolons with no number between them.")
NO_NUMBER = N_("Type at least one number, for example 1, 2, 3.")
NOT_FINITE = N_("“%(entry)s” is not allowed: every entry must be a finite number.")
NOT_A_NUMBER = N_(
    "“%(entry)s” is not a number. Write numbers like 2, -1.5, 2/3 or 1e-3, separated by "
    "commas or spaces."
)
FRACTION_FORM = N_(
    "“%(entry)s” is not a fraction to work with: write one plain number over another, like "
    "2/3 or -1.5/4."
)
DIVIDES_BY_ZERO = N_("“%(entry)s” divides by zero: the number under the / cannot be 0.")
TOO_LARGE = N_("“%(entry)s” is too large: keep every entry between -1e100 and 1e100.")
TOO_SMALL = N_("“%(entry)s” is too small: an entry other than 0 must be at least 1e-100 in size.")
TOO_MANY = N_("A row can hold at most %(limit)d numbers; this one has %(count)d.")
ROW_MESSAGES = (
    TOO_LONG,
    RAISED,
    BRACKETS,
    LOOKS_LIKE_DECIMAL_COMMA,
    EMPTY_BETWEEN,
    EMPTY_BETWEEN_SEMICOLONS,
    NO_NUMBER,
    NOT_FINITE,
    NOT_A_NUMBER,
    FRACTION_FORM,
    DIVIDES_BY_ZERO,
    TOO_LARGE,
    TOO_SMALL,
    TOO_MANY,
)
_PROBLEM_WORDS = {
    Problem.NOT_A_NUMBER: NOT_A_NUMBER,
    Problem.FRACTION_FORM: FRACTION_FORM,
    Problem.DIVIDES_BY_ZERO: DIVIDES_BY_ZERO,
    Problem.EXPONENT_OUT_OF_RANGE: TOO_LARGE,
}


@dataclass(frozen=True)
class RowError:
    message: str


def _said(message: str, **fields: object) -> RowError:
    return RowError(gettext(message) % fields)


def _about(message: str, token: str) -> RowError:
    if len(token) > MAX_QUOTED_CHARS:
        token = token[:MAX_QUOTED_CHARS] + "…"
    return _said(message, entry=token)


def _decimal_comma(body: str) -> str | None:
    """The first group like "0,5" when every space-parted group with a comma is one ("0,5 1,5"):
    decimal commas, not more entries. "1 2,3,4", "1,2, 3" and a lone "0,5" are lists."""
    groups = [group for group in _SPACES_ONLY.split(body) if group]
    with_commas = [group for group in groups if "," in group]
    if len(groups) < 2 or not with_commas:
        return None
    if all(_DECIMAL_COMMA_GROUP.fullmatch(group) for group in with_commas):
        return with_commas[0]
    return None


def _size(match: re.Match[str]) -> tuple[str, int] | None:
    """(digits, exponent) with value = 0.digits x 10**exponent, None for a zero; an exponent
    too long to be in range as +-(10 ** MAX_EXPONENT_DIGITS)."""
    whole, _, part = match.group("mantissa").partition(".")
    digits = (whole + part).lstrip("0")
    if not digits:
        return None
    written = match.group("exponent") or "0"
    magnitude = written.lstrip("+-").lstrip("0")
    if len(magnitude) > MAX_EXPONENT_DIGITS:
        exponent = 10**MAX_EXPONENT_DIGITS * (-1 if written.startswith("-") else 1)
    else:
        exponent = int(written)
    # The leading zeros dropped all stand before the first significant digit.
    return digits.rstrip("0"), exponent + len(whole) - (len(whole + part) - len(digits))


def _too_large(digits: str, exponent: int) -> bool:
    """|0.digits x 10**exponent| > 10**MAX_MAGNITUDE_EXPONENT."""
    top = MAX_MAGNITUDE_EXPONENT + 1
    return exponent > top or (exponent == top and digits != "1")


def _fraction_entry(token: str, typed: str) -> Fraction | RowError:
    """A fraction entry in lowest terms; `typed` is the entry as written, for the messages."""
    if _FRACTION_ALPHABET.fullmatch(token) is None:
        return _about(NOT_A_NUMBER, typed)
    try:
        numerator, denominator = parse_fraction(token)
    except NotANumber as refused:
        return _about(_PROBLEM_WORDS[refused.problem], typed)
    # |numerator / denominator| against 10**100 and 10**-100, in integers (denominator > 0).
    bound = 10**MAX_MAGNITUDE_EXPONENT
    if abs(numerator) > bound * denominator:
        return _about(TOO_LARGE, typed)
    if numerator != 0 and abs(numerator) * bound < denominator:
        return _about(TOO_SMALL, typed)
    return Fraction(numerator, denominator)


def _decimal_entry(token: str, typed: str) -> Decimal | RowError:
    match = DECIMAL.fullmatch(token)
    if match is None:
        return _about(NOT_A_NUMBER, typed)
    negative = match.group("sign") == "-"
    size = _size(match)
    if size is None:
        return Decimal("-0" if negative else "0")
    digits, exponent = size
    if _too_large(digits, exponent):
        return _about(TOO_LARGE, typed)
    if exponent <= MIN_MAGNITUDE_EXPONENT:
        return _about(TOO_SMALL, typed)
    # In range, so the exponent is small: Decimal reads the digits exactly.
    return Decimal(f"{'-' if negative else ''}0.{digits}e{exponent}")


def _entries(body: str, decimal_comma: bool) -> list[str] | RowError:
    """The entries of `body` (in NFKC, stripped), its brackets taken off."""
    opens, closes = body.startswith("["), body.endswith("]")
    if opens != closes or (opens and len(body) == 1):
        return _said(BRACKETS)
    if opens:
        body = body[1:-1]
    comma = None if decimal_comma else _decimal_comma(body)
    if comma is not None:
        return _about(LOOKS_LIKE_DECIMAL_COMMA, comma)
    body = body.replace(UNICODE_MINUS, "-")
    empty, separator = (
        (_EMPTY_BETWEEN_SEMICOLONS, _SEMICOLON_SEPARATOR)
        if decimal_comma
        else (_EMPTY_BETWEEN_COMMAS, _SEPARATOR)
    )
    if empty.search(body):
        return _said(EMPTY_BETWEEN_SEMICOLONS if decimal_comma else EMPTY_BETWEEN)
    tokens = [token for token in separator.split(_SPACED_SLASH.sub(FRACTION_SLASH, body)) if token]
    if not tokens:
        return _said(NO_NUMBER)
    return tokens


def parse_row_exact(
    text: str, *, decimal_comma: bool = False
) -> tuple[Decimal | Fraction, ...] | RowError:
    """Parse "1, 2, 3", "[1 2 3]", "1/3 2/3" (`decimal_comma`: "1,5; 2") into exact numbers
    (a Decimal with every digit typed, a Fraction in lowest terms), or a RowError."""
    if len(text) > MAX_ROW_CHARS:
        return _said(TOO_LONG, limit=MAX_ROW_CHARS, length=len(text))
    raised = raised_or_lowered(text)
    if raised is not None:
        return _about(RAISED, raised)
    tokens = _entries(nfkc(text).strip(SPACES), decimal_comma)
    if isinstance(tokens, RowError):
        return tokens
    values: list[Decimal | Fraction] = []
    for typed in tokens:
        if is_non_finite(typed):
            return _about(NOT_FINITE, typed)
        token = _with_point(typed) if decimal_comma else typed
        entry = (
            _fraction_entry(token, typed)
            if FRACTION_SLASH in token
            else _decimal_entry(token, typed)
        )
        if isinstance(entry, RowError):
            return entry
        values.append(entry)
    if len(values) > MAX_ROW_LENGTH:
        return _said(TOO_MANY, limit=MAX_ROW_LENGTH, count=len(values))
    return tuple(values)


def _with_point(token: str) -> str:
    """Commas as points, unless the entry has a point already (then it is not a number)."""
    return token if "." in token else token.replace(DECIMAL_COMMA, ".")


def parse_row(text: str, *, decimal_comma: bool = False) -> tuple[float, ...] | RowError:
    """The row of parse_row_exact as the floats nearest its decimals (-0 stays -0.0)."""
    exact = parse_row_exact(text, decimal_comma=decimal_comma)
    return exact if isinstance(exact, RowError) else tuple(float(value) for value in exact)
