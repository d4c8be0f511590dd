"""Which locale a request gets: the learner's choice, the launch's locale, Accept-Language,
English; each only when the lesson speaks it."""

from __future__ import annotations

import pytest

from normdive.i18n.locales import (
    DEFAULT_LOCALE,
    LOCALES,
    accepted,
    direction,
    negotiate,
    supported,
)


def test_the_lesson_speaks_english_german_and_arabic() -> None:
    assert LOCALES == ("en", "de", "ar")
    assert DEFAULT_LOCALE == "en"


@pytest.mark.parametrize(
    ("tag", "locale"),
    [
        ("de", "de"),
        ("de-DE", "de"),
        ("de_AT", "de"),
        ("DE-ch", "de"),
        ("ar-EG", "ar"),
        ("en-GB", "en"),
        ("fr-FR", None),
        ("", None),
        (None, None),
        ("deutsch", None),
    ],
)
def test_a_tag_is_matched_by_its_primary_language(tag: str | None, locale: str | None) -> None:
    assert supported(tag) == locale


def test_arabic_is_right_to_left() -> None:
    assert direction("ar") == "rtl"
    assert direction("de") == direction("en") == "ltr"


def test_accept_language_is_read_by_weight_then_order() -> None:
    header = "fr-CH, fr;q=0.9, de;q=0.8, ar;q=0.8, *;q=0.5, en;q=0"
    assert accepted(header) == ("fr-CH", "fr", "de", "ar")
    assert accepted("de;q=oops, ar;q=2, en-US") == ("en-US",)
    assert accepted("") == accepted(None) == ()


@pytest.mark.parametrize(
    ("chosen", "launched", "header", "locale"),
    [
        ("ar", "de-DE", "en", "ar"),  # the learner's choice first
        (None, "de-DE", "ar", "de"),  # then the launch's locale
        ("xx", "de-DE", "ar", "de"),  # a choice the lesson does not speak is no choice
        (None, None, "fr, ar;q=0.9, de;q=0.8", "ar"),  # then the browser's first we speak
        (None, "fr-FR", "de", "de"),
        (None, None, "fr, es", "en"),  # then English
        (None, None, None, "en"),
    ],
)
def test_the_order_of_choice(
    chosen: str | None, launched: str | None, header: str | None, locale: str
) -> None:
    assert negotiate(chosen=chosen, launched=launched, accept_language=header) == locale


def test_the_asking_pages_own_language_comes_first() -> None:
    assert negotiate(chosen="ar", launched="de", accept_language="en", page="de-DE") == "de"
    assert negotiate(chosen="ar", launched=None, accept_language=None, page="fr") == "ar"


def test_a_long_header_is_read_only_so_far() -> None:
    assert negotiate(chosen=None, launched=None, accept_language="fr," * 2000 + "de") == "en"
