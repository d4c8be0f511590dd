"""The interface's words in the learner's language: gettext catalogues, one per locale.

Each locale's catalogue is locale/<code>/LC_MESSAGES/messages.mo, compiled by Babel from the
messages.po beside it (mk/i18n.mk: `make i18n-extract`, `i18n-update`, `i18n-compile`);
English is the source language and has none. The locale being drawn is a context variable:
the web app sets it for a request (activated), and gettext/ngettext read it, so the templates
(Jinja2's i18n extension) and the sentences composed in progress/ speak the same language
without passing it down every call. Plural forms follow each catalogue's Plural-Forms header,
which Babel writes from CLDR's rules (Arabic has six: zero, one, two, few, many, other).
"""

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
    """The compiled catalogue of `locale`, read once per process; English (the source
    language) translates nothing."""
    if locale == DEFAULT_LOCALE or locale not in LOCALES:
        return gettext_module.NullTranslations()
    with catalogue_path(locale).open("rb") as compiled:
        return gettext_module.GNUTranslations(compiled)


def current_locale() -> str:
    """The locale being drawn now (English outside activated)."""
    return _current.get()


@contextmanager
def activated(locale: str) -> Iterator[str]:
    """Draw and compose in `locale` within the block."""
    token = _current.set(locale if locale in LOCALES else DEFAULT_LOCALE)
    try:
        yield _current.get()
    finally:
        _current.reset(token)


def set_locale(locale: str) -> None:
    """Draw and compose in `locale` for the rest of the current context (a request's)."""
    _current.set(locale if locale in LOCALES else DEFAULT_LOCALE)


def N_(message: str) -> str:
    """`message` itself, marked for the catalogues (Babel's extraction reads N_): for words
    written down in one place and translated where they are shown."""
    return message


def gettext(message: str) -> str:
    """`message` in the current locale (itself where the catalogue lacks it)."""
    return translations(_current.get()).gettext(message)


def ngettext(singular: str, plural: str, count: int) -> str:
    """The form of `singular`/`plural` for `count` in the current locale's plural rules."""
    return translations(_current.get()).ngettext(singular, plural, count)


def pgettext(context: str, message: str) -> str:
    """`message` in the current locale, told apart from the same words elsewhere by
    `context`."""
    return translations(_current.get()).pgettext(context, message)


def listed(items: list[str]) -> str:
    """`items` as one list in the current locale's words (CLDR's list patterns, from Babel):
    "A and B" in English, "A und B" in German, "A وB" in Arabic."""
    return str(format_list(items, locale=_current.get())) if items else ""
