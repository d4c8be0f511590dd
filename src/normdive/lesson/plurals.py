"""Sentences that count something, in each language's plural forms: one template for every
count, or a table keyed by CLDR plural category (en, de: one, other; ar: all six). Babel's
rules pick the form; a table without the count's category falls back to `other`."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, Literal

from babel import Locale
from pydantic import StringConstraints

from normdive.i18n.catalogues import current_locale

# CLDR's plural categories, in CLDR's order.
CATEGORIES = ("zero", "one", "two", "few", "many", "other")
OTHER = "other"
Category = Literal["zero", "one", "two", "few", "many", "other"]
_Form = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Counted = _Form | dict[Category, _Form]


def is_table(value: object) -> bool:
    """Whether `value`, as read from TOML, is text keyed by CLDR categories, `other` among them."""
    return (
        isinstance(value, dict)
        and OTHER in value
        and all(key in CATEGORIES and isinstance(form, str) for key, form in value.items())
    )


def forms(text: str | Mapping[Category, str]) -> dict[str, str]:
    """The forms of a counted text by category; a plain template serves every count."""
    return {OTHER: text} if isinstance(text, str) else {str(k): form for k, form in text.items()}


@functools.cache
def categories(locale: str) -> frozenset[str]:
    """The categories `locale`'s plural rules choose among: {"one", "other"} for en and de."""
    return frozenset(Locale.parse(locale).plural_form.tags) | {OTHER}


def category(count: int | Decimal, locale: str) -> str:
    """The CLDR category of `count` in `locale`: "few" for 3 in Arabic, "other" in German."""
    return str(Locale.parse(locale).plural_form(count))


def check_categories(text: str | Mapping[str, str], locale: str) -> None:
    """Raise ValueError when a table lacks one of `locale`'s categories or holds one its rules
    never choose (a plain template serves every count)."""
    if isinstance(text, str):
        return
    wanted = categories(locale)
    missing = [name for name in CATEGORIES if name in wanted and name not in text]
    if missing:
        raise ValueError(
            f"needs the plural form {missing[0]!r}: the {locale!r} forms are "
            + ", ".join(name for name in CATEGORIES if name in wanted)
        )
    unused = [name for name in CATEGORIES if name in text and name not in wanted]
    if unused:
        raise ValueError(f"has the plural form {unused[0]!r}, which {locale!r} never uses")


def counted(
    text: str | Mapping[Category, str],
    number: int | Decimal,
    locale: str | None = None,
    /,
    **fields: object,
) -> str:
    """`text`'s form for the count `number` in `locale` (the current locale by default),
    filled with `fields` (the count among them, under its placeholder's name)."""
    chosen = forms(text)
    form = chosen.get(category(number, locale or current_locale()), chosen[OTHER])
    return form.format(**fields)
