"""Parsing a typed answer exactly, its format errors, and the inclusive tolerance."""

from __future__ import annotations

from fractions import Fraction

import pytest

from normdive.numeric.answers import (
    MAX_ANSWER_CHARS,
    FormatError,
    ParsedAnswer,
    parse_answer,
    within_tolerance,
)

EXAMPLES = "Write a number such as 0.667, -1.5, 2/3 or 1e-3."
FRACTION_HELP = "Write a fraction as one plain number over another, like 2/3 or -1.5/4."


@pytest.mark.parametrize(
    ("raw", "value", "canonical"),
    [
        ("2", Fraction(2), "2"),
        (" 2 ", Fraction(2), "2"),
        ("\t2\n", Fraction(2), "2"),
        ("+2", Fraction(2), "2"),
        ("−1.5", Fraction(-3, 2), "-1.5"),  # U+2212
        ("-1.5", Fraction(-3, 2), "-1.5"),
        ("2e0", Fraction(2), "2"),
        ("1E-3", Fraction(1, 1000), "0.001"),
        ("6.67E-1", Fraction(667, 1000), "0.667"),
        ("0.6667", Fraction(6667, 10000), "0.6667"),
        ("0.50", Fraction(1, 2), "0.5"),
        (".5", Fraction(1, 2), "0.5"),
        ("3.", Fraction(3), "3"),
        ("100", Fraction(100), "100"),
        ("1e2", Fraction(100), "100"),
        ("-0", Fraction(0), "0"),
        ("0.000", Fraction(0), "0"),
        ("2/3", Fraction(2, 3), "2/3"),
        ("-2/3", Fraction(-2, 3), "-2/3"),
        ("−2/3", Fraction(-2, 3), "-2/3"),
        ("+2/3", Fraction(2, 3), "2/3"),
        ("2 / 3", Fraction(2, 3), "2/3"),
        ("4/6", Fraction(2, 3), "2/3"),
        ("4/2", Fraction(2), "2"),
        ("1.5/4", Fraction(3, 8), "3/8"),
        ("0/5", Fraction(0), "0"),
        ("1e-40", Fraction(1, 10**40), "1E-40"),
        ("1e-400", Fraction(1, 10**400), "1E-400"),  # tiny is fine, only huge is refused
        ("1e308", Fraction(10**308), "1E+308"),
        # The exact value of the typed text, never a float round trip.
        ("0.1", Fraction(1, 10), "0.1"),
        ("0.30000000000000000000000000001", Fraction(3 * 10**28 + 1, 10**29), None),
    ],
)
def test_accepted_answers_are_exact(raw: str, value: Fraction, canonical: str | None) -> None:
    parsed = parse_answer(raw)
    assert isinstance(parsed, ParsedAnswer)
    assert parsed.raw == raw
    assert parsed.value == value
    if canonical is not None:
        assert parsed.canonical == canonical


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", f"Type a number first. {EXAMPLES}"),
        ("   ", f"Type a number first. {EXAMPLES}"),
        ("two", f"That is not a number. {EXAMPLES}"),
        ("2x", f"That is not a number. {EXAMPLES}"),
        ("1_000", f"That is not a number. {EXAMPLES}"),
        ("0x10", f"That is not a number. {EXAMPLES}"),
        ("- 2", f"That is not a number. {EXAMPLES}"),
        ("٣x", f"That is not a number. {EXAMPLES}"),  # an Arabic-Indic digit is a digit
        ("NaN", f"That is not a number (NaN); the answer is a finite number. {EXAMPLES}"),
        ("-nan", f"That is not a number (NaN); the answer is a finite number. {EXAMPLES}"),
        ("inf", f"That is infinite; the answer is a finite number. {EXAMPLES}"),
        ("−Infinity", f"That is infinite; the answer is a finite number. {EXAMPLES}"),
        ("∞", f"That is infinite; the answer is a finite number. {EXAMPLES}"),
        ("2e308", f"That number is too large to work with here. {EXAMPLES}"),
        ("-1e400", f"That number is too large to work with here. {EXAMPLES}"),
        ("1e401", "That exponent is out of range: keep it between -400 and 400."),
        ("1e-401", "That exponent is out of range: keep it between -400 and 400."),
        ("1e999999999", "That exponent is out of range: keep it between -400 and 400."),
        ("1e" + "9" * 60, "That exponent is out of range: keep it between -400 and 400."),
        ("1/0", "That divides by zero: the number under the / cannot be 0."),
        ("2/0.000", "That divides by zero: the number under the / cannot be 0."),
        ("2/-3", FRACTION_HELP),
        ("1/2/3", FRACTION_HELP),
        ("1e3/2", FRACTION_HELP),
        ("2/", f"That is not a number. {EXAMPLES}"),
        ("/3", f"That is not a number. {EXAMPLES}"),
        ("0,5", "Use a point for the decimals, not a comma: 0.5."),
        ("−0,667", "Use a point for the decimals, not a comma: -0.667."),
        (
            "1" * (MAX_ANSWER_CHARS + 1),
            "That is too long: an answer can be at most 64 characters (this one has 65).",
        ),
    ],
)
def test_format_errors_say_what_is_wrong(raw: str, message: str) -> None:
    parsed = parse_answer(raw)
    assert isinstance(parsed, FormatError)
    assert (parsed.raw, parsed.message) == (raw, message)


def test_sixty_four_characters_is_still_accepted() -> None:
    raw = "0." + "6" * (MAX_ANSWER_CHARS - 2)
    assert len(raw) == MAX_ANSWER_CHARS
    assert isinstance(parse_answer(raw), ParsedAnswer)


def test_a_huge_exponent_is_refused_before_any_big_number_is_built() -> None:
    # 1e99999999999 as a Fraction would need about 40 GB; the guard answers at once.
    result = parse_answer("9" * 40 + "e" + "9" * 20)
    assert isinstance(result, FormatError)
    assert "exponent" in result.message


@pytest.mark.parametrize(
    ("typed", "exact", "lands"),
    [
        ("0.501", "0.5", True),  # exactly 0.001 away: inclusive
        ("0.499", "0.5", True),
        ("0.5011", "0.5", False),
        ("0.4989", "0.5", False),
        ("0.5010000000000000000000000001", "0.5", False),  # no float would see this
        ("0.667", "2/3", True),
        ("0.6667", "2/3", True),
        ("0.665", "2/3", False),
        ("2/3", "2/3", True),
    ],
)
def test_within_tolerance_is_exact_and_inclusive(typed: str, exact: str, lands: bool) -> None:
    parsed = parse_answer(typed)
    target = parse_answer(exact)
    assert isinstance(parsed, ParsedAnswer)
    assert isinstance(target, ParsedAnswer)
    assert within_tolerance(parsed.value, target.value, Fraction(1, 1000)) is lands


@pytest.mark.parametrize(
    ("typed", "ascii_text"),
    [
        ("١٫٥", "1.5"),  # Arabic-Indic digits, the Arabic decimal separator
        ("-٠٫٢٢٤", "-0.224"),
        ("٢/٣", "2/3"),
        ("١e-٣", "1e-3"),
        ("۱٫۲۲۴", "1.224"),  # Extended Arabic-Indic (Persian, Urdu keyboards)
        ("٣", "3"),
    ],
)
@pytest.mark.parametrize("decimal_comma", [False, True])
def test_arabic_script_digits_are_read_in_every_locale(
    typed: str, ascii_text: str, decimal_comma: bool
) -> None:
    parsed = parse_answer(typed, decimal_comma=decimal_comma)
    wanted = parse_answer(ascii_text)
    assert isinstance(parsed, ParsedAnswer) and isinstance(wanted, ParsedAnswer)
    assert parsed.same_value(wanted) and parsed.canonical == wanted.canonical
    assert parsed.raw == typed


def test_an_arabic_digit_with_a_decimal_comma_where_the_locale_writes_one() -> None:
    german = parse_answer("١,٥", decimal_comma=True)
    assert isinstance(german, ParsedAnswer) and german.canonical == "1.5"
    refused = parse_answer("١,٥")
    assert isinstance(refused, FormatError) and "1.5" in refused.message
