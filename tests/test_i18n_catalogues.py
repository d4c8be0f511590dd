"""The gettext catalogues: each compiled .mo is the compilation of its .po (the .mo files
are committed: mk/i18n.mk compiles them), every message is translated in every locale, and
the plural forms follow CLDR's rules."""

from __future__ import annotations

import pytest
from babel import Locale
from babel.messages.catalog import Catalog
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from normdive.i18n.catalogues import (
    activated,
    catalogue_path,
    current_locale,
    gettext,
    ngettext,
    translations,
)
from normdive.i18n.locales import DEFAULT_LOCALE, LOCALES

TRANSLATED = [locale for locale in LOCALES if locale != DEFAULT_LOCALE]


def catalogue(locale: str) -> Catalog:
    with catalogue_path(locale, ".po").open("rb") as source:
        return read_po(source, locale=locale)


def translations_in(catalog: Catalog) -> dict[tuple[object, object], object]:
    """(id, context) -> translation of every message but the header, lists made tuples and
    bytes text (some Babel releases read a .mo's contexts as bytes). The header is left out: it
    names the Babel that compiled it, which any 2.x may be."""

    def plain(value: object) -> object:
        if isinstance(value, bytes):
            return value.decode()
        return tuple(value) if isinstance(value, list | tuple) else value

    return {(plain(m.id), plain(m.context)): plain(m.string) for m in catalog if m.id}


@pytest.mark.parametrize("locale", TRANSLATED)
def test_the_compiled_catalogue_is_current(locale: str) -> None:
    with catalogue_path(locale).open("rb") as compiled:
        held = read_mo(compiled)
    source = catalogue(locale)
    stale = f"{catalogue_path(locale)} is not the compilation of its .po: run make i18n-compile"
    assert translations_in(held) == translations_in(source), stale
    # gettext picks a plural form by the compiled header's rule.
    assert held.plural_forms == source.plural_forms, stale


@pytest.mark.parametrize("locale", TRANSLATED)
def test_every_message_is_translated(locale: str) -> None:
    untranslated = [
        message.id
        for message in catalogue(locale)
        if message.id
        and (not message.string if isinstance(message.string, str) else not all(message.string))
    ]
    fuzzy = [message.id for message in catalogue(locale) if message.id and message.fuzzy]
    assert untranslated == []
    assert fuzzy == []


def test_every_locale_has_the_same_messages() -> None:
    ids = {locale: {message.id for message in catalogue(locale)} for locale in TRANSLATED}
    first = ids[TRANSLATED[0]]
    assert all(found == first for found in ids.values())


# CLDR's plural categories in the order gettext's forms are written in each .po.
CATEGORIES = ("zero", "one", "two", "few", "many", "other")


@pytest.mark.parametrize("locale", TRANSLATED)
def test_plural_forms_follow_cldr(locale: str) -> None:
    rules = Locale.parse(locale).plural_form
    used = [category for category in CATEGORIES if category in rules.tags or category == "other"]
    compiled = translations(locale)
    for count in [*range(0, 240), 1000, 1001, 1002, 1011, 1100]:
        form: int = compiled.plural(count)  # GNUTranslations' parsed formula
        assert form == used.index(rules(count)), (locale, count)


def test_gettext_speaks_the_activated_locale() -> None:
    assert current_locale() == "en"
    with activated("de"):
        assert current_locale() == "de"
        assert gettext("Skip to the lesson") == "Zur Lektion springen"
        with activated("ar"):
            assert gettext("Skip to the lesson") == "انتقل إلى الدرس"
        assert current_locale() == "de"
    assert gettext("Skip to the lesson") == "Skip to the lesson"
    with activated("xx"):
        assert current_locale() == "en"
    assert ngettext("%(num)d try", "%(num)d tries", 2) == "%(num)d tries"
