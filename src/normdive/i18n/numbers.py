"""Numbers as the current locale writes them (CLDR, through Babel): "-1.224736" is "-1,224736"
in German and "\u200e-1.224736" in Arabic (the mark keeps the sign before the digits in
right-to-left text). Exports for machines keep the point: they do not come here."""

from __future__ import annotations

import functools
import re

from babel.numbers import get_decimal_symbol, get_minus_sign_symbol

from normdive.i18n.catalogues import N_, current_locale, translations

POINT = "."
# numeric/display.py's words for non-finite values, marked for the catalogues.
VALUE_WORDS = (N_("not a number"), N_("infinity"), N_("minus infinity"))
_WRITTEN_NUMBER = re.compile(r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?")
# Its sign only where no word or number runs into it ("GPT-2" and "1e-3" keep hyphens).
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])-?(?=[0-9]|\.[0-9])|(?<=\d)\.(?=\d)")
MINUS = "-"


@functools.cache
def decimal_symbol(locale: str) -> str:
    """The locale's decimal symbol in Latin digits (CLDR): "." for en and ar, "," for de."""
    return str(get_decimal_symbol(locale, numbering_system="latn"))


@functools.cache
def minus_sign(locale: str) -> str:
    return str(get_minus_sign_symbol(locale, numbering_system="latn"))


def uses_decimal_comma(locale: str | None = None) -> bool:
    return decimal_symbol(locale or current_locale()) == ","


def list_separator(locale: str | None = None) -> str:
    return "; " if uses_decimal_comma(locale) else ", "


def shown(text: str, locale: str | None = None) -> str:
    """A number numeric/ wrote, in `locale`'s writing; other text translated as a value's word."""
    locale = locale or current_locale()
    if not _WRITTEN_NUMBER.fullmatch(text):
        return translations(locale).gettext(text)
    symbol, minus = decimal_symbol(locale), minus_sign(locale)
    written = text if symbol == POINT else text.replace(POINT, symbol)
    return minus + written[1:] if written.startswith(MINUS) and minus != MINUS else written


def shown_in(text: str, locale: str | None = None) -> str:
    locale = locale or current_locale()
    symbol, minus = decimal_symbol(locale), minus_sign(locale)
    if symbol == POINT and minus == MINUS:
        return text

    def written(found: re.Match[str]) -> str:
        return symbol if found.group() == POINT else found.group().replace(MINUS, minus)

    return _NUMBER_IN_TEXT.sub(written, text)


def shown_row(texts: list[str], locale: str | None = None) -> str:
    return "[" + list_separator(locale).join(shown(text, locale) for text in texts) + "]"
