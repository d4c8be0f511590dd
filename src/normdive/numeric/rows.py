"""Parsing a row the learner types in "Try your own row".

Rules (static/layernorm.js `parseRow` implements the same rules with the same messages):
- at most MAX_ROW_CHARS characters (checked first, so a pasted novel costs nothing);
- no superscript or subscript characters: NFKC would read "3²" as 32 and "1e⁻³" as 1e−3, a
  different number from the one meant, without a word;
- the text is then normalised to Unicode's NFKC form (UAX #15), so full-width digits, signs,
  points and commas ("３．５", "－１", "１，２") and the wide spaces of East Asian keyboards read
  as their ASCII forms, as a learner typing them means;
- optional square brackets around the whole row, both or neither;
- numbers separated by commas and/or whitespace; a separator at either end is ignored, but two
  commas with nothing between them are an error (a number was probably lost);
- each number is plain decimal notation with an optional sign (the Unicode minus U+2212
  counts as a minus) and an optional exponent: 2, -1.5, .5, 3., 1e-3, 6.02E23;
- 1 to MAX_ROW_LENGTH numbers, each 0 or between MIN_MAGNITUDE and MAX_MAGNITUDE in size,
  decided on the typed decimal itself (never on a float, which turns 1e-999 into 0 and 1e400
  into infinity). The steps are computed exactly from these decimals (layernorm.py); the
  bounds keep every shown number to a readable length, and keep the floats the row is also
  read as (parse_row) ordinary: beyond them a square overflows or rounds to zero.

Characters are matched from explicit ASCII sets rather than `\\d` / `\\s`, whose meaning
differs between Python (all of Unicode) and JavaScript, so both twins accept the same text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, Literal

MAX_ROW_LENGTH = 16
MAX_ROW_CHARS = 400
MAX_QUOTED_CHARS = 20  # an offending token is quoted up to this many characters
MAX_MAGNITUDE = 1e100  # the largest size of an entry (see the module docstring)
MIN_MAGNITUDE = 1e-100  # the smallest size of an entry other than 0
# The same bounds as powers of ten, for the exact test on the typed decimal.
MAX_MAGNITUDE_EXPONENT = 100
MIN_MAGNITUDE_EXPONENT = -100
# An exponent with more digits than this (leading zeros aside) is out of range for any
# mantissa a row can hold, so it is never turned into an integer (whose size it would set).
MAX_EXPONENT_DIGITS = 6

NORMAL_FORM: Final[Literal["NFKC"]] = "NFKC"
UNICODE_MINUS = "\u2212"
# Space, tab, line feed, carriage return, no-break space, narrow no-break space (phones insert
# the last two when pasting; NFKC makes both a plain space, and they stay listed for clarity).
SPACES = " \t\n\r\u00a0\u202f"
# The superscripts and subscripts that NFKC turns into a digit, a sign or an exponent's "e"
# (Unicode 14: every character with a <super> or <sub> decomposition to one of those;
# tests/test_numeric_rows.py checks the list against unicodedata).
RAISED_OR_LOWERED = "\u00b2\u00b3\u00b9\u1d31\u1d49\u2070\u2074-\u207b\u2080-\u208b\u2091"
_RAISED_OR_LOWERED = re.compile(f"[{RAISED_OR_LOWERED}]")
_SEPARATOR = re.compile(f"[{SPACES},]+")
_EMPTY_BETWEEN_COMMAS = re.compile(f",[{SPACES}]*,")
_SPACES_ONLY = re.compile(f"[{SPACES}]+")
# A group written as a number with a decimal comma: digits, one comma, digits ("-0,5", "1,25").
_DECIMAL_COMMA_GROUP = re.compile(r"[+\-\u2212]?[0-9]*[0-9],[0-9]+")
_NUMBER = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<whole>[0-9]+)\.?(?P<part>[0-9]*)|\.(?P<fraction>[0-9]+))"
    r"(?:[eE](?P<exponent>[+-]?[0-9]+))?"
)
_NON_FINITE_WORDS = frozenset({"nan", "inf", "infinity"})


@dataclass(frozen=True)
class RowError:
    """Why a typed row cannot be used, in words a learner understands."""

    message: str


def _quote(token: str) -> str:
    if len(token) > MAX_QUOTED_CHARS:
        token = token[:MAX_QUOTED_CHARS] + "…"
    return f"“{token}”"


def _decimal_comma(body: str) -> str | None:
    """The first group written like "0,5" when the row's groups are parted by spaces and every
    group with a comma in it is such a number ("0,5 1,5", "2 0,25", "1,2 3"): decimal commas,
    which would otherwise silently read as more entries ([0, 5, 1, 5]). A group with two commas
    or more ("1 2,3,4"), or a comma at a group's end ("1,2, 3"), makes it a list, read as one.
    A single group ("0,5") is a list of two: nothing tells it from one."""
    groups = [group for group in _SPACES_ONLY.split(body) if group]
    with_commas = [group for group in groups if "," in group]
    if len(groups) < 2 or not with_commas:
        return None
    if all(_DECIMAL_COMMA_GROUP.fullmatch(group) for group in with_commas):
        return with_commas[0]
    return None


def _size(match: re.Match[str]) -> tuple[str, int] | None:
    """The significant digits of a matched number and its exponent (value = 0.digits x
    10**exponent, so 1 <= |value| < 10 has exponent 1), or None for a zero. An exponent too
    long to be in range comes back as +-(10 ** MAX_EXPONENT_DIGITS)."""
    whole = match.group("whole") or ""
    part = match.group("part") or match.group("fraction") or ""
    digits = (whole + part).lstrip("0")
    if not digits:
        return None
    written = match.group("exponent") or "0"
    magnitude = written.lstrip("+-").lstrip("0")
    if len(magnitude) > MAX_EXPONENT_DIGITS:
        exponent = 10**MAX_EXPONENT_DIGITS * (-1 if written.startswith("-") else 1)
    else:
        exponent = int(written)
    # digits has len(whole + part) - len(digits) leading zeros dropped, all of them before
    # the first significant digit.
    return digits.rstrip("0"), exponent + len(whole) - (len(whole + part) - len(digits))


def _too_large(digits: str, exponent: int) -> bool:
    """|0.digits x 10**exponent| > 10**MAX_MAGNITUDE_EXPONENT."""
    top = MAX_MAGNITUDE_EXPONENT + 1
    return exponent > top or (exponent == top and digits != "1")


def parse_row_exact(text: str) -> tuple[Decimal, ...] | RowError:
    """Parse "1, 2, 3", "[1 2 3]", "−0.5,2e3": a tuple of 1 to 16 decimals, exactly as typed
    (Decimal("0.1") is one tenth, not the float nearest it), or a RowError."""
    if len(text) > MAX_ROW_CHARS:
        return RowError(
            f"That is too long: a row can be at most {MAX_ROW_CHARS} characters "
            f"(this one has {len(text)})."
        )
    raised = _RAISED_OR_LOWERED.search(text)
    if raised is not None:
        return RowError(
            f"{_quote(raised.group())} is a raised or lowered character: write every entry on "
            "the line, with powers of ten as in 1e-3."
        )
    text = unicodedata.normalize(NORMAL_FORM, text)
    body = text.strip(SPACES)
    opens, closes = body.startswith("["), body.endswith("]")
    if opens != closes or (opens and len(body) == 1):
        return RowError("Put square brackets on both ends of the row, or leave both out.")
    if opens:
        body = body[1:-1]
    comma = _decimal_comma(body)
    if comma is not None:
        return RowError(
            f"{_quote(comma)} looks like a decimal comma: write decimals with a point, as in "
            "0.5, and part the entries with commas or spaces."
        )
    body = body.replace(UNICODE_MINUS, "-")
    if _EMPTY_BETWEEN_COMMAS.search(body):
        return RowError("There are two commas with no number between them.")
    tokens = [token for token in _SEPARATOR.split(body) if token]
    if not tokens:
        return RowError("Type at least one number, for example 1, 2, 3.")

    values: list[Decimal] = []
    for token in tokens:
        if token.lstrip("+-").lower() in _NON_FINITE_WORDS:
            return RowError(f"{_quote(token)} is not allowed: every entry must be a finite number.")
        match = _NUMBER.fullmatch(token)
        if match is None:
            return RowError(
                f"{_quote(token)} is not a number. Write numbers like 2, -1.5 or 1e-3, "
                "separated by commas or spaces."
            )
        negative = match.group("sign") == "-"
        size = _size(match)
        if size is None:
            values.append(Decimal("-0" if negative else "0"))
            continue
        digits, exponent = size
        if _too_large(digits, exponent):
            return RowError(
                f"{_quote(token)} is too large: keep every entry between -1e100 and 1e100."
            )
        if exponent <= MIN_MAGNITUDE_EXPONENT:
            return RowError(
                f"{_quote(token)} is too small: an entry other than 0 must be at least 1e-100 "
                "in size."
            )
        # In range, so the exponent is small: Decimal reads the digits exactly.
        values.append(Decimal(f"{'-' if negative else ''}0.{digits}e{exponent}"))
    if len(values) > MAX_ROW_LENGTH:
        return RowError(
            f"A row can hold at most {MAX_ROW_LENGTH} numbers; this one has {len(values)}."
        )
    return tuple(values)


def parse_row(text: str) -> tuple[float, ...] | RowError:
    """The row of parse_row_exact as the floats nearest its decimals (-0 stays -0.0)."""
    exact = parse_row_exact(text)
    return exact if isinstance(exact, RowError) else tuple(float(value) for value in exact)
