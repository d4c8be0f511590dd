"""How numbers are shown: six decimals, words for NaN and infinities, no negative zero."""

from __future__ import annotations

import math

import pytest

from normdive.numeric.display import (
    format_input_number,
    format_input_row,
    format_number,
    format_row,
    non_finite_words,
)
from normdive.progress import figures
from normdive.web.player import norm_text


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
