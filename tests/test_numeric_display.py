"""How numbers are shown: six decimals, words for NaN and infinities, no negative zero."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import pytest

from normdive.numeric.display import (
    format_input_number,
    format_input_row,
    format_number,
    format_row,
    non_finite_words,
)
from normdive.numeric.layernorm import Root
from normdive.progress import figures
from normdive.web.views.player import norm_text


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (2.0, "2.000000"),
        (2 / 3, "0.666667"),
        (-1.2247356859083902, "-1.224736"),
        (0.0, "0.000000"),
        (-0.0, "0.000000"),
        (-1e-9, "0.000000"),  # rounds to -0.000000: shown without its sign
        (-4.9e-7, "0.000000"),
        (-5.1e-7, "-0.000001"),
        (math.nan, "not a number"),
        (math.inf, "infinity"),
        (-math.inf, "minus infinity"),
        (1e21, "1000000000000000000000.000000"),  # positional, never "1e+21"
        (1e-150, "0.000000"),
        # Exact binary ties round to even: 1/128 = 0.0078125, 3/128 = 0.0234375.
        (0.0078125, "0.007812"),
        (0.0234375, "0.023438"),
        (-0.0078125, "-0.007812"),
        (2.5e-7, "0.000000"),
    ],
)
def test_format_number(x: float, text: str) -> None:
    assert format_number(x) == text


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (Fraction(2, 3), "0.666667"),
        (Fraction(-2, 3), "-0.666667"),
        (Fraction(1, 10), "0.100000"),  # one tenth, exactly
        (Fraction(-1, 10**9), "0.000000"),  # no sign on a zero
        # Exact ties at the sixth decimal round to even.
        (Fraction(1, 2 * 10**6), "0.000000"),
        (Fraction(3, 2 * 10**6), "0.000002"),
        (Fraction(-5, 2 * 10**6), "-0.000002"),
        (Fraction(10**30), "1" + "0" * 30 + ".000000"),  # every digit, none from a float
        (Root(Fraction(2, 3)), "0.816497"),
        (Root(Fraction(3, 2), negative=True), "-1.224745"),
        (Root(Fraction(0), negative=True), "0.000000"),
        (Root(Fraction(1, 10**5)), "0.003162"),
        (Root(Fraction(10**200)), "1" + "0" * 100 + ".000000"),
        # Exact roots that land on a tie: sqrt(0.0000025**2) = 0.0000025 -> 0.000002, and
        # 0.0000035 -> 0.000004 (ties to even, as for the rationals).
        (Root(Fraction(625, 10**14)), "0.000002"),
        (Root(Fraction(35**2, 10**14)), "0.000004"),
        (Root(Fraction(625, 10**14) * (1 + Fraction(1, 10**40))), "0.000003"),  # just above
        (None, "not a number"),  # 0/0
    ],
)
def test_format_number_of_exact_values(x: Fraction | Root | None, text: str) -> None:
    assert format_number(x) == text


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (Decimal("0.1"), "0.1"),
        (Decimal("0.10000000000000000001"), "0.10000000000000000001"),  # no float's 17 digits
        (Decimal("-0"), "0"),
        (Decimal("7.50E-2"), "0.075"),
        (Decimal("1E+100"), "1e+100"),
        (Decimal("1" + "0" * 40), "1e+40"),
        (Decimal("123456789012345678901234567890.5"), "1.234567890123456789012345678905e+29"),
        (3, "3"),
    ],
)
def test_format_input_number_of_a_typed_decimal(x: Decimal | int, text: str) -> None:
    assert format_input_number(x) == text


def test_format_row_brackets_the_six_decimal_numbers() -> None:
    assert format_row([-1.2247356859083902, -0.0, 1.2247356859083902]) == (
        "[-1.224736, 0.000000, 1.224736]"
    )
    assert format_row([math.nan] * 2) == "[not a number, not a number]"
    assert format_row([]) == "[]"


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (1.0, "1"),
        (-3.0, "-3"),
        (-0.0, "0"),
        (2.5, "2.5"),
        (0.1, "0.1"),
        (-1.5, "-1.5"),
        (1e-3, "0.001"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (123456.789, "123456.789"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (-1e150, "-1e+150"),
        (5e-324, "5e-324"),
        (1 / 3, "0.3333333333333333"),
        (math.nan, "not a number"),
        (math.inf, "infinity"),
        (-math.inf, "minus infinity"),
    ],
)
def test_format_input_number_follows_javascripts_string(x: float, text: str) -> None:
    assert format_input_number(x) == text


def test_format_input_row_shows_the_row_as_typed() -> None:
    assert format_input_row([1.0, 2.0, 3.0]) == "[1, 2, 3]"
    assert format_input_row([2.0, 2.0, 2.0, 6.0]) == "[2, 2, 2, 6]"
    assert format_input_row([4, 4, 4, 4]) == "[4, 4, 4, 4]"
    assert format_input_row([2.5, -1.0, 1e-7]) == "[2.5, -1, 1e-7]"


@pytest.mark.parametrize(
    ("x", "words"),
    [(math.nan, "not a number"), (math.inf, "infinity"), (-math.inf, "minus infinity")],
)
def test_non_finite_values_have_one_spelling_in_words(x: float, words: str) -> None:
    assert non_finite_words(x) == format_number(x) == figures.loss(x) == words
    assert figures.percent(x) == norm_text(x) == words
