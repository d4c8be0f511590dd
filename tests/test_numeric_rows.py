"""Parsing "Try your own row": what is accepted, and what each refusal says."""

from __future__ import annotations

import pytest

from normdive.numeric.layernorm import layer_norm_steps
from normdive.numeric.rows import (
    MAX_MAGNITUDE,
    MAX_ROW_CHARS,
    MAX_ROW_LENGTH,
    MIN_MAGNITUDE,
    RowError,
    parse_row,
)


@pytest.mark.parametrize(
    ("text", "row"),
    [
        ("1, 2, 3", (1.0, 2.0, 3.0)),
        ("1 2 3", (1.0, 2.0, 3.0)),
        ("1,2,3", (1.0, 2.0, 3.0)),
        ("[1, 2, 3]", (1.0, 2.0, 3.0)),
        ("  [ 2 2 2 6 ]  ", (2.0, 2.0, 2.0, 6.0)),
        ("1 ,\t2\n,3", (1.0, 2.0, 3.0)),
        ("1, 2, 3,", (1.0, 2.0, 3.0)),  # a trailing comma is forgiven
        # Lists with commas and spaces, not decimal commas.
        ("1,2, 3", (1.0, 2.0, 3.0)),
        ("1 ,2 3", (1.0, 2.0, 3.0)),
        ("1 2,3,4", (1.0, 2.0, 3.0, 4.0)),
        ("0,5", (0.0, 5.0)),  # one group: nothing tells it from a list of two
        ("[ 1,2,3 ]", (1.0, 2.0, 3.0)),
        (",1", (1.0,)),
        ("7", (7.0,)),
        ("−1.5, +2", (-1.5, 2.0)),  # U+2212 is a minus
        ("1e-3 6.02E23 .5 3.", (1e-3, 6.02e23, 0.5, 3.0)),
        ("-0", (-0.0,)),
        ("1e100, -1e100, 1e-100, -1e-100", (1e100, -1e100, 1e-100, -1e-100)),  # the edges
        ("1e-999", (0.0,)),  # underflows to zero, which is finite
        ("1\u00a02\u202f3", (1.0, 2.0, 3.0)),  # no-break spaces pasted from a phone
        (",".join(["1"] * MAX_ROW_LENGTH), (1.0,) * MAX_ROW_LENGTH),
    ],
)
def test_accepted_rows(text: str, row: tuple[float, ...]) -> None:
    assert parse_row(text) == row


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Type at least one number, for example 1, 2, 3."),
        ("   ", "Type at least one number, for example 1, 2, 3."),
        ("[ ]", "Type at least one number, for example 1, 2, 3."),
        (", ,", "There are two commas with no number between them."),
        ("1,,2", "There are two commas with no number between them."),
        ("[1, 2", "Put square brackets on both ends of the row, or leave both out."),
        ("1, 2]", "Put square brackets on both ends of the row, or leave both out."),
        ("[", "Put square brackets on both ends of the row, or leave both out."),
        (
            "1, two, 3",
            "“two” is not a number. Write numbers like 2, -1.5 or 1e-3, separated by commas "
            "or spaces.",
        ),
        (
            "1; 2",
            "“1;” is not a number. Write numbers like 2, -1.5 or 1e-3, separated by commas "
            "or spaces.",
        ),
        (
            "1_000",
            "“1_000” is not a number. Write numbers like 2, -1.5 or 1e-3, separated by commas "
            "or spaces.",
        ),
        (
            "٣",  # an Arabic-Indic digit: Python's float() would take it, JavaScript would not
            "“٣” is not a number. Write numbers like 2, -1.5 or 1e-3, separated by commas "
            "or spaces.",
        ),
        (
            "abcdefghijklmnopqrstuvwxyz",
            "“abcdefghijklmnopqrst…” is not a number. Write numbers like 2, -1.5 or 1e-3, "
            "separated by commas or spaces.",
        ),
        *(
            (
                text,
                f"“{group}” looks like a decimal comma: write decimals with a point, as in 0.5, "
                "and part the entries with commas or spaces.",
            )
            for text, group in (
                ("0,5 1,5", "0,5"),
                ("2 0,25", "0,25"),
                ("[1,5 -2,5]", "1,5"),
                ("1,2 3", "1,2"),
                ("−0,5 1", "−0,5"),  # quoted as typed, with its minus sign
            )
        ),
        ("1, NaN", "“NaN” is not allowed: every entry must be a finite number."),
        ("-inf", "“-inf” is not allowed: every entry must be a finite number."),
        ("Infinity 2", "“Infinity” is not allowed: every entry must be a finite number."),
        # Beyond the float range, as beyond the entries' range: one message.
        (
            "1e400",
            "“1e400” is too large: keep every entry between -1e100 and 1e100, so that its "
            "square still fits in a floating-point number.",
        ),
        *(
            (
                text,
                f"“{token}” is too large: keep every entry between -1e100 and 1e100, so that its "
                "square still fits in a floating-point number.",
            )
            for text, token in (
                ("1e154 -1e154", "1e154"),
                ("1, -1.0000001e100", "-1.0000001e100"),
                ("1.7e308", "1.7e308"),
            )
        ),
        *(
            (
                text,
                f"“{token}” is too small: an entry other than 0 must be at least 1e-100 in "
                "size, so that its square does not round to 0.",
            )
            for text, token in (
                ("2.2e-308 -2.2e-308", "2.2e-308"),
                ("0, 9.99e-101", "9.99e-101"),
                ("5e-324", "5e-324"),
            )
        ),
        (
            ",".join(["1"] * (MAX_ROW_LENGTH + 1)),
            f"A row can hold at most {MAX_ROW_LENGTH} numbers; this one has {MAX_ROW_LENGTH + 1}.",
        ),
        (
            "1" * (MAX_ROW_CHARS + 1),
            f"That is too long: a row can be at most {MAX_ROW_CHARS} characters "
            f"(this one has {MAX_ROW_CHARS + 1}).",
        ),
    ],
)
def test_refused_rows_say_why(text: str, message: str) -> None:
    assert parse_row(text) == RowError(message)


def test_the_length_limit_counts_characters_not_bytes() -> None:
    text = ("1 " + "\u00a0" * 3) * (MAX_ROW_CHARS // 5)
    assert len(text) == MAX_ROW_CHARS
    assert isinstance(parse_row(text), RowError)  # too many numbers, but not too long
    assert "at most 16 numbers" in parse_row(text).message  # type: ignore[union-attr]


@pytest.mark.parametrize("size", [MAX_MAGNITUDE, MIN_MAGNITUDE])
def test_rows_at_the_edges_normalise_to_what_they_should(size: float) -> None:
    # What the edges protect: without the epsilon, a row of +-size normalises to +-1 exactly
    # (its squares neither overflow nor round to zero).
    row = parse_row(f"{size!r}, {-size!r}")
    assert isinstance(row, tuple)
    steps = layer_norm_steps(row, 0.0)
    assert steps.normalised == (1.0, -1.0)
