"""Numbers the way the current locale writes them: its decimal symbol and minus sign (CLDR's,
from Babel), and the separator between the numbers of a row that then stays unambiguous.

The numeric core writes every number with a point (numeric/display.py, progress/figures.py);
what the page shows goes through `shown` here, which swaps the point for the locale's symbol:
"-1.224736" is "-1,224736" in German, and "\u200e-1.224736" in Arabic, whose minus sign is a
left-to-right mark and a hyphen-minus (so that in right-to-left text the sign stays before
the digits, not after them). A row's numbers are then separated by "; " where the
decimal symbol is a comma ("[-1,224736; 0,000000]"), by ", " elsewhere. Words standing for a
value ("not a number", "infinity") are translated. Exports for machines (CSV, JSON) keep the
point: they do not come here.

Answers: a locale whose decimal symbol is a comma reads a typed comma as the decimal point
(numeric/answers.py, decimal_comma); a point is read in every locale.
"""

from __future__ import annotations

import functools
import re

from babel.numbers import get_decimal_symbol, get_minus_sign_symbol

from normdive.i18n.catalogues import N_, current_locale, translations

POINT = "."
# The words numeric/display.py writes for a value that is not a finite number (its
# NOT_A_NUMBER, INFINITY, MINUS_INFINITY), marked here so the catalogues carry them.
VALUE_WORDS = (N_("not a number"), N_("infinity"), N_("minus infinity"))
# A number as the numeric core writes it: digits, at most one point, an optional exponent.
_WRITTEN_NUMBER = re.compile(r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?")
# The same within a sentence: its sign only where no word or number runs into it ("GPT-2"
# and "1e-3" keep their hyphens).
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])-?(?=[0-9]|\.[0-9])|(?<=\d)\.(?=\d)")
MINUS = "-"


@functools.cache
def decimal_symbol(locale: str) -> str:
    """The locale's decimal symbol in Latin digits (CLDR): "." for en and ar, "," for de."""
    return str(get_decimal_symbol(locale, numbering_system="latn"))


@functools.cache
def minus_sign(locale: str) -> str:
    """The locale's minus sign with Latin digits (CLDR): "-", or for ar "\u200e-"."""
    return str(get_minus_sign_symbol(locale, numbering_system="latn"))


def uses_decimal_comma(locale: str | None = None) -> bool:
    """Whether `locale` (the current one by default) writes its decimals after a comma."""
    return decimal_symbol(locale or current_locale()) == ","


def list_separator(locale: str | None = None) -> str:
    """What separates a row's numbers: "; " where the decimal symbol is a comma, else ", "."""
    return "; " if uses_decimal_comma(locale) else ", "


def shown(text: str, locale: str | None = None) -> str:
    """A number the numeric core wrote (with a point), in `locale`'s writing (the current
    locale's by default); any other text translated as a word for a value."""
    locale = locale or current_locale()
    if not _WRITTEN_NUMBER.fullmatch(text):
        return translations(locale).gettext(text)
    symbol, minus = decimal_symbol(locale), minus_sign(locale)
    written = text if symbol == POINT else text.replace(POINT, symbol)
    return minus + written[1:] if written.startswith(MINUS) and minus != MINUS else written


def shown_in(text: str, locale: str | None = None) -> str:
    """Every number within a sentence or a figure ("21.3 %", "0.012", "-1.5") in the locale's
    writing; the rest left as it is."""
    locale = locale or current_locale()
    symbol, minus = decimal_symbol(locale), minus_sign(locale)
    if symbol == POINT and minus == MINUS:
        return text

    def written(found: re.Match[str]) -> str:
        return symbol if found.group() == POINT else found.group().replace(MINUS, minus)

    return _NUMBER_IN_TEXT.sub(written, text)


def shown_row(texts: list[str], locale: str | None = None) -> str:
    """A row of numbers the numeric core wrote, in the locale's writing: "[1,5; -2]"."""
    return "[" + list_separator(locale).join(shown(text, locale) for text in texts) + "]"
