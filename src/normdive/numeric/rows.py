"""Parsing a row the learner types in "Try your own row".

Rules (static/layernorm.js `parseRow` implements the same rules with the same messages):
- at most MAX_ROW_CHARS characters (checked first, so a pasted novel costs nothing);
- optional square brackets around the whole row, both or neither;
- numbers separated by commas and/or whitespace; a separator at either end is ignored, but two
  commas with nothing between them are an error (a number was probably lost);
- each number is plain decimal notation with an optional sign (the Unicode minus U+2212
  counts as a minus) and an optional exponent: 2, -1.5, .5, 3., 1e-3, 6.02E23;
- every number finite, and 1 to MAX_ROW_LENGTH of them;
- every number 0 or between MIN_MAGNITUDE and MAX_MAGNITUDE in size. Layer norm squares the
  entries' distances from their mean: beyond these, a square overflows to infinity or rounds
  to zero (doubles reach about 1.8e308 and 4.9e-324), and the steps would show "infinity" or
  a division by zero for a row whose true answer is ordinary. Inside them, sixteen squares
  and their sum stay far from both edges.

Characters are matched from explicit ASCII sets rather than `\\d` / `\\s`, whose meaning
differs between Python (all of Unicode) and JavaScript, so both twins accept the same text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_ROW_LENGTH = 16
MAX_ROW_CHARS = 400
MAX_QUOTED_CHARS = 20  # an offending token is quoted up to this many characters
MAX_MAGNITUDE = 1e100  # the largest size of an entry (see the module docstring)
MIN_MAGNITUDE = 1e-100  # the smallest size of an entry other than 0

UNICODE_MINUS = "\u2212"
# Space, tab, line feed, carriage return, no-break space, narrow no-break space (phones insert
# the last two when pasting).
SPACES = " \t\n\r\u00a0\u202f"
_SEPARATOR = re.compile(f"[{SPACES},]+")
_EMPTY_BETWEEN_COMMAS = re.compile(f",[{SPACES}]*,")
_SPACES_ONLY = re.compile(f"[{SPACES}]+")
# A group written as a number with a decimal comma: digits, one comma, digits ("-0,5", "1,25").
_DECIMAL_COMMA_GROUP = re.compile(r"[+\-\u2212]?[0-9]*[0-9],[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
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


def parse_row(text: str) -> tuple[float, ...] | RowError:
    """Parse "1, 2, 3", "[1 2 3]", "−0.5,2e3": a tuple of 1 to 16 finite floats, or a RowError."""
    if len(text) > MAX_ROW_CHARS:
        return RowError(
            f"That is too long: a row can be at most {MAX_ROW_CHARS} characters "
            f"(this one has {len(text)})."
        )
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

    values: list[float] = []
    for token in tokens:
        if token.lstrip("+-").lower() in _NON_FINITE_WORDS:
            return RowError(f"{_quote(token)} is not allowed: every entry must be a finite number.")
        if _NUMBER.fullmatch(token) is None:
            return RowError(
                f"{_quote(token)} is not a number. Write numbers like 2, -1.5 or 1e-3, "
                "separated by commas or spaces."
            )
        value = float(token)  # beyond the float range (1e400): infinite, and too large below
        if abs(value) > MAX_MAGNITUDE:
            return RowError(
                f"{_quote(token)} is too large: keep every entry between -1e100 and 1e100, so "
                "that its square still fits in a floating-point number."
            )
        if value != 0 and abs(value) < MIN_MAGNITUDE:
            return RowError(
                f"{_quote(token)} is too small: an entry other than 0 must be at least 1e-100 "
                "in size, so that its square does not round to 0."
            )
        values.append(value)
    if len(values) > MAX_ROW_LENGTH:
        return RowError(
            f"A row can hold at most {MAX_ROW_LENGTH} numbers; this one has {len(values)}."
        )
    return tuple(values)
