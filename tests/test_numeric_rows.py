"""Parsing "Try your own row": what is accepted, and what each refusal says."""

from __future__ import annotations

import re
import sys
import unicodedata
from decimal import Decimal
from fractions import Fraction

import pytest

from locale_rows import LOCALE_ROWS
from normdive.i18n.catalogues import activated
from normdive.i18n.numbers import uses_decimal_comma
from normdive.numeric.answers import FormatError, parse_answer
from normdive.numeric.display import (
    format_input_number,
    format_input_row,
    format_number,
    format_row,
)
from normdive.numeric.layernorm import layer_norm_steps
from normdive.numeric.numbers import NORMAL_FORM, RAISED_OR_LOWERED
from normdive.numeric.rows import (
    MAX_ROW_CHARS,
    MAX_ROW_LENGTH,
    RowError,
    parse_row,
    parse_row_exact,
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
        ("0e-999999999999", (0.0,)),  # a zero, whatever its exponent
        # NFKC: full-width digits, signs, points and commas, and wide spaces, read as ASCII.
        ("３ １", (3.0, 1.0)),
        ("－１．５，　２", (-1.5, 2.0)),  # full-width minus, point, comma; ideographic space
        ("[１ｅ－３]", (1e-3,)),
        ("1\u20032", (1.0, 2.0)),  # an em space is a space
        ("−３", (-3.0,)),  # the Unicode minus is left alone by NFKC, and still a minus
        ("1\u00a02\u202f3", (1.0, 2.0, 3.0)),  # no-break spaces pasted from a phone
        (",".join(["1"] * MAX_ROW_LENGTH), (1.0,) * MAX_ROW_LENGTH),
    ],
)
def test_accepted_rows(text: str, row: tuple[float, ...]) -> None:
    assert parse_row(text) == row


@pytest.mark.parametrize(
    ("text", "row", "label"),
    [
        ("0.1 0.1 0.1", ("0.1", "0.1", "0.1"), "[0.1, 0.1, 0.1]"),
        ("0.10000000000000000001", ("0.10000000000000000001",), "[0.10000000000000000001]"),
        ("007.50e-2, .5, 3., -0", ("0.075", "0.5", "3", "-0"), "[0.075, 0.5, 3, 0]"),
        ("1e100 1e-100", ("1e100", "1e-100"), "[1e+100, 1e-100]"),
        ("1" + "0" * 100, ("1e100",), "[1e+100]"),
        ("３．３", ("3.3",), "[3.3]"),
    ],
)
def test_the_exact_row_keeps_every_digit_typed(text: str, row: tuple[str, ...], label: str) -> None:
    exact = parse_row_exact(text)
    assert isinstance(exact, tuple)
    assert [str(x) for x in exact] == [str(Decimal(x)) for x in row]
    assert format_input_row(exact) == label


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
            "“two” is not a number. Write numbers like 2, -1.5, 2/3 or 1e-3, separated by commas "
            "or spaces.",
        ),
        (
            "1; 2",
            "“1;” is not a number. Write numbers like 2, -1.5, 2/3 or 1e-3, separated by commas "
            "or spaces.",
        ),
        (
            "1_000",
            "“1_000” is not a number. Write numbers like 2, -1.5, 2/3 or 1e-3, separated by commas "
            "or spaces.",
        ),
        (
            "٣x",  # an Arabic-Indic digit is read as its digit (numbers.ARABIC_FORMS), as quoted
            "“3x” is not a number. Write numbers like 2, -1.5, 2/3 or 1e-3, separated by commas "
            "or spaces.",
        ),
        (
            "abcdefghijklmnopqrstuvwxyz",
            "“abcdefghijklmnopqrst…” is not a number. Write numbers like 2, -1.5, 2/3 or 1e-3, "
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
        # NFKC makes a full-width comma a comma: decimal commas are still caught, and quoted
        # as read.
        (
            "０，５ １，５",
            "“0,5” looks like a decimal comma: write decimals with a point, as in 0.5, and part "
            "the entries with commas or spaces.",
        ),
        ("１，，２", "There are two commas with no number between them."),
        ("1, NaN", "“NaN” is not allowed: every entry must be a finite number."),
        ("ｉｎｆ", "“inf” is not allowed: every entry must be a finite number."),
        ("-inf", "“-inf” is not allowed: every entry must be a finite number."),
        ("Infinity 2", "“Infinity” is not allowed: every entry must be a finite number."),
        # Decided on the decimal typed, not on a float (1e400 is infinite, 1e-999 zero, and
        # 1.00000000000000000001e100 the float 1e100).
        *(
            (text, f"“{token}” is too large: keep every entry between -1e100 and 1e100.")
            for text, token in (
                ("1e400", "1e400"),
                ("1e154 -1e154", "1e154"),
                ("1, -1.0000001e100", "-1.0000001e100"),
                ("1.7e308", "1.7e308"),
                ("1.00000000000000000001e100", "1.000000000000000000…"),
                ("1e99999999999999999999", "1e999999999999999999…"),
            )
        ),
        *(
            (
                text,
                f"“{token}” is too small: an entry other than 0 must be at least 1e-100 in size.",
            )
            for text, token in (
                ("2.2e-308 -2.2e-308", "2.2e-308"),
                ("0, 9.99e-101", "9.99e-101"),
                ("5e-324", "5e-324"),
                ("1e-999", "1e-999"),
                ("0.99999999999999999999e-100", "0.999999999999999999…"),
                ("1e-99999999999999999999", "1e-99999999999999999…"),
            )
        ),
        # NFKC would silently read these as other numbers ("3²" as 32).
        *(
            (
                text,
                f"“{char}” is a raised or lowered character: write every entry on the line, "
                "with powers of ten as in 1e-3.",
            )
            for text, char in (("3²", "²"), ("1e⁻³", "⁻"), ("x₁ 2", "₁"), ("2ᵉ5", "ᵉ"))
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


@pytest.mark.parametrize("size", ["1e100", "1e-100"])
def test_rows_at_the_edges_normalise_to_what_they_should(size: str) -> None:
    # Without the epsilon, a row of +-size normalises to +-1 exactly.
    row = parse_row_exact(f"{size}, −{size}")
    assert isinstance(row, tuple)
    assert format_row(layer_norm_steps(row, 0).normalised) == "[1.000000, -1.000000]"


def test_the_raised_and_lowered_characters_are_every_one_nfkc_reads_as_part_of_a_number() -> None:
    # Every superscript or subscript whose NFKC form holds a digit, a sign or an "e", and no
    # other character, is in the list both twins refuse.
    listed = re.compile(f"[{RAISED_OR_LOWERED}]")
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        tag = unicodedata.decomposition(char).split(" ")[0]
        normal = unicodedata.normalize(NORMAL_FORM, char)
        number_like = tag in {"<super>", "<sub>"} and any(c in "0123456789+-−eE." for c in normal)
        assert bool(listed.fullmatch(char)) == number_like, hex(code)


# One set of rules for a typed answer and a row's entry (numeric/numbers.py): each text is a
# number to both or to neither, and the same number.
@pytest.mark.parametrize(
    "text",
    [
        "2/3",
        "-1.5/4",
        "+2/3",
        "2 / 3",
        "−2/3",  # U+2212
        "２／３",  # full width
        "4/6",
        "-0/5",
        "0.5",
        "１．５",
        ".5",
        "3.",
        "1e-3",
        "+2",
        "1/0",
        "2/0.000",
        "2/-3",
        "1e2/3",
        "1/2/3",
        "2/",
        "/3",
        "nan",
        "-Infinity",
        "∞",
        "3²",
        "1_000",
        "two",
    ],
)
def test_a_row_entry_and_an_answer_follow_one_set_of_rules(text: str) -> None:
    answer = parse_answer(text)
    row = parse_row_exact(text)
    if isinstance(answer, FormatError):
        assert isinstance(row, RowError), (text, row)
    else:
        assert not isinstance(row, RowError), (text, row)
        [entry] = row
        assert Fraction(entry) == answer.value


@pytest.mark.parametrize(
    ("text", "label", "mean"),
    [
        ("1/3, 2/3, 1", "[1/3, 2/3, 1]", "0.666667"),
        ("[2 / 3 4/6]", "[2/3, 2/3]", "0.666667"),
        ("-1.5/4 3/8", "[-3/8, 3/8]", "0.000000"),
        ("4/2, 1", "[2, 1]", "1.500000"),
    ],
)
def test_a_row_takes_fractions(text: str, label: str, mean: str) -> None:
    exact = parse_row_exact(text)
    assert isinstance(exact, tuple)
    assert format_input_row(exact) == label
    assert format_number(layer_norm_steps(exact, 0).mean) == mean


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1, 1/0", "“1/0” divides by zero: the number under the / cannot be 0."),
        (
            "2/-3",
            "“2/-3” is not a fraction to work with: write one plain number over another, like "
            "2/3 or -1.5/4.",
        ),
        (
            "1" + "0" * 101 + "/1",
            "“10000000000000000000…” is too large: keep every entry between -1e100 and 1e100.",
        ),
        (
            "1/1" + "0" * 101,
            "“1/100000000000000000…” is too small: an entry other than 0 must "
            "be at least 1e-100 in size.",
        ),
    ],
)
def test_a_fraction_out_of_place_says_why(text: str, message: str) -> None:
    assert parse_row_exact(text) == RowError(message)


def test_a_fraction_at_the_bounds_is_kept() -> None:
    assert parse_row_exact("1" + "0" * 100 + "/1, 1/1" + "0" * 100) == (
        Fraction(10**100),
        Fraction(1, 10**100),
    )


@pytest.mark.parametrize(("text", "with_point", "with_comma"), LOCALE_ROWS)
def test_a_row_in_each_locales_writing(
    text: str, with_point: list[str] | None, with_comma: list[str] | None
) -> None:
    for decimal_comma, wanted in ((False, with_point), (True, with_comma)):
        parsed = parse_row_exact(text, decimal_comma=decimal_comma)
        got = None if isinstance(parsed, RowError) else [format_input_number(x) for x in parsed]
        assert got == wanted, (text, decimal_comma, parsed)


@pytest.mark.parametrize(
    ("locale", "text", "message"),
    [
        ("de", "1;;2", "Zwischen zwei Semikolons steht keine Zahl."),
        (
            "de",
            "1,2,3",
            "„1,2,3“ ist keine Zahl. Schreiben Sie Zahlen wie 2; -1,5; 2/3 oder 1e-3, getrennt "
            "durch Semikolons oder Leerzeichen.",
        ),
        ("ar", "1,,2", "هناك فاصلتان لا عدد بينهما."),
    ],
)
def test_a_rows_problem_is_said_in_the_learners_language(
    locale: str, text: str, message: str
) -> None:
    with activated(locale):
        parsed = parse_row_exact(text, decimal_comma=uses_decimal_comma())
    assert parsed == RowError(message)
