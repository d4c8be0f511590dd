"""The interface's words: one gettext catalogue per locale (locale/<code>/LC_MESSAGES, from
`make i18n-compile`; English is the source), the locale drawn in a context variable."""

from __future__ import annotations

import functools
import gettext as gettext_module
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from importlib import resources
from pathlib import Path

from babel.lists import format_list

from normdive.i18n.locales import DEFAULT_LOCALE, LOCALES

CATALOGUE_DIR = Path(str(resources.files("normdive.i18n").joinpath("locale")))
DOMAIN = "messages"

_current: ContextVar[str] = ContextVar("normdive_locale", default=DEFAULT_LOCALE)


def catalogue_path(locale: str, suffix: str = ".mo") -> Path:
    return CATALOGUE_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}{suffix}"


@functools.cache
def translations(locale: str) -> gettext_module.NullTranslations:
    if locale == DEFAULT_LOCALE or locale not in LOCALES:
        return gettext_module.NullTranslations()
    with catalogue_path(locale).open("rb") as compiled:
        return gettext_module.GNUTranslations(compiled)


def current_locale() -> str:
    return _current.get()


@contextmanager
def activated(locale: str) -> Iterator[str]:
    token = _current.set(locale if locale in LOCALES else DEFAULT_LOCALE)
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def set_locale(locale: str) -> None:
    """Draw and compose in `locale` for the rest of the current context (a request's)."""
    _current.set(locale if locale in LOCALES else DEFAULT_LOCALE)


def N_(message: str) -> str:
    """`message` marked for Babel's extraction, translated where it is shown."""
    return message


def gettext(message: str) -> str:
    return translations(_current.get()).gettext(message)


def ngettext(singular: str, plural: str, count: int) -> str:
    return translations(_current.get()).ngettext(singular, plural, count)


def pgettext(context: str, message: str) -> str:
    return translations(_current.get()).pgettext(context, message)


def listed(items: list[str]) -> str:
    """`items` as one list by CLDR's list patterns: "A and B", "A und B", "A وB"."""
    return str(format_list(items, locale=_current.get())) if items else ""
