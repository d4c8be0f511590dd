"""Numbers as each locale writes them: the decimal symbol, a row's separator, the words for
values that are not finite, and the answers a comma locale reads."""

from __future__ import annotations

import pytest

from normdive.i18n.catalogues import activated
from normdive.i18n.numbers import (
    VALUE_WORDS,
    decimal_symbol,
    list_separator,
    shown,
    shown_in,
    shown_row,
    uses_decimal_comma,
)
from normdive.numeric.answers import FormatError, ParsedAnswer, parse_answer
from normdive.numeric.display import INFINITY, MINUS_INFINITY, NOT_A_NUMBER


def test_each_locale_has_its_decimal_symbol() -> None:
    assert [decimal_symbol(locale) for locale in ("en", "de", "ar")] == [".", ",", "."]
    assert uses_decimal_comma("de") and not uses_decimal_comma("en")
    assert list_separator("de") == "; " and list_separator("ar") == ", "


def test_the_marked_words_are_the_ones_display_writes() -> None:
    assert VALUE_WORDS == (NOT_A_NUMBER, INFINITY, MINUS_INFINITY)


@pytest.mark.parametrize(
    ("locale", "text", "expected"),
    [
        ("en", "-1.224736", "-1.224736"),
        ("de", "-1.224736", "-1,224736"),
        # CLDR's Arabic minus with Latin digits: a left-to-right mark, then the hyphen-minus.
        ("ar", "-1.224736", "\u200e-1.224736"),
        ("ar", "1.224736", "1.224736"),
        ("de", "1e-5", "1e-5"),
        ("ar", "1e-5", "1e-5"),
        ("de", "not a number", "keine Zahl"),
        ("en", "not a number", "not a number"),
        ("ar", "infinity", "ما لا نهاية"),
    ],
)
def test_a_number_is_shown_in_the_locales_writing(locale: str, text: str, expected: str) -> None:
    assert shown(text, locale) == expected
    with activated(locale):
        assert shown(text) == expected


def test_rows_and_figures_in_sentences() -> None:
    assert shown_row(["1.5", "-2.000000"], "de") == "[1,5; -2,000000]"
    assert shown_row(["1.5", "-2.000000"], "en") == "[1.5, -2.000000]"
    assert shown_row(["1.5", "-2.000000"], "ar") == "[1.5, \u200e-2.000000]"
    # A sign only where a number begins: the hyphens of names and exponents are kept.
    assert shown_in("GPT-2 at 1e-3: -0.5 and (-2)", "ar") == (
        "GPT-2 at 1e-3: \u200e-0.5 and (\u200e-2)"
    )
    assert shown_in("21.3 % after 1200 steps, loss 0.012", "de") == (
        "21,3 % after 1200 steps, loss 0,012"
    )
    assert shown_in("21.3 %", "ar") == "21.3 %"


@pytest.mark.parametrize(
    ("raw", "value"),
    [("1,224", "1.224"), ("-0,5", "-0.5"), (",5", "0.5"), ("1,5/4", "3/8"), ("1.224", "1.224")],
)
def test_a_comma_locale_reads_a_decimal_comma_and_a_point(raw: str, value: str) -> None:
    parsed = parse_answer(raw, decimal_comma=True)
    assert isinstance(parsed, ParsedAnswer)
    assert parsed.canonical == value and parsed.raw == raw


@pytest.mark.parametrize("raw", ["1,2,3", "1.224,5", "1,2e,3"])
def test_a_comma_locale_still_refuses_what_is_no_number(raw: str) -> None:
    assert isinstance(parse_answer(raw, decimal_comma=True), FormatError)


def test_english_keeps_its_readable_refusal_of_a_comma() -> None:
    refused = parse_answer("1,224")
    assert isinstance(refused, FormatError)
    assert refused.message == "Use a point for the decimals, not a comma: 1.224."


def test_a_refusal_speaks_the_locale_it_is_read_in() -> None:
    with activated("de"):
        refused = parse_answer("abc", decimal_comma=True)
        assert isinstance(refused, FormatError)
        assert refused.message == (
            "Das ist keine Zahl. Schreiben Sie eine Zahl wie 0,667, -1,5, 2/3 oder 1e-3."
        )
    # A code, worded when read: the same refusal read on an English page is English.
    assert refused.message.startswith("That is not a number.")
